//! Criterion benches: GPU time of the passes from timestamp queries (`iter_custom`, sorts run back
//! to back on the GPU), end-to-end wall time with upload and download, and the CPU's
//! `sort_unstable` on the same data.
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
    let largest = if ctx.device_info().device_type == DeviceType::Cpu { 16 } else { 24 };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let mut group = c.benchmark_group("u32 keys");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for log2 in (10..=largest).step_by(2) {
        let n = 1usize << log2;
        let input: Vec<u32> = (0..n).map(|_| rng.random()).collect();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("gpu passes", n), &input, |b, input| {
            b.iter_custom(|iters| back_to_back(&mut sorter, input, iters))
        });
        group.bench_with_input(BenchmarkId::new("gpu end to end", n), &input, |b, input| {
            b.iter_custom(|iters| each_copy(iters, input, |keys| wall(|| sort(&mut sorter, keys))))
        });
        group.bench_with_input(BenchmarkId::new("cpu sort_unstable", n), &input, |b, input| {
            b.iter_custom(|iters| each_copy(iters, input, |keys| wall(|| keys.sort_unstable())))
        });
    }
    group.finish();
}

fn sort(sorter: &mut bitonic_vk::Sorter, keys: &mut [u32]) -> bitonic_vk::SortStats {
    sorter.sort(keys, Order::Ascending).unwrap_or_else(|e| panic!("sort: {e}"))
}

/// The GPU time of `iters` sorts of `input` run back to back on the GPU (so that its clock stays
/// up between them), in command buffers of at most 240 sorts.
fn back_to_back(sorter: &mut bitonic_vk::Sorter, input: &[u32], iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let reps = left.min(240) as u32;
        let mut keys = input.to_vec();
        let times =
            sorter.time_repeated(&mut keys, None, Order::Ascending, reps).unwrap_or_else(|e| panic!("sort: {e}"));
        total += times.iter().sum::<Duration>();
        left -= u64::from(reps);
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
fn each_copy(iters: u64, input: &[u32], mut time: impl FnMut(&mut [u32]) -> Duration) -> Duration {
    (0..iters).map(|_| time(&mut input.to_vec())).sum()
}

criterion_group!(benches, sorts);
criterion_main!(benches);
