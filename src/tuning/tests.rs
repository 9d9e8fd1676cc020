//! The sizing rules' tests: each rule against the cases it was measured on, and its invariants.

use super::*;
use crate::network::Plan;
use crate::segment::{passes_and_shorts, segment_shapes};

#[test]
fn segments_carry_runs_of_16_only_where_they_paid() {
    let runs = |n: u32, tile_log2, key_bytes, element_bytes, sms| {
        segment_runs(n, &Geometry { tile_log2, global_wg: 256, fused: 6 }, key_bytes, element_bytes, sms)
    };
    let fixed = SegmentRuns::fixed;
    let mixed = SegmentRuns { short: SEGMENT_MIN_RUN_LOG2, long: SEGMENT_LONG_RUN_LOG2 };
    // (n, log2 of the tile, key bytes, element bytes, the runs) on 132 multiprocessors, with
    // the tiles the sorter gives these sizes.
    for (n, t, key, element, wanted) in [
        // u32 keys: 2^22 (14 segment passes either way) paid, 2^24 (19 against 18) lost.
        (1 << 22, 13, 4, 4, fixed(4)),
        (1 << 24, 13, 4, 4, fixed(3)),
        (1 << 23, 13, 4, 4, fixed(3)),
        (1 << 21, 13, 4, 4, fixed(4)),
        // One tile per multiprocessor or fewer: 2^20 keys lost with one pass more.
        (1 << 20, 13, 4, 4, fixed(3)),
        (1 << 18, 11, 4, 4, fixed(3)),
        // u32 pairs beyond the multiprocessors, whatever the passes.
        (1 << 20, 12, 4, 8, fixed(4)),
        (1 << 22, 12, 4, 8, fixed(4)),
        (1 << 24, 12, 4, 8, fixed(4)),
        (1 << 16, 11, 4, 8, fixed(3)),
        // 8-byte keys were not measured.
        (1 << 22, 12, 8, 8, fixed(3)),
        (1 << 22, 12, 8, 12, fixed(3)),
    ] {
        assert_eq!(runs(n, t, key, element, 132), wanted, "n={n} tile 2^{t} {key}/{element} bytes");
        assert_eq!(runs(n, t, key, element, 0), fixed(SEGMENT_MIN_RUN_LOG2), "no multiprocessor count: n={n}");
    }
    // segment_passes counts what segmented_with_runs plans after the tile sort.
    for (n, t) in [(1u32 << 22, 13), (1 << 24, 13), (1 << 24, 12), (3_000_000, 12), (1 << 16, 11), (5, 4)] {
        for r in (1..=5).map(fixed).chain([mixed, SegmentRuns { short: 2, long: 5 }]) {
            let plan = Plan::segmented_with_runs(n, Geometry { tile_log2: t, global_wg: 256, fused: 5 }, 0, r);
            assert_eq!(plan.expect("valid").passes.len() - 1, segment_passes(n, t, r), "n={n} t={t} {r:?}");
        }
    }
    let count = |n, t, r| segment_passes(n, t, r);
    assert_eq!((count(1 << 22, 13, fixed(3)), count(1 << 22, 13, fixed(4))), (14, 14));
    assert_eq!((count(1 << 24, 12, fixed(3)), count(1 << 24, 12, fixed(4))), (21, 22));
    // The planner's choice at 2^24 u32 keys: as few passes as runs of 8 (one fewer than
    // runs of 16), 4 of the 7 that carry a run carrying 16.
    let shapes = segment_shapes(24, 13, mixed);
    assert_eq!(passes_and_shorts(&shapes, mixed), (18, 3));
    assert_eq!((count(1 << 24, 13, fixed(3)), count(1 << 24, 13, fixed(4))), (18, 19));
    // A long run shorter than the short one is refused.
    let refused = Plan::segmented_with_runs(
        1 << 20,
        Geometry { tile_log2: 13, global_wg: 256, fused: 5 },
        0,
        SegmentRuns { short: 4, long: 3 },
    );
    assert!(matches!(refused, Err(Error::InvalidOption { name: "segment_run_long", .. })));
}

