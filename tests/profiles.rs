//! Sorts planned for smaller devices than the one under test (`Hooks::profile`): the Vulkan
//! spec's minimum limits, a mobile GPU and Apple's through MoltenVK. A smaller limit than the
//! device reports is always legal to plan for, so lavapipe stands for each class here. Every key
//! type, keys and pairs, both orders and stable pairs, at lengths past one tile, several tiles,
//! the windowed merges and the segment passes of each profile's plans. And the tile sort's
//! subgroup form asking for full subgroups where the device offers them.

mod common;
use common::*;

use bitonic_vk::hooks::{self, DeviceProfile};
use bitonic_vk::{KeyWidth, Order, SortKey, Sorter, Tuning};
use rand::{Rng, SeedableRng};

/// Keys of `n` from `seed`, with runs of equal keys so that stability shows.
fn keys<K: SortKey>(n: usize, seed: u64, make: impl Fn(u64) -> K) -> Vec<K> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| make(rng.random::<u64>() % (n as u64 / 2 + 1))).collect()
}

/// Sorts `input` as keys alone and with its indices as values, both orders, checked against the
/// reference.
fn sort_both<K: SortKey + bytemuck::Pod>(
    sorter: &mut Sorter,
    what: &str,
    input: &[K],
    cmp: impl Fn(&K, &K) -> std::cmp::Ordering + Copy,
) {
    for order in [Order::Ascending, Order::Descending] {
        let mut out = input.to_vec();
        sorter.sort(&mut out, order).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_sorted(what, input, order, cmp, &out, None);
        let mut out = input.to_vec();
        let mut values: Vec<u32> = (0..input.len() as u32).collect();
        sorter.sort_pairs(&mut out, &mut values, order).unwrap_or_else(|e| panic!("{what} pairs: {e}"));
        assert_sorted(what, input, order, cmp, &out, Some(&values));
    }
}

fn profile_sorts(profile: DeviceProfile) {
    // Small tiles and forced segments bring multi-tile, windowed and segment plans down to
    // lengths lavapipe sorts quickly.
    let tuning = |set: fn(&mut Tuning)| {
        let mut t = Tuning::default();
        set(&mut t);
        t
    };
    let tunings = [
        Tuning::default(),
        tuning(|t| t.max_tile = Some(256)),
        tuning(|t| {
            t.max_tile = Some(512);
            t.segment_merges = Some(true);
            t.merge_workgroups = Some(3);
        }),
    ];
    for (t, tuning) in tunings.into_iter().enumerate() {
        let desc = sorter_desc(|d| {
            d.tuning = tuning;
            d.hooks.profile = Some(profile);
        });
        let mut sorter = Sorter::new(context(), &desc).unwrap_or_else(|e| panic!("{profile:?}: {e}"));
        if profile == DeviceProfile::Minimum {
            // The plans are the small device's: tiles within 16 KiB, workgroups of 128, no shuffles.
            for (pairs, width) in [(false, KeyWidth::Bits32), (true, KeyWidth::Bits64)] {
                let shape = hooks::shape(&sorter, 20_011, pairs, width).expect("a shape");
                assert!(shape.tile * width.bytes() <= 16 << 10, "{shape:?}");
                assert!(shape.local_wg <= 128 && !shape.small_tile_sort, "{shape:?}");
            }
        }
        let lengths: &[usize] = if t == 0 { &[1000, 20_011] } else { &[777, 5_003] };
        for &n in lengths {
            let seed = n as u64 + t as u64;
            let what = format!("{profile:?}, tuning {t}, n = {n}");
            sort_both(&mut sorter, &format!("{what}, u32"), &keys(n, seed, |k| k as u32), u32::cmp);
            sort_both(&mut sorter, &format!("{what}, i32"), &keys(n, seed, |k| k as i32 - 9), i32::cmp);
            sort_both(&mut sorter, &format!("{what}, f32"), &keys(n, seed, |k| k as f32 - 0.5), f32::total_cmp);
            sort_both(&mut sorter, &format!("{what}, u64"), &keys(n, seed, |k| k << 40 | k), u64::cmp);
            sort_both(&mut sorter, &format!("{what}, i64"), &keys(n, seed, |k| k as i64 - (1 << 40)), i64::cmp);
            sort_both(&mut sorter, &format!("{what}, f64"), &keys(n, seed, |k| k as f64 * -0.25), f64::total_cmp);
            let input: Vec<u32> = keys(n, seed, |k| (k / 3) as u32);
            let mut out = input.clone();
            let mut values: Vec<u32> = (0..n as u32).collect();
            sorter
                .sort_pairs_stable(&mut out, &mut values, Order::Descending)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            if let Err(e) = Reference::new(&input, Order::Descending, u32::cmp).check_stable(&out, &values) {
                panic!("{what}, stable u32 pairs: {e}");
            }
        }
    }
    let errors = context().validation_errors();
    assert!(errors.is_empty(), "validation errors: {errors:?}");
}

#[test]
fn the_spec_minimum_limits_sort_every_key_type() {
    profile_sorts(DeviceProfile::Minimum);
}

#[test]
fn a_mobile_gpu_sorts_every_key_type() {
    profile_sorts(DeviceProfile::Mobile);
}

#[test]
fn an_apple_gpu_sorts_every_key_type() {
    profile_sorts(DeviceProfile::Apple);
}

#[test]
fn the_subgroup_tile_sort_asks_for_full_subgroups_where_its_workgroup_allows() {
    let info = context().device_info().clone();
    eprintln!("computeFullSubgroups offered: {}, maxSubgroupSize {}", info.full_subgroups, info.max_subgroup_size);
    // SMALL tile sorts of keys on 512, 32 and 4 invocations (two elements each, tile = 4 x the
    // local workgroup), and of pairs on 64.
    for (tile, pairs) in [(1024, false), (64, false), (8, false), (128, true)] {
        let desc = sorter_desc(|d| {
            d.tuning.max_tile = Some(tile);
            d.tuning.local_workgroup_size = Some(tile / 4);
        });
        let mut sorter = Sorter::new(context(), &desc).unwrap_or_else(|e| panic!("tile {tile}: {e}"));
        let shape = hooks::shape(&sorter, tile as usize, pairs, KeyWidth::Bits32).expect("a shape");
        let wg = shape.tile / 2;
        let full = info.full_subgroups && shape.small_tile_sort && wg % info.max_subgroup_size.max(1) == 0;
        for n in [tile as usize - 1, tile as usize, 3 * tile as usize + 5] {
            let what = format!("tile {tile}, pairs {pairs}, n = {n}");
            let input: Vec<u32> = keys(n, n as u64, |k| k as u32);
            let mut out = input.clone();
            if pairs {
                let mut values: Vec<u32> = (0..n as u32).collect();
                sorter.sort_pairs(&mut out, &mut values, Order::Ascending).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_sorted(&what, &input, Order::Ascending, u32::cmp, &out, Some(&values));
            } else {
                sorter.sort(&mut out, Order::Descending).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_sorted(&what, &input, Order::Descending, u32::cmp, &out, None);
            }
            if n == tile as usize {
                let expected: &[&str] = if full { &["tile_sort"] } else { &[] };
                assert_eq!(hooks::full_subgroup_kernels(&sorter), expected, "{what}: {shape:?}, {wg} invocations");
            }
        }
    }
    let errors = context().validation_errors();
    assert!(errors.is_empty(), "validation errors: {errors:?}");
}
