//! The pass planner, checked by the CPU model: a plan for an arbitrary length, geometry, key kind
//! and order is recorded through the same code that fills Vulkan command buffers, expanded into
//! the comparators and element accesses the shaders make, and run on arbitrary keys and values.
//! The result must be the keys sorted in the key order by an independent reference (std's sort
//! with u32/i32 comparison or f32::total_cmp), every key-value pair kept together, and no two
//! dispatches may touch one element without a barrier between them. Geometries come either raw
//! (any numbers) or from device limits and options as the sorter derives them; invalid ones must
//! be rejected with an error.

#![no_main]

use std::cmp::Ordering;

use arbitrary::Arbitrary;
use bitonic_vk::hooks::{
    direct_dispatches, dispatch_rules, geometry as geometry_for, pass_count, record_passes, Geometry, PassKind,
    Payload, Plan, RecordOptions, Recording, Step, Trace, FLAG_DESCENDING, KEY_F32, KEY_I32, KEY_U32, MAX_FUSED,
    MAX_TILE,
};
use bitonic_vk::{DeviceLimits, KeyWidth, Tuning};
use libfuzzer_sys::fuzz_target;

/// The longest array the model runs: a few thousand elements keep one input to milliseconds.
const MAX_N: u32 = 5000;

#[derive(Arbitrary, Debug)]
enum Shape {
    /// Any numbers, as a caller of `Plan::new` could pass them.
    Raw { tile_log2: u8, global_wg: u16, fused: u8 },
    /// What `geometry_for` makes of a device's limits and the sorter's options.
    Device {
        shared_memory: u32,
        invocations: u32,
        work_group_size_x: u32,
        pairs: bool,
        wide: bool,
        max_tile: Option<u32>,
        max_fused: Option<u32>,
        local_workgroup_size: Option<u32>,
        cpu: bool,
    },
}

#[derive(Arbitrary, Debug)]
enum Kind {
    U32,
    I32,
    F32,
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Taken modulo MAX_N + 1 unless `plan_only`.
    n: u32,
    /// Plan any u32 length without running the model (too long to run).
    plan_only: bool,
    shape: Shape,
    kind: Kind,
    descending: bool,
    /// Workgroups per dispatch (0 = no limit): passes split over several dispatches.
    max_groups: u16,
    with_values: bool,
    /// Keys, repeated to length n (few distinct keys make equal keys common).
    keys: Vec<u32>,
    /// A GPU-side count: each dispatch trimmed by its rule, as the indirect arguments are.
    count: Option<u32>,
}

fn geometry(shape: &Shape) -> Option<Geometry> {
    match *shape {
        Shape::Raw { tile_log2, global_wg, fused } => {
            // Workgroups of up to 1024 invocations (more only slow the model down).
            let global_wg = u32::from(global_wg) % 1025;
            Some(Geometry { tile_log2: u32::from(tile_log2), global_wg, fused: u32::from(fused) })
        }
        Shape::Device {
            shared_memory,
            invocations,
            work_group_size_x,
            pairs,
            wide,
            max_tile,
            max_fused,
            local_workgroup_size,
            cpu,
        } => {
            let limits = DeviceLimits {
                max_compute_shared_memory_size: shared_memory,
                max_compute_work_group_count_x: 65535,
                max_compute_work_group_count_y: 65535,
                max_compute_work_group_invocations: invocations,
                max_compute_work_group_size_x: work_group_size_x,
                max_storage_buffer_range: u32::MAX,
                max_memory_allocation_size: u64::MAX,
                subgroup_size: 32,
                subgroup_shuffle: true,
                timestamp_period: 1.0,
                timestamp_valid_bits: 64,
                min_storage_buffer_offset_alignment: 16,
                multiprocessors: 0,
            };
            let payload = if pairs { Payload::Pairs } else { Payload::Keys };
            let mut options = Tuning::default();
            options.max_tile = max_tile;
            options.max_fused_substages = max_fused;
            options.local_workgroup_size = local_workgroup_size;
            // An error is the right answer to limits or options the kernels cannot be built for;
            // what it accepts, the planner must accept too.
            let width = if wide { KeyWidth::Bits64 } else { KeyWidth::Bits32 };
            let (geometry, local_wg) = geometry_for(&limits, payload, width, &options, cpu).ok()?;
            assert!(geometry.check().is_ok(), "{geometry:?}");
            let tile = geometry.tile();
            assert!((2..=MAX_TILE).contains(&tile), "{geometry:?}");
            assert!(max_tile.is_none_or(|cap| tile <= cap), "{geometry:?} {options:?}");
            let bytes = u64::from(width.bytes()) + if pairs { 4 } else { 0 };
            assert!(u64::from(tile) * bytes <= u64::from(shared_memory), "{geometry:?} {limits:?}");
            assert!(geometry.global_wg >= 1 && geometry.global_wg <= invocations.min(work_group_size_x));
            assert!(local_wg.is_power_of_two() && local_wg <= invocations.min(work_group_size_x));
            assert!((1..=MAX_FUSED).contains(&geometry.fused));
            Some(geometry)
        }
    }
}

