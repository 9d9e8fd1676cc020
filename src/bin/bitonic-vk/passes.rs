//! `bitonic-vk passes`: the barrier study. Per-pass GPU timestamps of one sort, under the ways of
//! separating passes that can be compared: barrier flavours, a submit per sort or per pass, fused
//! or not, and empty-dispatch chains for the fixed costs. Every mode keeps every dependency
//! between passes, and every result is checked against the CPU's sort. After a warm-up the
//! strategies are measured in rounds, the order rotated each round, so that none is favoured by
//! where it runs while a device's clock moves; the first is measured again at the end to tell
//! whether the run settled.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use bitonic_vk::{BarrierFlavor, DeviceType, Order, PassInfo, PassStudy, PassSync, Sorter, SorterDesc};
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::args::{GpuArgs, OrderArg, TimeFrom, TuningArgs};
use crate::bench;
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
    /// fence wait (the fence polled) per pass.
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
    /// Sorts timed per strategy in each round (a round's medians are over these).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=200))]
    reps: u32,
    /// Rounds: each runs every strategy (and with --compare every empty-dispatch chain) once, in
    /// an order rotated by one from the round before; each figure is the median over rounds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// For tests: take the first strategy's time measured again at the end as its first round's
    /// times this factor, as if the device's speed had moved during the run.
    #[arg(long, hide = true, value_name = "FACTOR")]
    test_probe_moved: Option<f64>,
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

/// What a round measures: one strategy's sorts, or a chain of empty dispatches with a barrier of a
/// flavour between consecutive ones, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Strategy(usize),
    Chain(Option<BarrierFlavor>),
}

/// The order of the items in round `round` (from 0): each round starts one later than the round
/// before, so that no item always runs first, or always after the same one.
fn round_order(items: usize, round: usize) -> Vec<usize> {
    (0..items).map(|i| (i + round) % items).collect()
}