#[test]
fn segments_are_the_default_only_where_they_paid() {
    // The sizes measured (on 132 multiprocessors), with the tiles the sorter gives
    // them: segment_tile's where there is one, else 32 tiles wanted, at least 2048.
    let on_with = |n: u32, tile_log2, bytes, sms, merge_groups| {
        segments_pay(n, &Geometry { tile_log2, global_wg: 256, fused: 6 }, bytes, sms, merge_groups)
    };
    // The default merge workgroups: one per multiprocessor.
    let on = |n: u32, tile_log2, bytes, sms| on_with(n, tile_log2, bytes, sms, sms);
    // (n, log2 of the tile, bytes per element: u32 keys 4, u32 pairs and u64 keys 8, u64
    // pairs 12, whether segments are the default).
    let cases = [
        (1 << 12, 11, 4, false),
        (1 << 13, 11, 4, true),
        (1 << 15, 11, 4, true),
        (100_000, 11, 4, true),
        (1 << 16, 11, 4, true),
        (1 << 17, 11, 4, true),
        (1 << 18, 11, 4, true),
        (393_216, 12, 4, true),
        (1 << 19, 12, 4, true),
        (786_432, 13, 4, true),
        (1 << 20, 13, 4, true),
        // Beyond the multiprocessors, where the segment passes loop.
        (1_500_000, 13, 4, true),
        (1 << 21, 13, 4, true),
        (1 << 24, 13, 4, true),
        // The other plan's tiles, where segments lost.
        (1 << 18, 13, 4, false),
        (1 << 19, 13, 4, false),
        // u32 pairs.
        (1 << 12, 11, 8, false),
        (1 << 14, 11, 8, true),
        (1 << 16, 11, 8, true),
        (100_000, 11, 8, true),
        (1 << 17, 11, 8, true),
        (1 << 18, 11, 8, true),
        (1 << 19, 12, 8, true),
        (786_432, 12, 8, true),
        (1 << 20, 12, 8, true),
        (1 << 24, 12, 8, true),
        // 32 tiles of 32 KiB lost.
        (1 << 17, 12, 8, false),
        // u64 keys.
        (1 << 14, 11, 8, true),
        (1 << 16, 11, 8, true),
        (1 << 17, 11, 8, true),
        (1 << 18, 11, 8, true),
        (1 << 19, 12, 8, true),
        (1 << 20, 12, 8, true),
        // u64 pairs.
        (1 << 14, 11, 12, true),
        (1 << 16, 11, 12, true),
        (1 << 17, 11, 12, true),
        (1 << 18, 11, 12, true),
        (1 << 19, 12, 12, true),
        (1 << 20, 12, 12, true),
        (1_572_864, 12, 12, true),
        (1 << 21, 12, 12, true),
        (1 << 22, 12, 12, true),
        (1 << 23, 12, 12, true),
        (1 << 24, 12, 12, true),
        // Two tiles; 3 tiles of 48 KiB (within the multiprocessors the rule above holds);
        // tiles below 4096 (not measured beyond the multiprocessors).
        (1 << 12, 11, 12, false),
        (12_288, 12, 12, false),
        (1 << 20, 11, 12, false),
        (1 << 20, 10, 12, false),
        (100_000, 8, 12, false),
    ];
    for (n, t, bytes, pays) in cases {
        assert_eq!(on(n, t, bytes, 132), pays, "n={n} tile 2^{t}, {bytes} bytes per element");
        assert!(!on(n, t, bytes, 0), "a device without a multiprocessor count: n={n}");
    }
    // Without loops (merge workgroups 0), beyond the multiprocessors only u64 pairs take
    // segments; within them nothing changes.
    for (n, t, bytes, pays) in [
        (1 << 21, 13, 4, false),
        (1 << 24, 13, 4, false),
        (1 << 20, 12, 8, false),
        (1 << 21, 12, 12, true),
        (1 << 20, 13, 4, true),
        (1 << 16, 11, 8, true),
    ] {
        assert_eq!(on_with(n, t, bytes, 132, 0), pays, "n={n} tile 2^{t}, {bytes} bytes, no loops");
    }
    // Segment passes of u64 pairs never loop; those of 4- and 8-byte elements do.
    assert!(segments_loop(4) && segments_loop(8) && !segments_loop(12));
}

