//! Key types and their order images: each key maps to an unsigned integer of its width whose
//! order is the key order. This is the CPU twin of `to_image`/`from_image` in `glsl/keys.glsl`
//! (and `glsl/unrolled/common.glsl`).

pub use crate::abi::KeyWidth;
use crate::abi::{FLAG_DESCENDING, KEY_F32, KEY_I32, KEY_U32};

/// Sort order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Smallest key first.
    #[default]
    Ascending,
    /// Largest key first.
    Descending,
}

/// The key types the shaders understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// `u32`.
    U32,
    /// `i32`.
    I32,
    /// `f32`, in IEEE total order as [`f32::total_cmp`]:
    /// -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN.
    F32,
    /// `u64`.
    U64,
    /// `i64`.
    I64,
    /// `f64`, in IEEE total order as [`f64::total_cmp`].
    F64,
}

impl KeyKind {
    /// Every key kind.
    pub const ALL: [KeyKind; 6] = [KeyKind::U32, KeyKind::I32, KeyKind::F32, KeyKind::U64, KeyKind::I64, KeyKind::F64];

    /// The key kind as the shaders' `flags` field encodes it: unsigned, signed or float (the
    /// width is a build of the kernels, not a flag).
    pub(crate) fn flag_bits(self) -> u32 {
        match self {
            KeyKind::U32 | KeyKind::U64 => KEY_U32,
            KeyKind::I32 | KeyKind::I64 => KEY_I32,
            KeyKind::F32 | KeyKind::F64 => KEY_F32,
        }
    }

    /// The key's width.
    pub fn width(self) -> KeyWidth {
        match self {
            KeyKind::U32 | KeyKind::I32 | KeyKind::F32 => KeyWidth::Bits32,
            KeyKind::U64 | KeyKind::I64 | KeyKind::F64 => KeyWidth::Bits64,
        }
    }

    /// The Rust name of the key type.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::U32 => "u32",
            KeyKind::I32 => "i32",
            KeyKind::F32 => "f32",
            KeyKind::U64 => "u64",
            KeyKind::I64 => "i64",
            KeyKind::F64 => "f64",
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for i32 {}
    impl Sealed for f32 {}
    impl Sealed for u64 {}
    impl Sealed for i64 {}
    impl Sealed for f64 {}
}

/// A key type the GPU can sort: `u32`, `i32`, `f32`, `u64`, `i64` or `f64`.
pub trait SortKey: bytemuck::Pod + sealed::Sealed {
    /// How the shaders read this type.
    const KIND: KeyKind;
}
impl SortKey for u32 {
    const KIND: KeyKind = KeyKind::U32;
}
impl SortKey for i32 {
    const KIND: KeyKind = KeyKind::I32;
}
impl SortKey for f32 {
    const KIND: KeyKind = KeyKind::F32;
}
impl SortKey for u64 {
    const KIND: KeyKind = KeyKind::U64;
}
impl SortKey for i64 {
    const KIND: KeyKind = KeyKind::I64;
}
impl SortKey for f64 {
    const KIND: KeyKind = KeyKind::F64;
}

/// The key types a stable sort takes: the 4-byte ones. A stable sort packs each key's order image
/// with the key's index into an 8-byte key, so that equal keys order by where they stood.
pub trait StableKey: SortKey {}
impl StableKey for u32 {}
impl StableKey for i32 {}
impl StableKey for f32 {}

const SIGN: u32 = 0x8000_0000;

/// The `flags` bits for a key kind and order (without the load/store bits).
pub fn key_flags(kind: KeyKind, order: Order) -> u32 {
    kind.flag_bits() | if order == Order::Descending { FLAG_DESCENDING } else { 0 }
}

/// 8-byte key bits to order image, as `to_image` in the KEY64 builds of the shaders does for
/// these `flags`.
#[cfg(any(test, feature = "test-hooks"))]
pub fn to_image64(bits: u64, flags: u32) -> u64 {
    const SIGN64: u64 = 1 << 63;
    let image = match flags & crate::abi::KEY_KIND_MASK {
        KEY_I32 => bits ^ SIGN64,
        KEY_F32 if bits & SIGN64 != 0 => !bits,
        KEY_F32 => bits ^ SIGN64,
        _ => bits,
    };
    if flags & FLAG_DESCENDING != 0 {
        !image
    } else {
        image
    }
}

/// Order image back to 8-byte key bits: the inverse of [`to_image64`].
#[cfg(any(test, feature = "test-hooks"))]
pub fn from_image64(image: u64, flags: u32) -> u64 {
    const SIGN64: u64 = 1 << 63;
    let bits = if flags & FLAG_DESCENDING != 0 { !image } else { image };
    match flags & crate::abi::KEY_KIND_MASK {
        KEY_I32 => bits ^ SIGN64,
        KEY_F32 if bits & SIGN64 != 0 => bits ^ SIGN64,
        KEY_F32 => !bits,
        _ => bits,
    }
}

/// Key bits to order image, as `to_image` in the shaders does for these `flags`.
pub fn to_image(bits: u32, flags: u32) -> u32 {
    let image = match flags & crate::abi::KEY_KIND_MASK {
        KEY_I32 => bits ^ SIGN,
        KEY_F32 if bits & SIGN != 0 => !bits,
        KEY_F32 => bits ^ SIGN,
        _ => bits,
    };
    if flags & FLAG_DESCENDING != 0 {
        !image
    } else {
        image
    }
}

