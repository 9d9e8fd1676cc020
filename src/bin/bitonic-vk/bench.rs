//! `bitonic-vk bench`: sweeps sizes, key types, payloads, orders and distributions; GPU time
//! from timestamps, wall time with transfers, CPU baselines, every result checked.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use bitonic_vk::{Calibration, DeviceType, Order, SortKey, Sorter, SorterDesc, WarmUp};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::args::{GpuArgs, OrderArg, TimeFrom, TuningArgs};
use crate::data::{self, BenchKey, Distribution, KeyType};
use crate::failure::Failure;
use crate::output::{self, Panel, Series};
use crate::sizes::{parse_counts, parse_sizes, CountList, SizeList};

#[derive(Args)]
pub struct BenchArgs {
    /// Sizes: a comma-separated list of numbers, powers such as 2^20, and doubling ranges such as
    /// 2^10..2^24 [default: 2^10..2^24, capped by the device's limits, and at 2^18 on a CPU device].
    #[arg(long, value_parser = parse_sizes, value_name = "LIST")]
    sizes: Option<SizeList>,
    /// Key types, comma-separated.
    #[arg(long = "type", value_enum, value_delimiter = ',', default_value = "u32")]
    types: Vec<KeyType>,
    /// Keys alone, key+value pairs (u32 values), or both.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "keys,pairs")]
    payload: Vec<Payload>,
    /// Orders, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ascending")]
    order: Vec<OrderArg>,
    /// Key distributions, comma-separated.
    #[arg(long = "dist", value_enum, value_delimiter = ',', default_value = "uniform")]
    dists: Vec<Distribution>,
    /// Timed sorts per case (GPU time: back to back in one command buffer; wall time: one
    /// submission each).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=200))]
    reps: u32,
    /// Untimed sorts per case before the timed ones.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=40))]
    warmup: u32,
    /// Seed of the random keys.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Skip checking results against the CPU's sort (they are checked by default).
    #[arg(long)]
    no_verify: bool,
    /// Also write the results as a JSON array to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write the results as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also draw time and Mkeys/s against n, log-log, as SVG to FILE.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    #[command(flatten)]
    tuning: TuningArgs,
    /// Where the GPU time starts: at the end of an empty compute dispatch after the input's copy
    /// (standing for the pass that wrote the keys; a compute-to-compute barrier before the first
    /// pass, as before every other), or at the end of the copy (the transfer-to-compute barrier
    /// included).
    #[arg(long, value_enum, default_value_t = TimeFrom::Compute)]
    time_from: TimeFrom,
    /// How the timed sorts reach the GPU: `batch`, back to back in one command buffer, so that the
    /// GPU never idles between them; `each`, every sort (its copy into place and its passes) a
    /// submission of its own, waited for before the next is recorded: one sort a frame, as a
    /// renderer runs it, the GPU idle while the host waits and records. The warm-up until a sort's
    /// time settles runs in batches either way; with `each`, the --warmup sorts and the ~0.3 s
    /// lead before the timed ones are submitted one by one too.
    #[arg(long, value_enum, default_value_t = Submit::Batch)]
    submit: Submit,
    /// GPU-side counts: sort through a binding with the capacity of each size whose count, written
    /// on the GPU, is each of these (numbers, powers such as 2^15, or shares such as 25%): the
    /// passes recorded for the capacity, every one after the first trimmed to the count by an
    /// indirect dispatch, as a renderer's culled particles are. The first min(count, n) elements
    /// are checked sorted and the rest unchanged; the CPU baselines sort that many.
    #[arg(long, value_parser = parse_counts, value_name = "LIST")]
    count: Option<CountList>,
}

/// Keys alone or key-value pairs (`bench`'s and `startup`'s `--payload`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Payload {
    Keys,
    Pairs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Submit {
    Batch,
    Each,
}