#[test]
fn a_segment_tile_is_the_smallest_that_leaves_no_more_tiles_than_multiprocessors() {
    let tile = |n, max| segment_tile(n, max, 132);
    // Too few tiles for segments at any size (2 or fewer).
    assert_eq!(tile(1 << 12, 8192), None);
    assert_eq!(tile(4096, 8192), None);
    assert_eq!(tile(4097, 8192), Some(2048));
    assert_eq!(tile(1 << 16, 8192), Some(2048));
    assert_eq!(tile(1 << 18, 8192), Some(2048));
    assert_eq!(tile(132 * 2048, 8192), Some(2048));
    assert_eq!(tile(132 * 2048 + 1, 8192), Some(4096));
    assert_eq!(tile(393_216, 8192), Some(4096));
    assert_eq!(tile(1 << 19, 8192), Some(4096));
    assert_eq!(tile(1 << 20, 8192), Some(8192));
    // More tiles than multiprocessors at the largest tile: the other plan.
    assert_eq!(tile(1 << 20, 4096), None);
    assert_eq!(tile(1_500_000, 8192), None);
    assert_eq!(tile(u32::MAX, u32::MAX), Some(1 << 25));
    assert_eq!(segment_tile(u32::MAX, u32::MAX, 1), None);
    // A cap below the smallest segment tile leaves it to the other plan's tiles.
    assert_eq!(tile(1 << 16, 1024), None);
    // Every tile given leaves 3 to 132 tiles and halving it would leave more than 132.
    for n in (0..=1u32 << 21).step_by(4099) {
        if let Some(t) = tile(n, 8192) {
            let tiles = n.div_ceil(t);
            assert!(t.is_power_of_two() && (SEGMENT_MIN_TILE..=8192).contains(&t), "n={n}");
            assert!(tiles > 2 && tiles <= 132, "n={n}: {tiles} tiles of {t}");
            assert!(t == SEGMENT_MIN_TILE || n.div_ceil(t / 2) > 132, "n={n}: {t} is not the smallest");
        }
    }
}

/// The local chunk of a binding of `capacity` 4-byte elements in tiles of 2^`t` fusing up to 6.
fn chunk(
    payload: Payload,
    width: KeyWidth,
    t: u32,
    capacity: u32,
    segment_tile: Option<u32>,
    fused: Option<u32>,
) -> u32 {
    let geometry = Geometry { tile_log2: t, global_wg: 256, fused: fused.unwrap_or(default_fused(payload, width)) };
    let tuning = Tuning { max_fused_substages: fused, ..Tuning::default() };
    local_chunk(payload, width, &geometry, capacity, segment_tile, &tuning)
}

#[test]
fn keys_in_segment_tiles_of_2048_take_chunks_of_three() {
    let keys = |n: u32, tile: Option<u32>, fused| chunk(Payload::Keys, KeyWidth::Bits32, 11, n, tile, fused);
    assert_eq!(keys((1 << 15) + 1, Some(2048), None), 3);
    assert_eq!(keys(40_000, Some(2048), None), 3);
    assert_eq!(keys(1 << 16, Some(2048), None), 3);
    assert_eq!(keys(1 << 18, Some(2048), None), 3);
    assert_eq!(keys(132 * 2048, Some(2048), Some(2)), 2);
    // Other segment tiles, no segment tile, pairs and 8-byte keys keep the default.
    assert_eq!(chunk(Payload::Keys, KeyWidth::Bits32, 12, 1 << 19, Some(4096), None), 4);
    assert_eq!(keys(1 << 18, None, None), 4);
    assert_eq!(chunk(Payload::Keys, KeyWidth::Bits32, 13, 1 << 20, None, None), 5);
    assert_eq!(chunk(Payload::Pairs, KeyWidth::Bits32, 11, 1 << 16, Some(2048), None), 4);
    assert_eq!(chunk(Payload::Pairs, KeyWidth::Bits32, 11, 1 << 18, Some(2048), None), 4);
    assert_eq!(chunk(Payload::Keys, KeyWidth::Bits64, 11, 1 << 18, Some(2048), None), 4);
    // The knob wins.
    let tuning = Tuning { local_chunk_substages: Some(2), ..Tuning::default() };
    let geometry = Geometry { tile_log2: 13, global_wg: 256, fused: 6 };
    assert_eq!(local_chunk(Payload::Keys, KeyWidth::Bits32, &geometry, 100, None, &tuning), 2);
}

#[test]
fn sorts_of_up_to_2e15_take_chunks_of_three_never_above_the_fusion_cap() {
    let pairs = |n: u32, fused| chunk(Payload::Pairs, KeyWidth::Bits32, 11, n, None, fused);
    for n in [2, 1 << 13, 20_000, 1 << 15] {
        assert_eq!(pairs(n, None), 3, "n={n}");
    }
    assert_eq!(pairs((1 << 15) + 1, None), 4);
    assert_eq!(pairs(1 << 16, None), 4);
    assert_eq!(pairs(1000, Some(2)), 2);
    assert_eq!(pairs(1000, Some(1)), 1);
    assert_eq!(pairs(1000, Some(6)), 3);
}

