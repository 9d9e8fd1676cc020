//! Soak: one process sorts 10,000 inputs of random size, key type, order and payload on one
//! sorter, checking every result against the standard library's sort, and checks that host memory
//! (resident set) and device memory (the allocator's bytes) stay flat after a warm-up. Validation
//! is off here (its own bookkeeping grows with every command); the GPU suite runs with it on.
//! `BITONIC_VK_SOAK_SORTS` changes the count; the seed is printed (`BITONIC_VK_SOAK_SEED`).

mod common;
use common::*;

use bitonic_vk::{Order, SortKey, Sorter, SorterDesc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The largest input; the warm-up sorts one of this size per payload so that the sorter's buffers
/// reach their final size before memory is measured.
const MAX_N: usize = 6000;
const WARM_UP: usize = 500;

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("resident pages");
    pages * 4096
}

/// Sorts `bits` as keys of type K (alone or with their indices as values) and checks the result
/// against the standard library's sort with the type's own comparison, bit for bit.
fn sort_and_check<K: SortKey + bytemuck::Pod>(
    sorter: &mut Sorter,
    bits: &[u32],
    order: Order,
    pairs: bool,
    cmp: impl Fn(&K, &K) -> std::cmp::Ordering,
    label: &str,
) {
    let input: Vec<K> = bytemuck::cast_slice(bits).to_vec();
    let mut keys = input.clone();
    let mut values: Vec<u32> = (0..bits.len() as u32).collect();
    if pairs { sorter.sort_pairs(&mut keys, &mut values, order) } else { sorter.sort(&mut keys, order) }
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_sorted(label, &input, order, cmp, &keys, pairs.then_some(&values[..]));
}

#[test]
fn ten_thousand_random_sorts_with_flat_memory() {
    let sorts: usize = std::env::var("BITONIC_VK_SOAK_SORTS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let seed: u64 =
        std::env::var("BITONIC_VK_SOAK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("soak: {sorts} sorts, seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let ctx = new_context(false);
    let mut sorter = Sorter::new(&ctx, &SorterDesc::default()).unwrap_or_else(|e| panic!("sorter: {e}"));
    let mut baseline = None;
    for i in 0..sorts.max(WARM_UP + 1) {
        // The first two sorts take the largest size, keys then pairs.
        let n = if i < 2 {
            MAX_N
        } else if rng.random_bool(0.1) {
            rng.random_range(0..8)
        } else {
            rng.random_range(0..=MAX_N)
        };
        let pairs = if i < 2 { i == 1 } else { rng.random_bool(0.5) };
        let order = if rng.random_bool(0.5) { Order::Ascending } else { Order::Descending };
        let kind = rng.random_range(0..3);
        // Few distinct keys now and then, so that equal keys and pairs with them are common.
        let distinct = if rng.random_bool(0.2) { Some(rng.random_range(1..8u32)) } else { None };
        let bits: Vec<u32> = (0..n)
            .map(|_| match (kind, distinct) {
                (_, Some(d)) => rng.random_range(0..d).wrapping_mul(0x9e37_79b9),
                (2, None) => rng.random_range(-1e6f32..1e6).to_bits(),
                _ => rng.random(),
            })
            .collect();
        let label = format!("sort {i}: n = {n}, kind {kind}, {order:?}, pairs {pairs}");
        match kind {
            0 => sort_and_check::<u32>(&mut sorter, &bits, order, pairs, |a, b| a.cmp(b), &label),
            1 => sort_and_check::<i32>(&mut sorter, &bits, order, pairs, |a, b| a.cmp(b), &label),
            _ => sort_and_check::<f32>(&mut sorter, &bits, order, pairs, |a, b| a.total_cmp(b), &label),
        }
        if i + 1 == WARM_UP {
            baseline = Some((resident_bytes(), ctx.allocated_bytes()));
        }
    }
    let (rss0, device0) = baseline.expect("warm-up finished");
    let (rss1, device1) = (resident_bytes(), ctx.allocated_bytes());
    eprintln!("soak: resident {rss0} -> {rss1} bytes; device memory (allocated, capacity) {device0:?} -> {device1:?}");
    assert_eq!(device0, device1, "device memory grew after the warm-up");
    assert!(rss1 <= rss0 + 8 * 1024 * 1024, "resident memory grew by {} bytes after the warm-up", rss1 - rss0);
}