fn chain_name(flavor: Option<BarrierFlavor>) -> String {
    match flavor {
        None => "chain/none".to_owned(),
        Some(f) => format!("chain/{}", f.name()),
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
    /// This pass's GPU time (end of the pass before to end of this one): the median over rounds
    /// of each round's median over its sorts.
    gpu_us: f64,
    /// The fastest and slowest of every sort of every round.
    gpu_us_min: f64,
    gpu_us_max: f64,
    /// How far the rounds' medians spread: (max - min) / median, in percent.
    gpu_us_spread_pct: f64,
    /// Rounds, each of `--reps` sorts.
    rounds: u32,
    /// The input's bytes read and written once over `gpu_us`.
    gb_per_s: f64,
    /// `gb_per_s` over a vec4 copy kernel's bandwidth over the same n, measured in the same run.
    pct_of_copy: Option<f64>,
    /// Whether the run settled: the first strategy's sort measured again at the end within 5 % of
    /// its first round (the same for every row of a run).
    settled: bool,
    /// How far that probe moved, in percent (positive: slower at the end).
    probe_moved_pct: f64,
}

/// What one strategy measured, round by round.
#[derive(Default)]
struct Tally {
    passes: Vec<PassInfo>,
    /// Per pass, each round's median.
    pass_rounds: Vec<Vec<Duration>>,
    /// Per pass, every sort of every round.
    pass_all: Vec<Vec<Duration>>,
    /// Each round's median whole sort, and its median host time.
    totals: Vec<Duration>,
    walls: Vec<Duration>,
}

impl Tally {
    fn add(&mut self, study: PassStudy) {
        let passes = study.passes.len();
        self.pass_rounds.resize(passes, Vec::new());
        self.pass_all.resize(passes, Vec::new());
        for i in 0..passes {
            let times: Vec<Duration> = study.pass_times.iter().map(|sort| sort[i]).collect();
            self.pass_all[i].extend(&times);
            self.pass_rounds[i].push(median(times));
        }
        self.totals.push(median(study.totals));
        self.walls.push(median(study.wall));
        self.passes = study.passes;
    }
}

/// What one strategy measured.
struct Outcome {
    strategy: Strategy,
    rows: Vec<PassRow>,
    /// Median over rounds of a whole sort, and the rounds' spread in percent.
    total: Duration,
    total_spread: f64,
    wall: Duration,
}

/// Whether a run settled: its first strategy in the first round and measured again at the end.
struct Probe {
    name: String,
    first: Duration,
    end: Duration,
}

impl Probe {
    fn moved(&self) -> f64 {
        self.end.as_secs_f64() / self.first.as_secs_f64().max(1e-12) - 1.0
    }

    fn settled(&self) -> bool {
        self.moved().abs() <= SETTLE_TOLERANCE
    }
}

/// How far the probe may move over a run that counts as settled.
const SETTLE_TOLERANCE: f64 = 0.05;

/// Everything the rounds measured.
struct Measured {
    outcomes: Vec<Outcome>,
    /// Each chain's time per dispatch (median over rounds) and spread in percent.
    chains: Vec<(Option<BarrierFlavor>, Duration, f64)>,
    /// Each round's order, by name.
    orders: Vec<Vec<String>>,
    probe: Probe,
}

/// The median (the upper one of an even count) of a set that is not empty.
fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// (max - min) / median in percent: how far the rounds disagree.
fn spread_pct(v: &[Duration]) -> f64 {
    let (min, max) = (v.iter().min().copied().unwrap_or_default(), v.iter().max().copied().unwrap_or_default());
    100.0 * (max - min).as_secs_f64() / median(v.to_vec()).as_secs_f64().max(1e-12)
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
    let ctx = gpu.context()?;
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
    let mut chains = Vec::new();
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
        chains.push(None);
        chains.extend(
            BarrierFlavor::ALL.into_iter().filter(|&f| f != BarrierFlavor::Memory2 || info.synchronization2).map(Some),
        );
    }
    // The bandwidth ceiling: a vec4 copy kernel over the same bytes, in this run.
    let words_per_element = args.key_type.bytes() as u64 / 4 + u64::from(args.pairs);
    let copy_words = (words_per_element * args.n).min(sorter.max_elements()) as usize;
    let copy = sorter.calibrate(copy_words, 2, if cpu_device { 3 } else { 20 })?.map(|c| c.copy_bytes_per_second);
    if let Some(c) = copy {
        println!("vec4 copy kernel over {} bytes: {:.0} GB/s (read + write)", copy_words * 4, c / 1e9);
    }
    let mut unfused = None;
    if strategies.iter().any(|s| s.unfused) && args.tuning.max_fused != Some(1) {
        let mut d = desc.clone();
        d.tuning.max_fused_substages = Some(1);
        unfused = Some(Sorter::new(&ctx, &d)?);
    }
    let mut sorters = Sorters { fused: &mut sorter, unfused: unfused.as_mut() };
    let setup = Setup { args, strategies: &strategies, chains: &chains, cpu_device, copy };
    let measured = match args.key_type {
        KeyType::U32 => measure::<u32>(&mut sorters, &setup),
        KeyType::I32 => measure::<i32>(&mut sorters, &setup),
        KeyType::F32 => measure::<f32>(&mut sorters, &setup),
        KeyType::U64 => measure::<u64>(&mut sorters, &setup),
        KeyType::I64 => measure::<i64>(&mut sorters, &setup),
        KeyType::F64 => measure::<f64>(&mut sorters, &setup),
    }?;
    let outcomes = &measured.outcomes;

    println!("{} rounds of {} sorts a strategy, the order rotated each round:", args.rounds, args.reps);
    for (i, order) in measured.orders.iter().enumerate() {
        println!("  round {}: {}", i + 1, order.join(", "));
    }
    let first = &outcomes[0];
    println!(
        "n = {}, {} {}, {}; strategy {}: per-pass medians over {} rounds of each round's median",
        args.n,
        args.key_type.name(),
        if args.pairs { "pairs" } else { "keys" },
        order_name(args.order.into()),
        first.strategy.name,
        args.rounds
    );
    print_passes(&first.rows);
    println!(
        "total {:.2} us, spread {:.1} % (median over rounds of whole sorts; the sum of per-pass medians is {:.2} us); {}",
        us(first.total),
        first.total_spread,
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
            "{:<26} {:>6} {:>11} {:>7} {:>11} {:>12} {:>12} {:>12} {:>12}  host ms/sort",
            "strategy", "passes", "gpu us", "spread", "us/pass", "tile_sort us", "global us", "local us", "segment us"
        );
        for o in outcomes {
            // A fold from +0.0: an empty f64 sum is -0.0, printed as "-0.00".
            let by_kind =
                |kind: &str| o.rows.iter().filter(|r| r.kind == kind).map(|r| r.gpu_us).fold(0.0, |a, b| a + b);
            let count = |kind: &str| o.rows.iter().filter(|r| r.kind == kind).count();
            println!(
                "{:<26} {:>6} {:>11.2} {:>7} {:>11.3} {:>12.2} {:>12} {:>12} {:>12}  {:.3}",
                o.strategy.name,
                o.rows.len(),
                us(o.total),
                format!("{:.1}%", o.total_spread),
                us(o.total) / o.rows.len().max(1) as f64,
                by_kind("tile_sort"),
                format!("{:.2} ({})", by_kind("global_merge"), count("global_merge")),
                format!("{:.2} ({})", by_kind("local_merge"), count("local_merge")),
                format!("{:.2} ({})", by_kind("segment_merge"), count("segment_merge")),
                o.wall.as_secs_f64() * 1e3
            );
        }
        println!("(gpu us: median over rounds of each round's median whole sort, from timestamps; spread: (max - min) / median of the rounds'; global/local/segment: sum of per-pass medians (passes); host ms/sort: submit-per-pass: host clock from the first pass's recording to the last fence; submit-per-sort: one sort's submit-to-fence; barrier strategies: one batch's submit-to-fence over its sorts, transfers included)");
        println!();
        print_chains(&measured.chains, args.chain, chain_reps(cpu_device));
    }
    let probe = &measured.probe;
    let moved = format!(
        "{} took {:.2} us a sort in the first round and {:.2} us measured again at the end ({:+.1} %)",
        probe.name,
        us(probe.first),
        us(probe.end),
        100.0 * probe.moved()
    );
    if probe.settled() {
        println!("settled: {moved}");
    } else {
        println!(
            "warning: the run did not settle: {moved}, more than {:.0} %: the device's clock or load changed while it ran; run it again",
            100.0 * SETTLE_TOLERANCE
        );
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
        "{:>5} {:>12} {:>5} {:>10} {:>3} {:>5} {:>10} {:>10} {:>7} {:>10} {:>10} {:>8} {:>7}",
        "pass", "kind", "stage", "inc", "dir", "fused", "groups", "us", "spread", "us min", "us max", "GB/s", "% copy"
    );
    for r in rows {
        println!(
            "{:>5} {:>12} {:>5} {:>10} {:>3} {:>5} {:>10} {:>10.2} {:>7} {:>10.2} {:>10.2} {:>8.1} {:>7}",
            r.pass,
            r.kind,
            r.stage,
            r.inc,
            r.dir,
            r.substages,
            r.workgroups,
            r.gpu_us,
            format!("{:.1}%", r.gpu_us_spread_pct),
            r.gpu_us_min,
            r.gpu_us_max,
            r.gb_per_s,
            r.pct_of_copy.map_or("-".to_owned(), |p| format!("{p:.0}"))
        );
    }
}

