//! `bitonic-vk passes`: the barrier study. Per-pass GPU timestamps of one sort, under the ways of
//! separating passes that can be compared: barrier flavours, a submit per sort or per pass, fused
//! or not, and empty-dispatch chains for the fixed costs. Every mode keeps every dependency
//! between passes, and every result is checked against the CPU's sort.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use bitonic_vk::{BarrierFlavor, Context, DeviceType, Order, PassStudy, PassSync, Sorter, SorterDesc};
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::args::{GpuArgs, OrderArg, TimeFrom, TuningArgs};
use crate::data::{self, BenchKey, Distribution, KeyType};
use crate::failure::Failure;
use crate::output;
use crate::sizes::parse_size;

#[derive(Args)]
pub struct PassesArgs {
    /// Elements to sort: a number or a power such as 2^20.
    #[arg(long, value_parser = parse_size, default_value = "2^20")]
    n: u64,
    /// Key type.
    #[arg(long = "type", value_enum, default_value = "u32")]
    key_type: KeyType,
    /// Sort key+value pairs (u32 values) instead of keys alone.
    #[arg(long)]
    pairs: bool,
    /// Sort order.
    #[arg(long, value_enum, default_value = "ascending")]
    order: OrderArg,
    /// How passes are separated: `barrier`, every pass in one command buffer with a pipeline
    /// barrier between passes (the sorter's way), the sorts back to back in one command buffer;
    /// `sort`, the same barriers but each sort a submission of its own, waited for before the
    /// next (one sort a frame, as a renderer runs it); `submit`, a command buffer, submit and
    /// fence wait per pass.
    #[arg(long, value_enum, default_value = "barrier")]
    sync: SyncArg,
    /// The barrier's flavour with --sync barrier: a global VkMemoryBarrier, a VkBufferMemoryBarrier
    /// per buffer, or a synchronization2 VkMemoryBarrier2 with exact stages and accesses.
    #[arg(long, value_enum, default_value = "memory")]
    barrier: FlavorArg,
    #[command(flatten)]
    tuning: TuningArgs,
    /// Where the GPU time starts: at the end of an empty compute dispatch after the input's copy
    /// (standing for the pass that wrote the keys; a compute-to-compute barrier before the first
    /// pass, as before every other), or at the end of the copy (the transfer-to-compute barrier
    /// included).
    #[arg(long, value_enum, default_value_t = TimeFrom::Compute)]
    time_from: TimeFrom,
    /// Run every strategy (each barrier flavour, a submit per sort, a submit per pass, unfused) and
    /// the empty-dispatch chains, and print a summary; the per-pass table is the one
    /// --sync/--barrier choose. It runs fused and unfused itself, so it takes no --max-fused.
    #[arg(long, conflicts_with = "max_fused")]
    compare: bool,
    /// Sorts timed per strategy (medians per pass are over these).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=200))]
    reps: u32,
    /// Empty dispatches per chain with --compare.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    chain: u32,
    /// Seed of the random keys.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Also write every pass of every strategy run as a JSON array to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also draw the time per pass, coloured by kind, as SVG to FILE.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SyncArg {
    Barrier,
    Sort,
    Submit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FlavorArg {
    Memory,
    Buffer,
    Barrier2,
}

impl From<FlavorArg> for BarrierFlavor {
    fn from(f: FlavorArg) -> BarrierFlavor {
        match f {
            FlavorArg::Memory => BarrierFlavor::Memory,
            FlavorArg::Buffer => BarrierFlavor::Buffer,
            FlavorArg::Barrier2 => BarrierFlavor::Memory2,
        }
    }
}

/// One way of running the passes.
#[derive(Clone, Debug)]
struct Strategy {
    name: String,
    sync: PassSync,
    unfused: bool,
}

impl Strategy {
    fn new(sync: PassSync, unfused: bool) -> Strategy {
        let base = match sync {
            PassSync::Barrier(f) => format!("barrier/{}", f.name()),
            PassSync::SubmitPerPass => "submit-per-pass".to_owned(),
            PassSync::SubmitPerSort => "submit-per-sort".to_owned(),
        };
        Strategy { name: if unfused { format!("{base}/unfused") } else { base }, sync, unfused }
    }
}

/// One pass of one strategy, as `--json` writes it.
#[derive(Clone, Debug, Serialize)]
struct PassRow {
    strategy: String,
    n: u64,
    key_type: KeyType,
    pairs: bool,
    pass: usize,
    kind: &'static str,
    stage: u32,
    inc: u32,
    dir: u32,
    substages: u32,
    workgroups: u32,
    /// Median over the sorts of this pass's GPU time (end of the pass before to end of this one).
    gpu_us: f64,
    gpu_us_min: f64,
    gpu_us_max: f64,
    /// The input's bytes read and written once over `gpu_us`.
    gb_per_s: f64,
    /// `gb_per_s` over a vec4 copy kernel's bandwidth over the same n, measured in the same run.
    pct_of_copy: Option<f64>,
}

/// What one strategy measured.
struct Outcome {
    strategy: Strategy,
    rows: Vec<PassRow>,
    total: Duration,
    wall: Duration,
}

const WARM_UP: Duration = Duration::from_millis(500);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn run(gpu: &GpuArgs, args: &PassesArgs) -> Result<(), Failure> {
    let json_out = output::open_beside_table("--json", args.json.as_ref())?;
    let plot_out = output::open_beside_table("--plot", args.plot.as_ref())?;
    if args.n < 2 {
        return Err(Failure::Input(anyhow!("--n {} has nothing to sort: choose 2 or more", args.n)));
    }
    let ctx = Context::new(&gpu.desc())?;
    let info = ctx.device_info().clone();
    let desc = SorterDesc {
        tuning: args.tuning.tuning(),
        time_from_transfer: args.time_from == TimeFrom::Transfer,
        ..SorterDesc::default()
    };
    let mut sorter = Sorter::new(&ctx, &desc)?;
    let max = sorter.max_elements_of(args.key_type.kind());
    if args.n > max {
        return Err(Failure::Input(anyhow!(
            "--n {} is over this device's limit of {max} elements: choose a smaller --n",
            args.n
        )));
    }
    let cpu_device = info.device_type == DeviceType::Cpu;
    println!("device: {} ({}, Vulkan {})", info.name, info.device_type, info.api_version);
    if cpu_device {
        println!(
            "note: this is a CPU implementation of Vulkan (such as lavapipe), not a GPU: its times measure the CPU"
        );
    }
    let primary = Strategy::new(
        match args.sync {
            SyncArg::Barrier => PassSync::Barrier(args.barrier.into()),
            SyncArg::Sort => PassSync::SubmitPerSort,
            SyncArg::Submit => PassSync::SubmitPerPass,
        },
        args.tuning.max_fused == Some(1),
    );
    if primary.sync == PassSync::Barrier(BarrierFlavor::Memory2) && !info.synchronization2 {
        return Err(Failure::Input(anyhow!(
            "--barrier barrier2 needs VK_KHR_synchronization2, which {} lacks: choose memory or buffer",
            info.name
        )));
    }
    let mut strategies = vec![primary.clone()];
    if args.compare {
        let mut all = vec![Strategy::new(PassSync::Barrier(BarrierFlavor::Memory), false)];
        for flavor in [BarrierFlavor::Buffer, BarrierFlavor::Memory2] {
            if flavor != BarrierFlavor::Memory2 || info.synchronization2 {
                all.push(Strategy::new(PassSync::Barrier(flavor), false));
            }
        }
        all.push(Strategy::new(PassSync::SubmitPerSort, false));
        all.push(Strategy::new(PassSync::SubmitPerPass, false));
        all.push(Strategy::new(PassSync::Barrier(BarrierFlavor::Memory), true));
        strategies.extend(all.into_iter().filter(|s| s.name != primary.name));
        if !info.synchronization2 {
            println!("note: {} lacks VK_KHR_synchronization2: no barrier2 strategy", info.name);
        }
    }
    // The bandwidth ceiling: a vec4 copy kernel over the same bytes, in this run.
    let words_per_element = args.key_type.bytes() as u64 / 4 + u64::from(args.pairs);
    let copy_words = (words_per_element * args.n).min(sorter.max_elements()) as usize;
    let copy = sorter.calibrate(copy_words, 2, if cpu_device { 3 } else { 20 })?.map(|c| c.copy_bytes_per_second);
    if let Some(c) = copy {
        println!("vec4 copy kernel over {} bytes: {:.0} GB/s (read + write)", copy_words * 4, c / 1e9);
    }
    let mut unfused = None;
    let mut outcomes = Vec::new();
    for strategy in strategies {
        let sorter = if strategy.unfused && args.tuning.max_fused != Some(1) {
            match &mut unfused {
                Some(s) => s,
                slot => {
                    let mut unfused = desc.clone();
                    unfused.tuning.max_fused_substages = Some(1);
                    slot.insert(Sorter::new(&ctx, &unfused)?)
                }
            }
        } else {
            &mut sorter
        };
        let outcome = match args.key_type {
            KeyType::U32 => measure::<u32>(sorter, args, &strategy, !cpu_device, copy),
            KeyType::I32 => measure::<i32>(sorter, args, &strategy, !cpu_device, copy),
            KeyType::F32 => measure::<f32>(sorter, args, &strategy, !cpu_device, copy),
            KeyType::U64 => measure::<u64>(sorter, args, &strategy, !cpu_device, copy),
            KeyType::I64 => measure::<i64>(sorter, args, &strategy, !cpu_device, copy),
            KeyType::F64 => measure::<f64>(sorter, args, &strategy, !cpu_device, copy),
        }
        .map_err(|e| match e {
            Failure::Run(e) => Failure::Run(e.context(format!("strategy {}", strategy.name))),
            e => e,
        })?;
        outcomes.push(outcome);
    }

    let first = &outcomes[0];
    println!(
        "n = {}, {} {}, {}; strategy {}: per-pass medians of {} sorts",
        args.n,
        args.key_type.name(),
        if args.pairs { "pairs" } else { "keys" },
        order_name(args.order.into()),
        first.strategy.name,
        args.reps
    );
    print_passes(&first.rows);
    println!(
        "total {:.2} us (median of whole sorts; the sum of per-pass medians is {:.2} us); {}",
        us(first.total),
        first.rows.iter().map(|r| r.gpu_us).sum::<f64>(),
        match first.strategy.sync {
            PassSync::SubmitPerPass => format!("host time per sort {:.3} ms", first.wall.as_secs_f64() * 1e3),
            PassSync::SubmitPerSort => {
                format!("host time per sort's submission {:.3} ms", first.wall.as_secs_f64() * 1e3)
            }
            PassSync::Barrier(_) =>
                format!("host time per sort, with transfers, {:.3} ms", first.wall.as_secs_f64() * 1e3),
        }
    );
    println!("each result checked against the CPU's sort: ok");
    if args.compare {
        println!();
        println!(
            "{:<26} {:>6} {:>11} {:>11} {:>12} {:>12} {:>12} {:>12}  host ms/sort",
            "strategy", "passes", "gpu us", "us/pass", "tile_sort us", "global us", "local us", "segment us"
        );
        for o in &outcomes {
            // A fold from +0.0: an empty f64 sum is -0.0, printed as "-0.00".
            let by_kind =
                |kind: &str| o.rows.iter().filter(|r| r.kind == kind).map(|r| r.gpu_us).fold(0.0, |a, b| a + b);
            let count = |kind: &str| o.rows.iter().filter(|r| r.kind == kind).count();
            println!(
                "{:<26} {:>6} {:>11.2} {:>11.3} {:>12.2} {:>12} {:>12} {:>12}  {:.3}",
                o.strategy.name,
                o.rows.len(),
                us(o.total),
                us(o.total) / o.rows.len().max(1) as f64,
                by_kind("tile_sort"),
                format!("{:.2} ({})", by_kind("global_merge"), count("global_merge")),
                format!("{:.2} ({})", by_kind("local_merge"), count("local_merge")),
                format!("{:.2} ({})", by_kind("segment_merge"), count("segment_merge")),
                o.wall.as_secs_f64() * 1e3
            );
        }
        println!("(gpu us: median whole sort from timestamps; global/local/segment: sum of per-pass medians (passes); host ms/sort: submit-per-pass: host clock from the first pass's recording to the last fence; submit-per-sort: one sort's submit-to-fence; barrier strategies: one batch's submit-to-fence over its sorts, transfers included)");
        println!();
        empty_chains(&mut sorter, args.chain, info.synchronization2, cpu_device)?;
    }
    if let Some(out) = json_out {
        let rows: Vec<&PassRow> = outcomes.iter().flat_map(|o| &o.rows).collect();
        out.finish(&output::json(&rows)?)?;
    }
    if let Some(out) = plot_out {
        let bars: Vec<(String, f64)> = first.rows.iter().map(|r| (r.kind.to_owned(), r.gpu_us)).collect();
        let title = format!(
            "GPU time per pass: n = {}, {} {}, {}, {}",
            output::format_count(args.n as f64),
            args.key_type.name(),
            if args.pairs { "pairs" } else { "keys" },
            first.strategy.name,
            info.name
        );
        out.finish(&output::bars_svg(&title, "us", &bars)?)?;
    }
    Ok(())
}

fn order_name(order: Order) -> &'static str {
    match order {
        Order::Ascending => "ascending",
        Order::Descending => "descending",
    }
}