/// One measured case, as the JSON and CSV outputs hold it.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    n: u64,
    /// The GPU-side count (`--count`; left out without): the elements sorted are min(count, n).
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    key_type: KeyType,
    pairs: bool,
    order: &'static str,
    distribution: Distribution,
    passes: usize,
    /// GPU time from timestamps (None where the device has none).
    gpu_ms_median: Option<f64>,
    gpu_ms_min: Option<f64>,
    gpu_ms_max: Option<f64>,
    /// One sort including upload and download, host clock.
    wall_ms_median: f64,
    /// n over the GPU median (or over the wall median without timestamps).
    mkeys_per_s: f64,
    /// Bytes of the input (keys, and values with pairs) read and written once, over the GPU median.
    gb_per_s: Option<f64>,
    /// The pass model's prediction (None without timestamps).
    model_ms: Option<f64>,
    cpu_ms_median: f64,
    par_cpu_ms_median: f64,
    verified: bool,
    /// How the timed sorts were submitted (`--submit`).
    submit: Submit,
}

/// `bench` keeps a GPU busy before timing until a sort's time settles (`WarmUp`), in
/// batches of about this long.
const WARM_BATCH: Duration = Duration::from_millis(100);
/// Untimed GPU work at the start of the timed command buffer.
const IN_BUFFER_WARM_UP: Duration = Duration::from_millis(300);
/// The most sorts `Sorter::time_repeated` runs in one command buffer.
const MAX_SORTS_PER_BUFFER: u32 = 240;
/// How long each CPU baseline may take per case (at least one run, at most `--reps`).
const CPU_BUDGET: Duration = Duration::from_secs(1);
/// Where the default sweep stops on a CPU implementation of Vulkan.
const CPU_DEVICE_CAP: u64 = 1 << 18;

fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Everything one case needs besides its key type.
struct Case<'a> {
    n: usize,
    count: Option<u64>,
    dist: Distribution,
    order: Order,
    pairs: bool,
    seed: u64,
    args: &'a BenchArgs,
    calibration: Option<Calibration>,
    gpu_warm_up: bool,
}

