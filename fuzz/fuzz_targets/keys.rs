//! The key transforms: `to_image` and `from_image` for every key kind and order. Each image maps
//! back to its key, and the unsigned order of images is the key order (u32 and i32 comparison,
//! f32::total_cmp), reversed for descending; every u32 is the image of one key.

#![no_main]

use std::cmp::Ordering;

use bitonic_vk::keys::{from_image, to_image};
use bitonic_vk::push::{FLAG_DESCENDING, KEY_F32, KEY_I32, KEY_U32};
use libfuzzer_sys::fuzz_target;

/// A key order on key bits.
type KeyCmp = fn(u32, u32) -> Ordering;

fuzz_target!(|pair: (u32, u32)| {
    let (a, b) = pair;
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
