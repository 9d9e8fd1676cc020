//! Criterion benches, for u32 keys alone and with u32 values: GPU time of the passes from
//! timestamp queries (`iter_custom`, sorts run back to back on the GPU), end-to-end wall time with
//! upload and download, and the CPU's `sort_unstable` (of (key, value) tuples by key for pairs) on
//! the same data.
//! Sizes stop at 2^16 on a CPU Vulkan device (lavapipe) and go to 2^24 on a GPU.

use std::time::{Duration, Instant};

use bitonic_vk::{Context, ContextDesc, DeviceType, Order, Sorter, SorterDesc, WarmUp};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};

fn sorts(c: &mut Criterion) {
    let ctx = match Context::new(&ContextDesc::default()) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("no Vulkan device, nothing to bench: {e}");
            return;
        }
    };
    let mut sorter = Sorter::new(&ctx, &SorterDesc::default()).unwrap_or_else(|e| panic!("creating the sorter: {e}"));
    let cpu_device = ctx.device_info().device_type == DeviceType::Cpu;
    let largest = if cpu_device { 16 } else { 24 };
    let warm = !cpu_device;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    // When the GPU last finished timed sorts (see back_to_back).
    let mut gpu_busy_until: Option<Instant> = None;
    for pairs in [false, true] {
        let mut group = c.benchmark_group(if pairs { "u32 pairs" } else { "u32 keys" });
        group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
        for log2 in (10..=largest).step_by(2) {
            let n = 1usize << log2;
            let keys: Vec<u32> = (0..n).map(|_| rng.random()).collect();
            let values: Vec<u32> = if pairs { (0..n).map(|_| rng.random()).collect() } else { Vec::new() };
            let input = (keys, values);
            group.throughput(Throughput::Elements(n as u64));
            group.bench_with_input(BenchmarkId::new("gpu passes", n), &input, |b, input| {
                b.iter_custom(|iters| back_to_back(&mut sorter, input, iters, warm, &mut gpu_busy_until))
            });
            group.bench_with_input(BenchmarkId::new("gpu end to end", n), &input, |b, input| {
                b.iter_custom(|iters| each_copy(iters, input, |keys, values| wall(|| sort(&mut sorter, keys, values))))
            });
            group.bench_with_input(BenchmarkId::new("cpu sort_unstable", n), &input, |b, input| {
                if pairs {
                    let tuples: Vec<(u32, u32)> = input.0.iter().copied().zip(input.1.iter().copied()).collect();
                    b.iter_custom(|iters| {
                        (0..iters)
                            .map(|_| {
                                let mut tuples = tuples.clone();
                                wall(|| tuples.sort_unstable_by_key(|&(key, _)| key))
                            })
                            .sum()
                    })
                } else {
                    b.iter_custom(|iters| each_copy(iters, input, |keys, _| wall(|| keys.sort_unstable())))
                }
            });
        }
        group.finish();
    }
}

/// Keys and values (empty for keys alone).
type Input = (Vec<u32>, Vec<u32>);

/// Sorts `keys`, with `values` where there are any.
fn sort(sorter: &mut bitonic_vk::Sorter, keys: &mut [u32], values: &mut [u32]) -> bitonic_vk::SortStats {
    let stats = if values.is_empty() {
        sorter.sort(keys, Order::Ascending)
    } else {
        sorter.sort_pairs(keys, values, Order::Ascending)
    };
    stats.unwrap_or_else(|e| panic!("sort: {e}"))
}

/// Where the GPU may have idled (nothing from here for this long), it is warmed before timing
/// until a sort's time stops falling ([`WarmUp`]): between separate sorts a GPU drops to its idle
/// clock (the H100 within milliseconds), and short bursts of work do not bring it back. With a
/// fixed half-second warm-up, criterion's single sorts on the H200 read 4096 u32 keys at 50 us
/// throughout and 2^20 keys at 248 us for three samples and 84 us after, where `bitonic-vk bench`
/// reads 86 us; before any warm-up, up to five times slower than `bench` on the H100.
const IDLE: Duration = Duration::from_millis(20);
/// Untimed sorts at the head of each command buffer, for about this much GPU time (as `bench`
/// does), so that the host's copying between buffers leaves the clock up; at most 240 sorts a
/// command buffer, at most [`TIMED_PER_BUFFER`] of them timed.
const LEAD: Duration = Duration::from_millis(100);
const PER_BUFFER: u32 = 240;
const TIMED_PER_BUFFER: u32 = 200;