pub fn run(gpu: &GpuArgs, args: &BenchArgs) -> Result<(), Failure> {
    // Outputs first, so that an unwritable path fails before a long sweep.
    let json_out = output::open_beside_table("--json", args.json.as_ref())?;
    let csv_out = output::open_beside_table("--csv", args.csv.as_ref())?;
    let plot_out = output::open_beside_table("--plot", args.plot.as_ref())?;
    let ctx = gpu.context()?;
    let info = ctx.device_info().clone();
    let desc = SorterDesc {
        tuning: args.tuning.tuning(),
        time_from_transfer: args.time_from == TimeFrom::Transfer,
        ..SorterDesc::default()
    };
    let mut sorter = Sorter::new(&ctx, &desc)?;
    let cpu_device = info.device_type == DeviceType::Cpu;
    println!("device: {} ({}, Vulkan {})", info.name, info.device_type, info.api_version);
    if cpu_device {
        println!(
            "note: this is a CPU implementation of Vulkan (such as lavapipe), not a GPU: its times measure the CPU"
        );
    }
    // The largest size every chosen key type fits (8-byte keys fit half as many).
    let max = args.types.iter().map(|t| sorter.max_elements_of(t.kind())).min().unwrap_or(sorter.max_elements());
    let sizes = match &args.sizes {
        Some(SizeList(sizes)) => {
            if let Some(&too_big) = sizes.iter().find(|&&n| n > max) {
                return Err(Failure::Input(anyhow!(
                    "size {too_big} is over this device's limit of {max} elements: choose smaller --sizes"
                )));
            }
            if let Some(&small) = sizes.iter().find(|&&n| n < 2) {
                return Err(Failure::Input(anyhow!("size {small} has nothing to sort: choose --sizes of 2 or more")));
            }
            sizes.clone()
        }
        None => {
            let cap = if cpu_device { CPU_DEVICE_CAP } else { 1 << 24 };
            let sizes: Vec<u64> = (10..=24).map(|k| 1u64 << k).filter(|&n| n <= cap.min(max)).collect();
            let Some(&top) = sizes.last() else {
                return Err(Failure::Run(anyhow!(
                    "this device holds at most {max} elements per buffer, below the smallest default size (2^10): choose --sizes"
                )));
            };
            if cpu_device {
                println!(
                    "note: the default sizes stop at 2^{} on a CPU device; choose others with --sizes",
                    top.trailing_zeros()
                );
            } else if top < 1 << 24 {
                println!("note: the default sizes stop at 2^{}, this device's limit", top.trailing_zeros());
            }
            sizes
        }
    };
    // The pass model: bytes per pass over a vec4 copy's bandwidth, plus a dispatch and a barrier
    // per pass, both measured here and now.
    let calibration_size = if cpu_device { 1u64 << 20 } else { 1u64 << 24 }.min(max) as usize;
    let calibration =
        sorter.calibrate(calibration_size, if cpu_device { 50 } else { 500 }, if cpu_device { 3 } else { 10 })?;
    if let Some(c) = &calibration {
        println!(
            "pass model: vec4 copy of {calibration_size} u32 moves {:.0} GB/s (read + write); empty dispatch + barrier {:.2} us, empty dispatch alone {:.2} us{}",
            c.copy_bytes_per_second / 1e9,
            c.dispatch_and_barrier.as_secs_f64() * 1e6,
            c.dispatch_alone.as_secs_f64() * 1e6,
            if c.warm_up.is_zero() {
                String::new()
            } else {
                format!(
                    " (after {:.1} s of copies until their time settled; the first alone moved {:.0} GB/s)",
                    c.warm_up.as_secs_f64(),
                    c.cold_copy_bytes_per_second / 1e9
                )
            }
        );
    }
    let mut cases = Vec::new();
    for &n in &sizes {
        let counts: Vec<Option<u64>> = match &args.count {
            Some(CountList(list)) => list.iter().map(|c| Some(c.of(n))).collect(),
            None => vec![None],
        };
        for &count in &counts {
            for &key_type in &args.types {
                for &dist in &args.dists {
                    for &order in &args.order {
                        for &payload in &args.payload {
                            cases.push((n, count, key_type, dist, order.into(), payload == Payload::Pairs));
                        }
                    }
                }
            }
        }
    }
    let progress = ProgressBar::with_draw_target(Some(cases.len() as u64), ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .map_err(|e| Failure::Run(anyhow!("progress bar: {e}")))?
            .progress_chars("=> "),
    );
    let counted = args.count.is_some();
    println!(
        "{:>10}{} {:>4} {:>5} {:>4} {:>13} {:>6} {:>10} {:>10} {:>10} {:>10} {:>9} {:>7} {:>9} {:>6} {:>9} {:>9}  check",
        "n",
        if counted { format!(" {:>10}", "count") } else { String::new() },
        "type",
        "kind",
        "ord",
        "dist",
        "passes",
        "gpu ms",
        "gpu min",
        "gpu max",
        "wall ms",
        "Mkeys/s",
        "GB/s",
        "model ms",
        "/model",
        "cpu ms",
        "rayon ms"
    );
    let mut rows = Vec::new();
    for (n, count, key_type, dist, order, pairs) in cases {
        let kind = if pairs { "pairs" } else { "keys" };
        progress.set_message(format!("n = {n}, {} {kind}, {}", key_type.name(), dist.name()));
        sorter.set_gpu_count(count.map(|c| c as u32));
        let case = Case {
            n: n as usize,
            count,
            dist,
            order,
            pairs,
            seed: args.seed ^ n.rotate_left(17),
            args,
            calibration,
            gpu_warm_up: !cpu_device,
        };
        let row = match key_type {
            KeyType::U32 => run_case::<u32>(&mut sorter, &case, key_type),
            KeyType::I32 => run_case::<i32>(&mut sorter, &case, key_type),
            KeyType::F32 => run_case::<f32>(&mut sorter, &case, key_type),
            KeyType::U64 => run_case::<u64>(&mut sorter, &case, key_type),
            KeyType::I64 => run_case::<i64>(&mut sorter, &case, key_type),
            KeyType::F64 => run_case::<f64>(&mut sorter, &case, key_type),
        }
        .map_err(|e| match e {
            Failure::Run(e) => Failure::Run(e.context(format!(
                "n = {n}, {} {kind}, {}, {}",
                key_type.name(),
                dist.name(),
                case_order(order)
            ))),
            e => e,
        })?;
        let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
        progress.suspend(|| {
            println!(
                "{:>10}{} {:>4} {:>5} {:>4} {:>13} {:>6} {:>10} {:>10} {:>10} {:>10.4} {:>9.1} {:>7} {:>9} {:>6} {:>9.3} {:>9.3}  {}",
                row.n,
                row.count.map_or(String::new(), |c| format!(" {c:>10}")),
                key_type.name(),
                kind,
                if order == Order::Ascending { "asc" } else { "desc" },
                dist.name(),
                row.passes,
                opt(row.gpu_ms_median, 4),
                opt(row.gpu_ms_min, 4),
                opt(row.gpu_ms_max, 4),
                row.wall_ms_median,
                row.mkeys_per_s,
                opt(row.gb_per_s, 1),
                opt(row.model_ms, 4),
                opt(row.gpu_ms_median.zip(row.model_ms).map(|(g, m)| g / m), 2),
                row.cpu_ms_median,
                row.par_cpu_ms_median,
                if row.verified { "ok" } else { "not checked" }
            )
        });
        rows.push(row);
        progress.inc(1);
    }
    progress.finish_and_clear();
    sorter.set_gpu_count(None);
    if counted {
        println!(
            "count: a GPU-side count; the binding has the capacity n, its first pass bounds itself by min(count, n) and every later pass is an indirect dispatch of the workgroups that needs, and Mkeys/s, GB/s and the model count those elements"
        );
    }
    println!(
        "gpu ms: timestamps from {} to the end of the last pass, median (min, max) of {} sorts {} after {} more{}; wall ms: one sort including upload and download (median of {}); Mkeys/s and GB/s from the GPU median (GB/s: the input's bytes read and written once); model ms: passes x (bytes per pass / copy bandwidth + dispatch and barrier); cpu ms: sort_unstable, rayon ms: par_sort_unstable on {} threads (median of up to {} runs, at most about {} s each)",
        match args.time_from {
            TimeFrom::Compute => "the end of an empty compute dispatch standing for the pass that wrote the input",
            TimeFrom::Transfer => "the end of the input's copy",
        },
        args.reps,
        match args.submit {
            Submit::Batch => "run back to back on the GPU",
            Submit::Each => "each submitted and waited for on its own",
        },
        args.warmup,
        match (cpu_device, args.submit) {
            (true, _) => "",
            (false, Submit::Batch) => " (on a GPU: after the same work until its time settled, 2 to 4 s, and as many more as take ~0.3 s, up to 240 a command buffer, in the timed command buffer)",
            (false, Submit::Each) => " (on a GPU: after the same work back to back until its time settled, 2 to 4 s, and as many more submitted one by one as take ~0.3 s back to back, up to 240 in all)",
        },
        args.reps,
        rayon::current_num_threads(),
        args.reps,
        CPU_BUDGET.as_secs()
    );
    if args.no_verify {
        println!("note: results were not checked (--no-verify)");
    }
    if let Some(out) = json_out {
        out.finish(&output::json(&rows)?)?;
    }
    if let Some(out) = csv_out {
        out.finish(&output::csv(&rows)?)?;
    }
    if let Some(out) = plot_out {
        out.finish(&plot(&rows, &info.name)?)?;
    }
    Ok(())
}