/// The two sorters the strategies run on: the one the tuning asks for, and one substage per
/// global pass for the unfused strategy (with --compare).
struct Sorters<'a> {
    fused: &'a mut Sorter,
    unfused: Option<&'a mut Sorter>,
}

impl Sorters<'_> {
    fn of(&mut self, strategy: &Strategy) -> &mut Sorter {
        match (&mut self.unfused, strategy.unfused) {
            (Some(unfused), true) => unfused,
            _ => self.fused,
        }
    }
}

/// What the rounds run and with what.
struct Setup<'a> {
    args: &'a PassesArgs,
    strategies: &'a [Strategy],
    chains: &'a [Option<BarrierFlavor>],
    cpu_device: bool,
    copy: Option<f64>,
}

/// Empty-dispatch chains per round.
fn chain_reps(cpu_device: bool) -> u32 {
    if cpu_device {
        5
    } else {
        20
    }
}

/// One sort of the input and its check.
struct Sorts<K> {
    input: Vec<K>,
    expect: Vec<K>,
    indices: Vec<u32>,
}

impl<K: BenchKey> Sorts<K> {
    /// `reps` sorts of the input under `strategy`, the result checked.
    fn study(
        &self,
        sorter: &mut Sorter,
        args: &PassesArgs,
        strategy: &Strategy,
        reps: u32,
    ) -> Result<PassStudy, Failure> {
        let mut keys = self.input.clone();
        let mut values = self.indices.clone();
        let study =
            sorter.study(&mut keys, args.pairs.then_some(&mut values[..]), args.order.into(), strategy.sync, reps)?;
        data::check(&self.input, &self.expect, &keys, args.pairs.then_some(&values[..]))
            .context("the sort under study came out wrong")
            .map_err(Failure::Run)?;
        Ok(study)
    }
}