/// Order image back to key bits: the inverse of [`to_image`].
pub fn from_image(image: u32, flags: u32) -> u32 {
    let bits = if flags & FLAG_DESCENDING != 0 { !image } else { image };
    match flags & crate::abi::KEY_KIND_MASK {
        KEY_I32 => bits ^ SIGN,
        KEY_F32 if bits & SIGN != 0 => bits ^ SIGN,
        KEY_F32 => !bits,
        _ => bits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn flags<K: SortKey>(order: Order) -> u32 {
        key_flags(K::KIND, order)
    }

    fn special_f32() -> Vec<f32> {
        let mut v = vec![
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            1.0,
            -1.0,
            f32::from_bits(1),
            f32::from_bits(SIGN | 1),
            f32::from_bits(0x7fc0_0000),
            f32::from_bits(0xffc0_0000),
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xff80_0001),
            f32::from_bits(0x7fff_ffff),
            f32::from_bits(0xffff_ffff),
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        v.extend((0..2000).map(|_| f32::from_bits(rng.random())));
        v
    }

    #[test]
    fn f32_image_order_is_total_cmp_in_both_orders() {
        let v = special_f32();
        for a in &v {
            for b in v.iter().step_by(7) {
                let (ia, ib) = (
                    to_image(a.to_bits(), flags::<f32>(Order::Ascending)),
                    to_image(b.to_bits(), flags::<f32>(Order::Ascending)),
                );
                assert_eq!(ia.cmp(&ib), a.total_cmp(b), "{a:e} vs {b:e}");
                let (da, db) = (
                    to_image(a.to_bits(), flags::<f32>(Order::Descending)),
                    to_image(b.to_bits(), flags::<f32>(Order::Descending)),
                );
                assert_eq!(da.cmp(&db), b.total_cmp(a), "descending {a:e} vs {b:e}");
            }
        }
    }

    #[test]
    fn i32_and_u32_image_order_is_integer_order() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut v: Vec<u32> = vec![0, 1, SIGN, SIGN - 1, SIGN + 1, u32::MAX];
        v.extend((0..500).map(|_| rng.random::<u32>()));
        for &a in &v {
            for &b in &v {
                let asc_i = flags::<i32>(Order::Ascending);
                assert_eq!(to_image(a, asc_i).cmp(&to_image(b, asc_i)), (a as i32).cmp(&(b as i32)));
                let asc_u = flags::<u32>(Order::Ascending);
                assert_eq!(to_image(a, asc_u).cmp(&to_image(b, asc_u)), a.cmp(&b));
                let desc_u = flags::<u32>(Order::Descending);
                assert_eq!(to_image(a, desc_u).cmp(&to_image(b, desc_u)), b.cmp(&a));
            }
        }
    }

    #[test]
    fn from_image_inverts_to_image_for_every_kind_and_order() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut bits: Vec<u32> = special_f32().iter().map(|f| f.to_bits()).collect();
        bits.extend((0..5000).map(|_| rng.random::<u32>()));
        for kind in [KeyKind::U32, KeyKind::I32, KeyKind::F32] {
            for order in [Order::Ascending, Order::Descending] {
                let f = key_flags(kind, order);
                for &b in &bits {
                    assert_eq!(from_image(to_image(b, f), f), b, "{kind:?} {order:?} {b:#x}");
                }
            }
        }
    }

    fn special_f64() -> Vec<u64> {
        let mut v: Vec<u64> = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            1.0,
            -1.0,
            f64::NAN,
            -f64::NAN,
        ]
        .iter()
        .map(|f: &f64| f.to_bits())
        .collect();
        v.extend([1, 1 << 63 | 1, 0x7ff0_0000_0000_0001, u64::MAX, 1 << 32, (1 << 32) - 1, 0xffff_ffff_0000_0000]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        v.extend((0..600).map(|_| rng.random::<u64>()));
        // Keys that differ only in the low word, where a wrong word order would show.
        v.extend((0..50).map(|i| 0x4000_0000_0000_0000 | (i * 0x1_0000_0001)));
        v
    }

    #[test]
    fn image64_order_is_key_order_and_inverts_for_every_kind_and_order() {
        let bits = special_f64();
        for kind in [KeyKind::U64, KeyKind::I64, KeyKind::F64] {
            let key_cmp = |a: u64, b: u64| match kind {
                KeyKind::U64 => a.cmp(&b),
                KeyKind::I64 => (a as i64).cmp(&(b as i64)),
                _ => f64::from_bits(a).total_cmp(&f64::from_bits(b)),
            };
            let asc = key_flags(kind, Order::Ascending);
            let desc = key_flags(kind, Order::Descending);
            for &a in &bits {
                assert_eq!(from_image64(to_image64(a, asc), asc), a, "{kind:?} {a:#x}");
                assert_eq!(from_image64(to_image64(a, desc), desc), a, "{kind:?} descending {a:#x}");
                for &b in bits.iter().step_by(5) {
                    assert_eq!(to_image64(a, asc).cmp(&to_image64(b, asc)), key_cmp(a, b), "{kind:?} {a:#x} {b:#x}");
                    assert_eq!(to_image64(a, desc).cmp(&to_image64(b, desc)), key_cmp(b, a), "{kind:?} desc");
                }
            }
        }
    }
}