fn case_order(order: Order) -> &'static str {
    match order {
        Order::Ascending => "ascending",
        Order::Descending => "descending",
    }
}

/// Keeps a GPU busy with batches of about [`WARM_BATCH`] of sorts of `keys` (and `values`) until a
/// sort's time settles ([`WarmUp`]); `estimate` sizes the first batch. Returns a sort's settled
/// time. `bench` runs it before each case, `passes` before its rounds.
pub fn warm_up<K: SortKey>(
    sorter: &mut Sorter,
    keys: &[K],
    values: Option<&[u32]>,
    order: Order,
    estimate: Duration,
) -> Result<Duration, Failure> {
    let mut estimate = estimate.max(Duration::from_micros(1));
    let mut warm_up = WarmUp::new();
    loop {
        let batch = (WARM_BATCH.as_secs_f64() / estimate.as_secs_f64()).clamp(1.0, 240.0) as u32;
        let (mut k, mut v) = (keys.to_vec(), values.map(<[u32]>::to_vec));
        let mut times = sorter.time_repeated(&mut k, v.as_deref_mut(), order, batch)?;
        if times.is_empty() {
            return Ok(estimate);
        }
        times.sort();
        let typical = median(&times);
        estimate = typical.max(Duration::from_micros(1));
        if warm_up.settled(typical) {
            return Ok(estimate);
        }
    }
}