/// Warms up, runs the rounds and the probe at the end.
fn measure<K: BenchKey>(sorters: &mut Sorters<'_>, setup: &Setup<'_>) -> Result<Measured, Failure> {
    let (args, strategies) = (setup.args, setup.strategies);
    let n = args.n as usize;
    let order: Order = args.order.into();
    let input: Vec<K> = data::generate(n, Distribution::Uniform, args.seed);
    let mut expect = input.clone();
    data::cpu_sort(&mut expect, order, true);
    let sorts = Sorts { input, expect, indices: (0..n as u32).collect() };
    let named = |e: Failure, name: &str| match e {
        Failure::Run(e) => Failure::Run(e.context(format!("strategy {name}"))),
        e => e,
    };
    // A first sort of each strategy, untimed, so that one-off costs (buffers made for this size,
    // command buffers of a submit per pass) fall in no round: on lavapipe the first strategy
    // otherwise came out slower than the rest, whichever it was.
    for strategy in strategies {
        sorts.study(sorters.of(strategy), args, strategy, args.reps).map_err(|e| named(e, &strategy.name))?;
    }
    // A GPU idles down between runs, and clocks up only after steady work: warm up as `bench`
    // does, until a sort's time stops falling.
    if !setup.cpu_device {
        let values = args.pairs.then_some(&sorts.indices[..]);
        let (mut k, mut v) = (sorts.input.clone(), values.map(<[u32]>::to_vec));
        let first = sorters.fused.time_repeated(&mut k, v.as_deref_mut(), order, 1)?;
        bench::warm_up(sorters.fused, &sorts.input, values, order, median(first))?;
    }
    let items: Vec<Item> =
        (0..strategies.len()).map(Item::Strategy).chain(setup.chains.iter().map(|&c| Item::Chain(c))).collect();
    let name = |item: Item| match item {
        Item::Strategy(s) => strategies[s].name.clone(),
        Item::Chain(c) => chain_name(c),
    };
    let mut tallies: Vec<Tally> = strategies.iter().map(|_| Tally::default()).collect();
    let mut chain_times: Vec<Vec<Duration>> = vec![Vec::new(); setup.chains.len()];
    let mut orders = Vec::new();
    for round in 0..args.rounds as usize {
        let order = round_order(items.len(), round);
        orders.push(order.iter().map(|&i| name(items[i])).collect());
        for &i in &order {
            match items[i] {
                Item::Strategy(s) => {
                    let strategy = &strategies[s];
                    let study = sorts
                        .study(sorters.of(strategy), args, strategy, args.reps)
                        .map_err(|e| named(e, &strategy.name))?;
                    tallies[s].add(study);
                }
                Item::Chain(flavor) => {
                    if let Some(t) = sorters.fused.empty_chain(flavor, args.chain, chain_reps(setup.cpu_device))? {
                        chain_times[i - strategies.len()].push(t);
                    }
                }
            }
        }
    }
    // The probe: the first strategy, first in the first round, measured again once every round is
    // done. Not the copy kernel: `calibrate` warms a GPU up before it measures, so it would read
    // warm at the end whatever happened during the run.
    let again = sorts
        .study(sorters.of(&strategies[0]), args, &strategies[0], args.reps)
        .map_err(|e| named(e, &strategies[0].name))?;
    let first = tallies[0].totals.first().copied().unwrap_or_default();
    let end = match args.test_probe_moved {
        Some(factor) => first.mul_f64(factor.max(0.0)),
        None => median(again.totals),
    };
    let probe = Probe { name: strategies[0].name.clone(), first, end };
    let bytes = n as f64 * (size_of::<K>() + if args.pairs { 4 } else { 0 }) as f64 * 2.0;
    let outcomes = strategies
        .iter()
        .zip(tallies)
        .map(|(strategy, tally)| {
            let rows = tally
                .passes
                .iter()
                .enumerate()
                .map(|(i, pass)| {
                    let all = &tally.pass_all[i];
                    let med = median(tally.pass_rounds[i].clone());
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
                        gpu_us_min: us(all.iter().min().copied().unwrap_or_default()),
                        gpu_us_max: us(all.iter().max().copied().unwrap_or_default()),
                        gpu_us_spread_pct: spread_pct(&tally.pass_rounds[i]),
                        rounds: args.rounds,
                        gb_per_s: bytes / med.as_secs_f64().max(1e-12) / 1e9,
                        pct_of_copy: setup.copy.map(|c| 100.0 * bytes / med.as_secs_f64().max(1e-12) / c),
                        settled: probe.settled(),
                        probe_moved_pct: 100.0 * probe.moved(),
                    }
                })
                .collect();
            Outcome {
                strategy: strategy.clone(),
                rows,
                total: median(tally.totals.clone()),
                total_spread: spread_pct(&tally.totals),
                wall: median(tally.walls),
            }
        })
        .collect();
    let chains = setup
        .chains
        .iter()
        .zip(chain_times)
        .filter(|(_, times)| !times.is_empty())
        .map(|(&flavor, times)| (flavor, median(times.clone()), spread_pct(&times)))
        .collect();
    Ok(Measured { outcomes, chains, orders, probe })
}

