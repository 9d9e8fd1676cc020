//! Faults that can be provoked on any device: a fence timeout (the sort's resources and the
//! caller's input survive it, and the sorter recovers), a lost device (later calls fail at once),
//! an allocation larger than the device's memory (an error, after which the context still sorts),
//! and the thread-safety markers of the public types. Each test makes a context of its own, with
//! validation on (one loses its device on purpose).

mod common;
use common::*;
use std::time::Duration;

use bitonic_vk::{Context, Error, Order, SortBinding, SortRecorder, Sorter, SorterDesc};
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