/// Times the CPU baseline `sort` on copies of `input`: up to `reps` runs within [`CPU_BUDGET`].
/// Returns the median and the first run's result.
fn time_cpu<T: Clone>(input: &[T], reps: u32, sort: impl Fn(&mut [T])) -> (Duration, Vec<T>) {
    let mut times = Vec::new();
    let mut first = None;
    let budget = Instant::now() + CPU_BUDGET;
    while times.len() < reps as usize && (times.is_empty() || Instant::now() < budget) {
        let mut data = input.to_vec();
        let start = Instant::now();
        sort(&mut data);
        times.push(start.elapsed());
        first.get_or_insert(data);
    }
    times.sort();
    (median(&times), first.unwrap_or_default())
}

fn run_case<K: BenchKey>(sorter: &mut Sorter, case: &Case<'_>, key_type: KeyType) -> Result<Row, Failure> {
    let (n, order, pairs, args) = (case.n, case.order, case.pairs, case.args);
    let input: Vec<K> = data::generate(n, case.dist, case.seed);
    let indices: Vec<u32> = (0..n as u32).collect();
    let verify = !args.no_verify;
    // With a GPU-side count, the first `sorted` elements are sorted and the rest stay as they are.
    let sorted = case.count.map_or(n, |c| (c as usize).min(n));

    // CPU baselines, the first of which is the reference the GPU results are checked against.
    let (cpu, par_cpu, mut expect) = if pairs {
        let tuples: Vec<(K, u32)> = input[..sorted].iter().copied().zip(indices.iter().copied()).collect();
        let (cpu, result) = time_cpu(&tuples, args.reps, |d| data::cpu_sort_pairs(d, order, false));
        let (par, _) = time_cpu(&tuples, args.reps, |d| data::cpu_sort_pairs(d, order, true));
        (cpu, par, result.into_iter().map(|p| p.0).collect::<Vec<K>>())
    } else {
        let (cpu, result) = time_cpu(&input[..sorted], args.reps, |d| data::cpu_sort(d, order, false));
        let (par, _) = time_cpu(&input[..sorted], args.reps, |d| data::cpu_sort(d, order, true));
        (cpu, par, result)
    };
    expect.extend_from_slice(&input[sorted..]);
    let check = |keys: &[K], values: &[u32], what: &str| -> Result<(), Failure> {
        if verify {
            data::check(&input, &expect, keys, pairs.then_some(values))
                .context(what.to_owned())
                .map_err(Failure::Run)?;
        }
        Ok(())
    };

    // Wall time: separate sorts, each with its upload and download.
    let (mut wall_times, mut passes) = (Vec::new(), 0);
    for rep in 0..args.warmup + args.reps {
        let mut keys = input.clone();
        let mut values = indices.clone();
        let start = Instant::now();
        let stats =
            if pairs { sorter.sort_pairs(&mut keys, &mut values, order)? } else { sorter.sort(&mut keys, order)? };
        let wall = start.elapsed();
        passes = stats.passes;
        check(&keys, &values, "one sort")?;
        if rep >= args.warmup {
            wall_times.push(wall);
        }
    }
    wall_times.sort();

    // GPU time from back-to-back sorts in one command buffer: between separate sorts the host
    // checks results and a GPU drops to its idle clock, which takes a few hundred milliseconds of
    // steady work to come back. So first keep it busy in batches of ~0.1 s until a sort's time
    // has stopped falling (WarmUp: at least two seconds, at most four), and then start the timed
    // command buffer itself with ~0.3 s of untimed sorts (as many as fit under the 240 a command
    // buffer takes): between batches the host copies the input, and on the largest sorts that
    // gap alone let a GPU clock down again. With --submit each, those untimed sorts
    // and the timed ones are submitted one by one, as a renderer's frames are.
    let mut keys = input.clone();
    let mut values = indices.clone();
    let mut untimed = args.warmup;
    if case.gpu_warm_up {
        let estimate = warm_up(sorter, &keys, pairs.then_some(&values[..]), order, median(&wall_times))?;
        let lead = (IN_BUFFER_WARM_UP.as_secs_f64() / estimate.as_secs_f64()).ceil() as u32;
        untimed = untimed.max(lead.min(MAX_SORTS_PER_BUFFER - args.reps));
    }
    let timed = match args.submit {
        Submit::Batch => {
            sorter.time_repeated(&mut keys, pairs.then_some(&mut values[..]), order, untimed + args.reps)?
        }
        Submit::Each => {
            sorter.time_separately(&mut keys, pairs.then_some(&mut values[..]), order, untimed + args.reps)?
        }
    };
    check(
        &keys,
        &values,
        match args.submit {
            Submit::Batch => "back-to-back sorts",
            Submit::Each => "sorts submitted one by one",
        },
    )?;
    let mut gpu_times: Vec<Duration> = timed.into_iter().skip(untimed as usize).collect();
    gpu_times.sort();

    let element_bytes = (size_of::<K>() + if pairs { 4 } else { 0 }) as f64;
    let gpu = (!gpu_times.is_empty()).then(|| median(&gpu_times));
    let model = case.calibration.map(|c| ms(c.predict(passes, sorted as f64 * element_bytes * 2.0)));
    let rate_time = gpu.unwrap_or(median(&wall_times)).as_secs_f64();
    Ok(Row {
        n: n as u64,
        count: case.count,
        key_type,
        pairs,
        order: case_order(order),
        distribution: case.dist,
        passes,
        gpu_ms_median: gpu.map(ms),
        gpu_ms_min: gpu_times.first().copied().map(ms),
        gpu_ms_max: gpu_times.last().copied().map(ms),
        wall_ms_median: ms(median(&wall_times)),
        mkeys_per_s: sorted as f64 / rate_time / 1e6,
        gb_per_s: gpu.map(|g| sorted as f64 * element_bytes * 2.0 / g.as_secs_f64() / 1e9),
        model_ms: gpu.and(model),
        cpu_ms_median: ms(cpu),
        par_cpu_ms_median: ms(par_cpu),
        verified: verify,
        submit: args.submit,
    })
}

