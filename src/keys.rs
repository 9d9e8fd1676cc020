//! Key types and their order images: each key maps to a u32 whose unsigned order is the key
//! order. This is the CPU twin of `to_image`/`from_image` in `glsl/common.glsl`.

use crate::push::{FLAG_DESCENDING, KEY_F32, KEY_I32, KEY_U32};

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
}

impl KeyKind {
    /// The key kind as the shaders' `flags` field encodes it.
    pub(crate) fn flag_bits(self) -> u32 {
        match self {
            KeyKind::U32 => KEY_U32,
            KeyKind::I32 => KEY_I32,
            KeyKind::F32 => KEY_F32,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for i32 {}
    impl Sealed for f32 {}
}

/// A key type the GPU can sort: `u32`, `i32` or `f32`.
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

const SIGN: u32 = 0x8000_0000;

/// The `flags` bits for a key kind and order (without the load/store bits).
pub(crate) fn key_flags(kind: KeyKind, order: Order) -> u32 {
    kind.flag_bits() | if order == Order::Descending { FLAG_DESCENDING } else { 0 }
}

/// Key bits to order image, as `to_image` in the shaders does for these `flags`.
pub fn to_image(bits: u32, flags: u32) -> u32 {
    let image = match flags & crate::push::KEY_KIND_MASK {
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
    match flags & crate::push::KEY_KIND_MASK {
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
}
