//! Faults that can be provoked on any device: a fence timeout (the sort's resources and the
//! caller's input survive it, and the sorter recovers), a lost device (later calls fail at once),
//! an allocation larger than the device's memory (an error, after which the context still sorts),
//! pipelines the driver refuses above a workgroup size (bind plans again with smaller workgroups,
//! or names the kernel and the knob), and the thread-safety markers of the public types. Each test makes a context of its own, with
//! validation on (one loses its device on purpose).

mod common;
use common::*;
use std::time::Duration;

use bitonic_vk::hooks;
use bitonic_vk::{Context, Error, Order, SortBinding, SortRecorder, Sorter, SorterDesc, Tuning};
use rand::{Rng, SeedableRng};

#[test]
fn public_types_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Context>();
    send_sync::<Sorter>();
    send_sync::<SortRecorder>();
    send_sync::<SortBinding>();
    send_sync::<Error>();
}

#[test]
fn a_fence_timeout_is_an_error_that_loses_nothing() {
    let ctx = new_context(true);
    let mut sorter = Sorter::new(&ctx, &sorter_desc(|d| d.timeout = Some(Duration::from_nanos(1))))
        .unwrap_or_else(|e| panic!("sorter: {e}"));
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let input: Vec<u32> = (0..1 << 16).map(|_| rng.random()).collect();
    let mut keys = input.clone();
    // Even a GPU takes more than a nanosecond to upload, sort and download 2^16 keys.
    let err = sorter.sort(&mut keys, Order::Ascending).expect_err("a 1 ns timeout");
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert!(err.to_string().contains("stay alive"), "{err}");
    assert_eq!(keys, input, "a timed-out sort must leave the input as it was");
    // The submission stays pending with its resources alive; with a sane timeout the next call
    // first waits for it, then sorts.
    sorter.set_timeout(Duration::from_secs(120));
    let mut small = vec![3u32, 1, 2];
    sorter.sort(&mut small, Order::Ascending).unwrap_or_else(|e| panic!("after the timeout: {e}"));
    assert_eq!(small, [1, 2, 3]);
    let mut again = input.clone();
    sorter.sort(&mut again, Order::Ascending).unwrap_or_else(|e| panic!("a full sort after the timeout: {e}"));
    assert_sorted("a full sort after the timeout", &input, Order::Ascending, u32::cmp, &again, None);
    drop(sorter);
    let errors = ctx.validation_errors();
    assert!(errors.is_empty(), "validation errors: {errors:#?}");
}

#[test]
fn after_a_lost_device_every_sort_fails_at_once() {
    let ctx = new_context(true);
    let mut sorter = Sorter::new(&ctx, &SorterDesc::default()).unwrap_or_else(|e| panic!("sorter: {e}"));
    let mut keys = vec![5u32, 4, 3, 2, 1];
    sorter.sort(&mut keys, Order::Ascending).unwrap_or_else(|e| panic!("before: {e}"));
    assert!(!ctx.is_lost());
    ctx.mark_lost_for_tests();
    assert!(ctx.is_lost());
    let mut keys = vec![5u32, 4, 3, 2, 1];
    let err = sorter.sort(&mut keys, Order::Ascending).expect_err("a lost device");
    assert!(matches!(err, Error::DeviceLost { .. }), "{err}");
    assert!(err.to_string().contains("create a new context"), "{err}");
    assert_eq!(keys, [5, 4, 3, 2, 1], "nothing touched");
    let mut values = vec![0u32; 5];
    assert!(matches!(sorter.sort_pairs(&mut keys, &mut values, Order::Ascending), Err(Error::DeviceLost { .. })));
    assert!(matches!(sorter.time_repeated(&mut keys, None, Order::Ascending, 2), Err(Error::DeviceLost { .. })));
}

#[test]
fn an_allocation_larger_than_the_device_memory_is_an_error_and_the_context_still_sorts() {
    let ctx = new_context(true);
    let heap = ctx.device_info().device_local_memory;
    assert!(heap > 0, "the device reports no device-local heap");
    let bytes = heap.saturating_mul(2);
    match ctx.allocate_for_tests(bytes) {
        Err(e @ Error::OutOfMemory { .. }) => {
            let message = e.to_string();
            assert!(message.contains(&bytes.to_string()), "{message}");
        }
        other => panic!("expected OutOfMemory for {bytes} bytes on a {heap}-byte heap, got {other:?}"),
    }
    let mut sorter = Sorter::new(&ctx, &SorterDesc::default()).unwrap_or_else(|e| panic!("sorter: {e}"));
    let mut keys: Vec<u32> = (0..10_000u32).rev().collect();
    sorter.sort(&mut keys, Order::Ascending).unwrap_or_else(|e| panic!("sort after the failed allocation: {e}"));
    assert!(keys.iter().copied().eq(0..10_000), "sorted after the failed allocation");
    drop(sorter);
    let errors = ctx.validation_errors();
    assert!(errors.is_empty(), "validation errors: {errors:#?}");
}

