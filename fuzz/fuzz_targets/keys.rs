//! The key transforms: `to_image` and `from_image` (4-byte keys), `to_image64` and `from_image64`
//! (8-byte keys) for every key kind and order. Each image maps back to its key, and the unsigned
//! order of images is the key order (integer comparison, total_cmp for floats), reversed for
//! descending; every unsigned value is the image of one key.

#![no_main]

use std::cmp::Ordering;

use bitonic_vk::hooks::{from_image, from_image64, to_image, to_image64, FLAG_DESCENDING, KEY_F32, KEY_I32, KEY_U32};
use libfuzzer_sys::fuzz_target;

/// A key order on key bits.
type KeyCmp = fn(u32, u32) -> Ordering;
type KeyCmp64 = fn(u64, u64) -> Ordering;

fuzz_target!(|input: (u32, u32, u64, u64)| {
    let (a, b, a64, b64) = input;
    let kinds64: [(u32, KeyCmp64); 3] = [
        (KEY_U32, |a, b| a.cmp(&b)),
        (KEY_I32, |a, b| (a as i64).cmp(&(b as i64))),
        (KEY_F32, |a, b| f64::from_bits(a).total_cmp(&f64::from_bits(b))),
    ];
    for (kind, cmp) in kinds64 {
        for descending in [false, true] {
            let flags = kind | if descending { FLAG_DESCENDING } else { 0 };
            let (ia, ib) = (to_image64(a64, flags), to_image64(b64, flags));
            assert_eq!(from_image64(ia, flags), a64, "64-bit kind {kind} descending {descending}: {a64:#x}");
            assert_eq!(to_image64(from_image64(a64, flags), flags), a64, "64-bit kind {kind}: image {a64:#x}");
            let expect = if descending { cmp(b64, a64) } else { cmp(a64, b64) };
            assert_eq!(ia.cmp(&ib), expect, "64-bit kind {kind} descending {descending}: {a64:#x} vs {b64:#x}");
        }
    }
    let kinds: [(u32, KeyCmp); 3] = [
        (KEY_U32, |a, b| a.cmp(&b)),
        (KEY_I32, |a, b| (a as i32).cmp(&(b as i32))),
        (KEY_F32, |a, b| f32::from_bits(a).total_cmp(&f32::from_bits(b))),
    ];
    for (kind, cmp) in kinds {
        for descending in [false, true] {
            let flags = kind | if descending { FLAG_DESCENDING } else { 0 };
            let (ia, ib) = (to_image(a, flags), to_image(b, flags));
            assert_eq!(from_image(ia, flags), a, "kind {kind} descending {descending}: {a:#x} does not round trip");
            assert_eq!(from_image(ib, flags), b, "kind {kind} descending {descending}: {b:#x} does not round trip");
            // Every u32 is the image of exactly one key.
            assert_eq!(to_image(from_image(a, flags), flags), a, "kind {kind} descending {descending}: image {a:#x}");
            let expect = if descending { cmp(b, a) } else { cmp(a, b) };
            assert_eq!(ia.cmp(&ib), expect, "kind {kind} descending {descending}: images of {a:#x} and {b:#x}");
        }
    }
});