/// The GPU time of `iters` sorts of `input` run back to back on the GPU, in command buffers of at
/// most [`TIMED_PER_BUFFER`] timed sorts after untimed ones ([`LEAD`]); first untimed sorts until
/// their time settles ([`WarmUp`]) where the GPU has had nothing from here for [`IDLE`]
/// (`busy_until`); neither with `warm` false (a CPU device, which has no clock to bring up).
///
/// Each command buffer counts as its timed sorts times their median, the statistic `bitonic-vk
/// bench` reports: a single sort stretched by a stall of the GPU (a clock change, the host's
/// submission) is milliseconds long and would otherwise move the mean of a buffer of small sorts
/// several times over. With `BITONIC_VK_BENCH_TRACE` set, each call also prints to stderr the
/// spread of its sorts and the mean it would have read instead.
fn back_to_back(
    sorter: &mut bitonic_vk::Sorter,
    (keys, values): &Input,
    iters: u64,
    warm: bool,
    busy_until: &mut Option<Instant>,
) -> Duration {
    let mut run = |reps: u32| {
        let mut keys = keys.clone();
        let mut values = values.clone();
        let values = (!values.is_empty()).then_some(&mut values[..]);
        let times =
            sorter.time_repeated(&mut keys, values, Order::Ascending, reps).unwrap_or_else(|e| panic!("sort: {e}"));
        if times.is_empty() {
            panic!("the device records no timestamps, so the GPU time of a sort cannot be read");
        }
        times
    };
    let median = |times: &[Duration]| {
        let mut sorted = times.to_vec();
        sorted.sort();
        sorted[sorted.len() / 2]
    };
    // A sort's GPU time, from the median of the last buffer's.
    let mut estimate = Duration::from_micros(1);
    let warmed = warm && busy_until.is_none_or(|t| t.elapsed() > IDLE);
    let mut warm_up = WarmUp::new();
    let mut warm_medians = Vec::new();
    if warmed {
        loop {
            let reps = (LEAD.as_secs_f64() / estimate.as_secs_f64()).clamp(1.0, f64::from(PER_BUFFER)) as u32;
            let typical = median(&run(reps));
            warm_medians.push(format!("{:.1}", typical.as_secs_f64() * 1e6));
            estimate = typical.max(Duration::from_micros(1));
            if warm_up.settled(typical) {
                break;
            }
        }
    }
    let mut total = Duration::ZERO;
    let (mut sum, mut fastest, mut slowest, mut buffers) = (Duration::ZERO, Duration::MAX, Duration::ZERO, 0);
    let mut left = iters;
    while left > 0 {
        let reps = left.min(u64::from(TIMED_PER_BUFFER)) as u32;
        let lead = if warm {
            (LEAD.as_secs_f64() / estimate.as_secs_f64()).ceil().min(f64::from(PER_BUFFER - reps)) as u32
        } else {
            0
        };
        let times = run(lead + reps);
        let timed = &times[lead as usize..];
        let typical = median(timed);
        estimate = typical.max(Duration::from_micros(1));
        total += typical * reps;
        sum += timed.iter().sum::<Duration>();
        fastest = fastest.min(timed.iter().copied().min().unwrap_or(typical));
        slowest = slowest.max(timed.iter().copied().max().unwrap_or(typical));
        buffers += 1;
        left -= u64::from(reps);
    }
    *busy_until = Some(Instant::now());
    if std::env::var_os("BITONIC_VK_BENCH_TRACE").is_some() {
        eprintln!(
            "trace: n {} {}: {iters} sorts in {buffers} buffers{}: median-based {:.2?}, mean {:.2?}, min {:.2?}, max {:.2?} per sort",
            keys.len(),
            if values.is_empty() { "keys" } else { "pairs" },
            if warmed {
                format!(" after {:.2?} of warm-up (batch medians, us: {})", warm_up.elapsed(), warm_medians.join(" "))
            } else {
                String::new()
            },
            total.div_f64(iters as f64),
            sum.div_f64(iters as f64),
            fastest,
            slowest
        );
    }
    total
}

/// The wall time of `f`.
fn wall<T>(f: impl FnOnce() -> T) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// The sum of `time` over `iters` fresh copies of `input` (the copying is not timed).
fn each_copy(iters: u64, (keys, values): &Input, mut time: impl FnMut(&mut [u32], &mut [u32]) -> Duration) -> Duration {
    (0..iters).map(|_| time(&mut keys.clone(), &mut values.clone())).sum()
}

criterion_group!(benches, sorts);
criterion_main!(benches);