/// Sorts `n` random u32 keys, alone and with their indices as values, and u64 keys with values,
/// through `sorter`, each checked against the standard library's sort.
fn sorts_right(sorter: &mut Sorter, what: &str, n: usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(n as u64);
    let input: Vec<u32> = (0..n).map(|_| rng.random_range(0..n as u32)).collect();
    for order in [Order::Ascending, Order::Descending] {
        let mut keys = input.clone();
        sorter.sort(&mut keys, order).unwrap_or_else(|e| panic!("{what}, n = {n}: {e}"));
        assert_sorted(what, &input, order, u32::cmp, &keys, None);
        let mut keys = input.clone();
        let mut values: Vec<u32> = (0..n as u32).collect();
        sorter.sort_pairs(&mut keys, &mut values, order).unwrap_or_else(|e| panic!("{what} pairs, n = {n}: {e}"));
        assert_sorted(&format!("{what} pairs"), &input, order, u32::cmp, &keys, Some(&values));
    }
    let wide: Vec<u64> = input.iter().map(|&k| u64::from(k) << 33 | u64::from(k)).collect();
    let mut keys = wide.clone();
    let mut values: Vec<u32> = (0..n as u32).collect();
    sorter.sort_pairs(&mut keys, &mut values, Order::Ascending).unwrap_or_else(|e| panic!("{what} u64, n = {n}: {e}"));
    assert_sorted(&format!("{what} u64 pairs"), &wide, Order::Ascending, u64::cmp, &keys, Some(&values));
}

#[test]
fn pipelines_refused_above_128_invocations_are_planned_again_with_smaller_workgroups() {
    let ctx = new_context(true);
    // Workgroups of 256 invocations (the local kernels here, the global merges by default) and
    // the tile sort's subgroup form on 512: each refused, so bind halves the workgroups twice.
    let big_local = {
        let mut t = Tuning::default();
        t.max_tile = Some(1024);
        t.local_workgroup_size = Some(256);
        t
    };
    for (t, tuning) in [big_local, Tuning::default()].into_iter().enumerate() {
        let desc = sorter_desc(|d| {
            d.tuning = tuning;
            d.hooks.refuse_workgroups_above = Some(128);
        });
        let mut sorter = Sorter::new(&ctx, &desc).unwrap_or_else(|e| panic!("sorter: {e}"));
        // One tile (whose tile sort takes 256 invocations only with the first tuning), several
        // tiles (local and global merges), many tiles.
        let lengths: &[usize] = if t == 0 { &[1000, 5003, 20_011] } else { &[5003, 20_011] };
        for &n in lengths {
            let what = format!("tuning {t}, workgroups above 128 refused");
            sorts_right(&mut sorter, &what, n);
            assert_eq!(hooks::workgroup_limit(&sorter), Some(128), "{what}, n = {n}: the binding's workgroup limit");
        }
        // Without refusals the same sorts take their first plan.
        let mut plain = Sorter::new(&ctx, &sorter_desc(|d| d.tuning = tuning)).unwrap_or_else(|e| panic!("{e}"));
        sorts_right(&mut plain, &format!("tuning {t}"), 5003);
        assert_eq!(hooks::workgroup_limit(&plain), None, "tuning {t}: no refusal, no limit");
    }
    let errors = ctx.validation_errors();
    assert!(errors.is_empty(), "validation errors: {errors:#?}");
}

#[test]
fn a_pipeline_refused_at_every_workgroup_is_an_error_naming_the_kernel_and_the_knob() {
    let ctx = new_context(true);
    let desc = sorter_desc(|d| d.hooks.refuse_workgroups_above = Some(0));
    let mut sorter = Sorter::new(&ctx, &desc).unwrap_or_else(|e| panic!("sorter: {e}"));
    let input: Vec<u32> = (0..1000u32).rev().collect();
    let mut keys = input.clone();
    let err = sorter.sort(&mut keys, Order::Ascending).expect_err("every pipeline refused");
    let message = err.to_string();
    eprintln!("{message}");
    match &err {
        Error::PipelineRefused { kernel, workgroups, knob, .. } => {
            assert_eq!(kernel, "tile_sort", "{message}");
            assert_eq!(*knob, "Tuning::local_workgroup_size (--local-wg)", "{message}");
            assert_eq!(workgroups.last(), Some(&1), "tried down to one invocation: {message}");
            assert!(workgroups.windows(2).all(|w| w[1] == w[0] / 2), "each try halves the last: {message}");
        }
        other => panic!("expected PipelineRefused, got {other:?}"),
    }
    for part in [ctx.device_info().name.as_str(), "tile_sort", "Tuning::local_workgroup_size"] {
        assert!(message.contains(part), "the message names {part}: {message}");
    }
    assert_eq!(keys, input, "nothing touched");
    // A sort of several tiles refuses the global merges first: the message names their knob.
    let mut keys: Vec<u32> = (0..5003u32).rev().collect();
    let message = sorter.sort(&mut keys, Order::Ascending).expect_err("every pipeline refused").to_string();
    assert!(message.contains("Tuning::") && message.contains("[256, 128, 64"), "{message}");
    drop(sorter);
    // The refusals leave the context as it was.
    let mut sorter = Sorter::new(&ctx, &SorterDesc::default()).unwrap_or_else(|e| panic!("sorter: {e}"));
    sorts_right(&mut sorter, "after the refusals", 5003);
    drop(sorter);
    let errors = ctx.validation_errors();
    assert!(errors.is_empty(), "validation errors: {errors:#?}");
}