/// The fixed costs: chains of empty dispatches with each barrier flavour and with none.
fn print_chains(chains: &[(Option<BarrierFlavor>, Duration, f64)], chain: u32, reps: u32) {
    let Some(&(_, alone, _)) = chains.iter().find(|c| c.0.is_none()) else {
        println!("empty-dispatch chains: the device has no timestamps");
        return;
    };
    println!("empty-dispatch chains of {chain} (median over rounds of each round's median of {reps}): per dispatch");
    for &(flavor, t, spread) in chains {
        let name = match flavor {
            None => "no barrier".to_owned(),
            Some(f) => format!("with a {} barrier each", f.name()),
        };
        let diff = match flavor {
            None => String::new(),
            Some(_) => format!("  (the barrier: {:+.3} us)", us(t) - us(alone)),
        };
        println!("  {name:<34} {:>8.3} us  spread {spread:>5.1} %{diff}", us(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_round_starts_one_later_and_runs_every_item_once() {
        assert_eq!(round_order(4, 0), [0, 1, 2, 3]);
        assert_eq!(round_order(4, 1), [1, 2, 3, 0]);
        assert_eq!(round_order(4, 5), [1, 2, 3, 0]);
        for round in 0..10 {
            let mut order = round_order(7, round);
            assert_eq!(order[0], round % 7, "round {round} starts with item {}", round % 7);
            order.sort();
            assert_eq!(order, (0..7).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_probe_that_moved_more_than_5_percent_is_unsettled() {
        let probe = |first: u64, end: u64| Probe {
            name: "barrier/memory".to_owned(),
            first: Duration::from_micros(first),
            end: Duration::from_micros(end),
        };
        assert!(probe(100, 104).settled() && probe(100, 96).settled());
        assert!(!probe(100, 106).settled() && !probe(100, 94).settled());
        assert!((probe(100, 110).moved() - 0.10).abs() < 1e-9);
    }

    #[test]
    fn the_spread_is_the_range_over_the_median() {
        let d = |us: &[u64]| us.iter().map(|&u| Duration::from_micros(u)).collect::<Vec<_>>();
        assert!((spread_pct(&d(&[100, 98, 104])) - 6.0).abs() < 1e-9);
        assert_eq!(spread_pct(&d(&[50])), 0.0);
    }
}