#[test]
fn tiles_are_sized_to_the_sort() {
    // Sorts of up to 1024 elements share one tile of 1024, so a sort of 2^10 is one full tile
    // and small sizes add one set of pipelines, not one per power of two.
    assert_eq!(tile_for(0), 1024);
    assert_eq!(tile_for(3), 1024);
    assert_eq!(tile_for(1000), 1024);
    assert_eq!(tile_for(1024), 1024);
    assert_eq!(tile_for(1025), 2048);
    assert_eq!(tile_for(2048), 2048);
    // Larger sorts keep at least 32 tiles, down to 2048 elements.
    assert_eq!(tile_for(1 << 16), 2048);
    assert_eq!(tile_for(1 << 17), 4096);
    assert_eq!(tile_for((1 << 20) + 5), 1 << 15);
}

#[test]
fn tiles_beyond_the_shared_memory_any_device_has_run_are_opt_in() {
    let limits = |shared| crate::device::DeviceLimits::for_tests(shared, 0);
    let tile = |shared, max_tile| {
        let tuning = Tuning { max_tile, ..Tuning::default() };
        geometry(&limits(shared), Payload::Keys, KeyWidth::Bits32, &tuning, false).expect("a geometry").0.tile()
    };
    // 64 KiB (AMD, Intel) would fit 16 384 4-byte keys; by default it takes the 48 KiB tile.
    assert_eq!(tile(64 << 10, None), 8192);
    assert_eq!(tile(48 << 10, None), 8192);
    assert_eq!(tile(64 << 10, Some(MAX_TILE)), 16384);
    assert_eq!(tile(48 << 10, Some(MAX_TILE)), 8192);
    assert_eq!(tile(16 << 10, None), 4096);
}

#[test]
fn the_global_workgroup_knob_is_a_power_of_two_capped_by_the_device() {
    let limits = DeviceLimits::for_tests(48 << 10, 0);
    let global = |wg| {
        let tuning = Tuning { global_workgroup_size: wg, ..Tuning::default() };
        geometry(&limits, Payload::Keys, KeyWidth::Bits32, &tuning, false).map(|(g, _)| g.global_wg)
    };
    assert_eq!(global(None).ok(), Some(GLOBAL_WG));
    assert_eq!(global(Some(64)).ok(), Some(64));
    assert_eq!(global(Some(4096)).ok(), Some(1024), "capped by the device's 1 024 invocations");
    for bad in [0, 96] {
        let err = global(Some(bad)).expect_err("not a power of two").to_string();
        assert!(err.contains("global_workgroup_size"), "{err}");
    }
}

/// What `bind` plans again with where the driver refuses a pipeline: every workgroup of the
/// binding within the limit, the tile (the capacity's) kept, and the SMALL tile sort given up
/// where its workgroup would exceed it.
#[test]
fn a_sizing_capped_at_a_workgroup_size_plans_every_kernel_within_it() {
    let limits = DeviceLimits::for_tests(48 << 10, 0);
    let tuning = Tuning { local_workgroup_size: Some(1024), ..Tuning::default() };
    let sizing = Sizing::new(tuning, limits, false, true).expect("a valid sizing");
    for (payload, width) in
        [(Payload::Keys, KeyWidth::Bits32), (Payload::Pairs, KeyWidth::Bits32), (Payload::Pairs, KeyWidth::Bits64)]
    {
        for capacity in [1000, 5000, 1 << 20] {
            let first = sizing.binding(payload, width, capacity, false).expect("a shape");
            for cap in [512, 128, 16, 1] {
                let capped = sizing.with_workgroups_of_at_most(cap).expect("a capped sizing");
                let shape = capped.binding(payload, width, capacity, false).expect("a capped shape");
                let what = format!("{payload:?} {width:?}, capacity {capacity}, cap {cap}: {shape:?}");
                assert_eq!(shape.geometry.tile(), first.geometry.tile(), "{what}");
                assert!(shape.local_wg <= cap && shape.geometry.global_wg <= cap, "{what}");
                let tile = shape.geometry.tile();
                if small_tile_sort(&capped.limits, payload, width, tile, shape.local_wg, shape.chunk) {
                    assert!(tile / small_slots(payload, tile) <= cap, "{what}");
                }
            }
        }
    }
    // Tiles of origins need a sixteenth of the tile per workgroup: asked for always, a cap below
    // that is refused rather than planned.
    let origins = Sizing::new(Tuning { tile_origins: Some(true), ..Tuning::default() }, limits, false, true)
        .expect("origins fit");
    assert!(origins.with_workgroups_of_at_most(1).is_err());
}