/// Time and Mkeys/s against n, one line per case family, CPU baselines dashed.
fn plot(rows: &[Row], device: &str) -> Result<Vec<u8>, Failure> {
    let mut families: Vec<(String, Vec<&Row>)> = Vec::new();
    for row in rows {
        let label = format!(
            "{} {} {}{}",
            row.key_type.name(),
            if row.pairs { "pairs" } else { "keys" },
            row.distribution.name(),
            if row.order == "descending" { " desc" } else { "" }
        );
        match families.iter_mut().find(|(l, _)| *l == label) {
            Some((_, members)) => members.push(row),
            None => families.push((label, vec![row])),
        }
    }
    let (mut times, mut rates) = (Vec::new(), Vec::new());
    for (label, members) in &families {
        let gpu_ms = |r: &Row| r.gpu_ms_median.unwrap_or(r.wall_ms_median);
        times.push(Series {
            label: format!("{label}: GPU"),
            points: members.iter().map(|r| (r.n as f64, gpu_ms(r))).collect(),
            dashed: false,
        });
        rates.push(Series {
            label: format!("{label}: GPU"),
            points: members.iter().map(|r| (r.n as f64, r.mkeys_per_s)).collect(),
            dashed: false,
        });
        for (name, cpu) in [("sort_unstable", false), ("par_sort_unstable", true)] {
            let t = |r: &Row| if cpu { r.par_cpu_ms_median } else { r.cpu_ms_median };
            times.push(Series {
                label: format!("{label}: {name}"),
                points: members.iter().map(|r| (r.n as f64, t(r))).collect(),
                dashed: true,
            });
            rates.push(Series {
                label: format!("{label}: {name}"),
                points: members.iter().map(|r| (r.n as f64, r.n as f64 / t(r) / 1e3)).collect(),
                dashed: true,
            });
        }
    }
    let title_time = format!("time, {device}");
    output::log_log_svg(&[
        Panel { title: &title_time, x_label: "n", y_label: "ms (GPU: timestamps; CPU: host clock)", series: &times },
        Panel { title: "throughput", x_label: "n", y_label: "Mkeys/s", series: &rates },
    ])
}
