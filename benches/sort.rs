//! Criterion benches, for u32 keys alone and with u32 values: GPU time of the passes from
//! timestamp queries (`iter_custom`, sorts run back to back on the GPU), end-to-end wall time with
//! upload and download, and the CPU's `sort_unstable` (of (key, value) tuples by key for pairs) on
//! the same data.
//! Sizes stop at 2^16 on a CPU Vulkan device (lavapipe) and go to 2^24 on a GPU.

use std::time::{Duration, Instant};

use bitonic_vk::{Context, ContextDesc, DeviceType, Order};
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
    let mut sorter = ctx.sorter().unwrap_or_else(|e| panic!("creating the sorter: {e}"));
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

/// GPU work before timing where the GPU may have idled, and the idle time that counts: between
/// separate sorts a GPU drops to its idle clock (the H100 within milliseconds), and a few hundred
/// milliseconds of steady work bring it back. Without this, criterion's "gpu passes" read the H100
/// up to five times slower than `bitonic-vk bench` at some sizes (2^20 u32 keys 410 us against
/// 88 us, 2^16 u32 pairs 216 us against 46 us).
const WARM_UP: Duration = Duration::from_millis(500);
const IDLE: Duration = Duration::from_millis(20);
/// Untimed sorts at the head of each command buffer, for about this much GPU time (as `bench`
/// does), so that the host's copying between buffers leaves the clock up; at most 240 sorts a
/// command buffer, at most [`TIMED_PER_BUFFER`] of them timed.
const LEAD: Duration = Duration::from_millis(100);
const PER_BUFFER: u32 = 240;
const TIMED_PER_BUFFER: u32 = 200;

/// The GPU time of `iters` sorts of `input` run back to back on the GPU, in command buffers of at
/// most [`TIMED_PER_BUFFER`] timed sorts after untimed ones ([`LEAD`]); first [`WARM_UP`] of
/// untimed sorts where the GPU has had nothing from here for [`IDLE`] (`busy_until`); neither with
/// `warm` false (a CPU device, which has no clock to bring up).
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
        sorter.time_repeated(&mut keys, values, Order::Ascending, reps).unwrap_or_else(|e| panic!("sort: {e}"))
    };
    // A sort's GPU time, from the median of the last buffer's.
    let mut estimate = Duration::from_micros(1);
    let observe = |times: &[Duration], estimate: &mut Duration| {
        let mut sorted = times.to_vec();
        sorted.sort();
        if let Some(median) = sorted.get(sorted.len() / 2) {
            *estimate = (*median).max(Duration::from_micros(1));
        }
    };
    if warm && busy_until.is_none_or(|t| t.elapsed() > IDLE) {
        let start = Instant::now();
        while start.elapsed() < WARM_UP {
            let reps = (LEAD.as_secs_f64() / estimate.as_secs_f64()).clamp(1.0, f64::from(PER_BUFFER)) as u32;
            observe(&run(reps), &mut estimate);
        }
    }
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let reps = left.min(u64::from(TIMED_PER_BUFFER)) as u32;
        let lead = if warm {
            (LEAD.as_secs_f64() / estimate.as_secs_f64()).ceil().min(f64::from(PER_BUFFER - reps)) as u32
        } else {
            0
        };
        let times = run(lead + reps);
        observe(&times, &mut estimate);
        total += times.iter().skip(lead as usize).sum::<Duration>();
        left -= u64::from(reps);
    }
    *busy_until = Some(Instant::now());
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