fn print_passes(rows: &[PassRow]) {
    println!(
        "{:>5} {:>12} {:>5} {:>10} {:>3} {:>5} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7}",
        "pass", "kind", "stage", "inc", "dir", "fused", "groups", "us", "us min", "us max", "GB/s", "% copy"
    );
    for r in rows {
        println!(
            "{:>5} {:>12} {:>5} {:>10} {:>3} {:>5} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>8.1} {:>7}",
            r.pass,
            r.kind,
            r.stage,
            r.inc,
            r.dir,
            r.substages,
            r.workgroups,
            r.gpu_us,
            r.gpu_us_min,
            r.gpu_us_max,
            r.gb_per_s,
            r.pct_of_copy.map_or("-".to_owned(), |p| format!("{p:.0}"))
        );
    }
}

/// Runs one strategy: a warm-up on a GPU, then `reps` sorts with a timestamp after every pass.
fn measure<K: BenchKey>(
    sorter: &mut Sorter,
    args: &PassesArgs,
    strategy: &Strategy,
    warm_up: bool,
    copy: Option<f64>,
) -> Result<Outcome, Failure> {
    let n = args.n as usize;
    let order: Order = args.order.into();
    let input: Vec<K> = data::generate(n, Distribution::Uniform, args.seed);
    let mut expect = input.clone();
    data::cpu_sort(&mut expect, order, true);
    let indices: Vec<u32> = (0..n as u32).collect();
    // A GPU idles down between runs and needs a few hundred milliseconds of work to clock back
    // up; a CPU device gets one untimed sort (without it the first strategy of a run came out
    // slower than the rest, whichever it was).
    let until = Instant::now() + if warm_up { WARM_UP } else { Duration::ZERO };
    loop {
        let (mut k, mut v) = (input.clone(), indices.clone());
        sorter.time_repeated(&mut k, args.pairs.then_some(&mut v[..]), order, if warm_up { 20 } else { 1 })?;
        if Instant::now() >= until {
            break;
        }
    }
    let mut keys = input.clone();
    let mut values = indices.clone();
    let study: PassStudy =
        sorter.study(&mut keys, args.pairs.then_some(&mut values[..]), order, strategy.sync, args.reps)?;
    data::check(&input, &expect, &keys, args.pairs.then_some(&values[..]))
        .context("the sort under study came out wrong")
        .map_err(Failure::Run)?;
    let bytes = n as f64 * (size_of::<K>() + if args.pairs { 4 } else { 0 }) as f64 * 2.0;
    let rows = study
        .passes
        .iter()
        .enumerate()
        .map(|(i, pass)| {
            let times: Vec<Duration> = study.pass_times.iter().map(|sort| sort[i]).collect();
            let (min, max) =
                (times.iter().min().copied().unwrap_or_default(), times.iter().max().copied().unwrap_or_default());
            let med = median(times);
            PassRow {
                strategy: strategy.name.clone(),
                n: args.n,
                key_type: args.key_type,
                pairs: args.pairs,
                pass: i,
                kind: pass.kernel,
                stage: pass.stage,
                inc: pass.inc,
                dir: pass.dir,
                substages: pass.substages,
                workgroups: pass.workgroups,
                gpu_us: us(med),
                gpu_us_min: us(min),
                gpu_us_max: us(max),
                gb_per_s: bytes / med.as_secs_f64().max(1e-12) / 1e9,
                pct_of_copy: copy.map(|c| 100.0 * bytes / med.as_secs_f64().max(1e-12) / c),
            }
        })
        .collect();
    Ok(Outcome { strategy: strategy.clone(), rows, total: median(study.totals), wall: median(study.wall) })
}

/// The fixed costs: chains of empty dispatches with each barrier flavour and with none.
fn empty_chains(sorter: &mut Sorter, chain: u32, sync2: bool, cpu_device: bool) -> Result<(), Failure> {
    let reps = if cpu_device { 5 } else { 20 };
    let alone = sorter.empty_chain(None, chain, reps)?;
    let Some(alone) = alone else {
        println!("empty-dispatch chains: the device has no timestamps");
        return Ok(());
    };
    println!("empty-dispatch chains of {chain} (median of {reps}): per dispatch");
    println!("  {:<34} {:>8.3} us", "no barrier", us(alone));
    for flavor in BarrierFlavor::ALL {
        if flavor == BarrierFlavor::Memory2 && !sync2 {
            continue;
        }
        if let Some(t) = sorter.empty_chain(Some(flavor), chain, reps)? {
            println!(
                "  {:<34} {:>8.3} us  (the barrier: {:+.3} us)",
                format!("with a {} barrier each", flavor.name()),
                us(t),
                us(t) - us(alone)
            );
        }
    }
    Ok(())
}