fuzz_target!(|input: Input| {
    let Some(geometry) = geometry(&input.shape) else { return };
    let kind_flags = match input.kind {
        Kind::U32 => KEY_U32,
        Kind::I32 => KEY_I32,
        Kind::F32 => KEY_F32,
    };
    let flags = kind_flags | if input.descending { FLAG_DESCENDING } else { 0 };
    let n = if input.plan_only { input.n } else { input.n % (MAX_N + 1) };

    // What the planner accepts, written out independently of it.
    let valid = (1..=14).contains(&geometry.tile_log2)
        && geometry.global_wg >= 1
        && (1..=6).contains(&geometry.fused)
        && n <= 1 << 31;
    let plan = match Plan::new(n, geometry, flags) {
        Ok(plan) => plan,
        Err(e) => {
            assert!(!valid, "{geometry:?} n={n} refused: {e}");
            return;
        }
    };
    assert!(valid, "{geometry:?} n={n} accepted");
    assert_eq!(plan.passes.len() as u64, pass_count(u64::from(n), geometry.tile_log2, geometry.fused), "{geometry:?}");
    if input.plan_only {
        return;
    }
    if n >= 2 {
        assert_eq!(plan.passes[0].kind, PassKind::TileSort);
    }

    let options = RecordOptions {
        max_groups_per_dispatch: if input.max_groups == 0 { u32::MAX } else { u32::from(input.max_groups) },
        drop_barrier_before_pass: None,
    };
    let mut recording = Recording::default();
    record_passes(&mut recording, &plan, &options);
    let trace = match input.count {
        None => Trace::expand(&recording, n, geometry),
        Some(count) => {
            let rules = dispatch_rules(&plan, options.max_groups_per_dispatch);
            let direct = direct_dispatches(&plan, options.max_groups_per_dispatch);
            Trace::expand_counted(&recording, n, geometry, count, direct, &rules)
        }
    };
    // With a count, the first min(count, n) elements are sorted, the rest never touched.
    let sorted = input.count.map_or(n, |c| c.min(n)) as usize;
    for d in trace.dispatches() {
        assert!(d.touched.iter().all(|&e| (e as usize) < sorted), "{geometry:?} n={n}: touched past the count");
    }
    let barriers = trace.steps.iter().filter(|s| matches!(s, Step::Barrier)).count();
    assert_eq!(barriers, plan.passes.len().saturating_sub(1));
    assert_eq!(trace.hazards(), vec![], "{geometry:?} n={n}");

    let input_keys: Vec<u32> = if input.keys.is_empty() {
        (0..n).map(|i| i.wrapping_mul(0x9e37_79b9).rotate_left(7)).collect()
    } else {
        input.keys.iter().copied().cycle().take(n as usize).collect()
    };
    let mut keys = input_keys.clone();
    let mut values: Vec<u32> = (0..n).collect();
    trace.run(&mut keys, input.with_values.then_some(&mut values[..]));

    let cmp = |a: &u32, b: &u32| -> Ordering {
        let ord = match input.kind {
            Kind::U32 => a.cmp(b),
            Kind::I32 => (*a as i32).cmp(&(*b as i32)),
            Kind::F32 => f32::from_bits(*a).total_cmp(&f32::from_bits(*b)),
        };
        if input.descending {
            ord.reverse()
        } else {
            ord
        }
    };
    let mut expect = input_keys.clone();
    expect[..sorted].sort_by(cmp);
    // Equal keys are equal bits in every kind (total_cmp tells every bit pattern apart), so the
    // sorted keys are exactly the reference's: sorted, and a permutation of the input.
    assert_eq!(keys, expect, "{geometry:?} n={n}");
    if input.with_values {
        let mut seen = vec![false; n as usize];
        assert!(values[sorted..].iter().enumerate().all(|(i, &v)| v as usize == sorted + i), "values past the count");
        for (i, &v) in values.iter().enumerate() {
            assert!(!std::mem::replace(&mut seen[v as usize], true), "value {v} twice");
            assert_eq!(keys[i], input_keys[v as usize], "pair {i} split");
        }
    }
});
