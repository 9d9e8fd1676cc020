//! Benchmark inputs, the CPU baselines that sort them, and the check of a GPU result against the
//! CPU's.

use std::cmp::Ordering;

use anyhow::{anyhow, bail, ensure};
use bitonic_vk::{KeyKind, Order, SortKey};
use clap::ValueEnum;
use rand::{Rng, SeedableRng};
use rayon::slice::ParallelSliceMut as _;
use serde::Serialize;

/// A key type of the CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
}

impl KeyType {
    pub fn name(self) -> &'static str {
        self.kind().name()
    }

    pub fn kind(self) -> KeyKind {
        match self {
            KeyType::U32 => KeyKind::U32,
            KeyType::I32 => KeyKind::I32,
            KeyType::F32 => KeyKind::F32,
            KeyType::U64 => KeyKind::U64,
            KeyType::I64 => KeyKind::I64,
            KeyType::F64 => KeyKind::F64,
        }
    }

    /// Bytes per key.
    pub fn bytes(self) -> usize {
        self.kind().width().bytes() as usize
    }
}

/// How benchmark keys are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    /// Independent random keys over the type's range (floats: uniform in [-1e6, 1e6)).
    Uniform,
    /// Already in ascending key order.
    Sorted,
    /// In descending key order.
    Reversed,
    /// Ascending, with 1 % of the keys swapped at random.
    NearlySorted,
    /// Random picks among 16 distinct keys.
    FewUnique,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Sorted => "sorted",
            Distribution::Reversed => "reversed",
            Distribution::NearlySorted => "nearly-sorted",
            Distribution::FewUnique => "few-unique",
        }
    }
}

/// A key type the benchmark can generate and sort on the CPU, independently of the GPU's order
/// images: `Ord` for the integers, `total_cmp` for floats.
pub trait BenchKey: SortKey + std::fmt::Debug + Send + Sync {
    fn random(rng: &mut impl Rng) -> Self;
    fn cmp_key(a: &Self, b: &Self) -> Ordering;
}

/// Integers: uniform over the type's range, in `Ord` order.
macro_rules! integer_key {
    ($($t:ty),*) => {$(
        impl BenchKey for $t {
            fn random(rng: &mut impl Rng) -> Self {
                rng.random()
            }
            fn cmp_key(a: &Self, b: &Self) -> Ordering {
                a.cmp(b)
            }
        }
    )*};
}
integer_key!(u32, i32, u64, i64);

/// Floats: uniform in [-1e6, 1e6), in `total_cmp` order.
macro_rules! float_key {
    ($($t:ty),*) => {$(
        impl BenchKey for $t {
            fn random(rng: &mut impl Rng) -> Self {
                rng.random_range(-1e6..1e6)
            }
            fn cmp_key(a: &Self, b: &Self) -> Ordering {
                a.total_cmp(b)
            }
        }
    )*};
}
float_key!(f32, f64);

/// `n` keys laid out as `dist` says, from `seed`.
pub fn generate<K: BenchKey>(n: usize, dist: Distribution, seed: u64) -> Vec<K> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    match dist {
        Distribution::FewUnique => {
            let pool: Vec<K> = (0..16).map(|_| K::random(&mut rng)).collect();
            (0..n).map(|_| pool[rng.random_range(0..pool.len())]).collect()
        }
        _ => {
            let mut keys: Vec<K> = (0..n).map(|_| K::random(&mut rng)).collect();
            match dist {
                Distribution::Sorted | Distribution::NearlySorted => keys.sort_unstable_by(K::cmp_key),
                Distribution::Reversed => keys.sort_unstable_by(|a, b| K::cmp_key(b, a)),
                _ => {}
            }
            if dist == Distribution::NearlySorted && n > 1 {
                for _ in 0..n.div_ceil(100) {
                    let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
                    keys.swap(a, b);
                }
            }
            keys
        }
    }
}

fn ordered<K: BenchKey>(order: Order) -> impl Fn(&K, &K) -> Ordering + Sync {
    move |a, b| match order {
        Order::Ascending => K::cmp_key(a, b),
        Order::Descending => K::cmp_key(b, a),
    }
}

/// The CPU baselines: `sort_unstable` on one core and rayon's `par_sort_unstable` on all, with
/// the same comparator. Pairs sort (key, value) tuples by key.
pub fn cpu_sort<K: BenchKey>(keys: &mut [K], order: Order, parallel: bool) {
    let cmp = ordered::<K>(order);
    if parallel {
        keys.par_sort_unstable_by(cmp);
    } else {
        keys.sort_unstable_by(cmp);
    }
}

pub fn cpu_sort_pairs<K: BenchKey>(pairs: &mut [(K, u32)], order: Order, parallel: bool) {
    let cmp = ordered::<K>(order);
    if parallel {
        pairs.par_sort_unstable_by(|a, b| cmp(&a.0, &b.0));
    } else {
        pairs.sort_unstable_by(|a, b| cmp(&a.0, &b.0));
    }
}

/// Checks a GPU result against the CPU's sorted keys: every key bit for bit in place, and with
/// values, each value pointing at an input key equal to the key beside it, every value used once.
pub fn check<K: BenchKey>(input: &[K], expect: &[K], keys: &[K], values: Option<&[u32]>) -> anyhow::Result<()> {
    // Keys as bit patterns, one u64 each (4-byte keys zero-extended).
    let bits = |k: &[K]| -> Vec<u64> {
        let bytes: &[u8] = bytemuck::cast_slice(k);
        bytes
            .chunks_exact(size_of::<K>())
            .map(|c| c.iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
            .collect()
    };
    let (expect_bits, got_bits, input_bits) = (bits(expect), bits(keys), bits(input));
    ensure!(
        got_bits.len() == expect_bits.len(),
        "wrong result: {} keys came back, not {}",
        got_bits.len(),
        expect_bits.len()
    );
    if let Some(i) = (0..got_bits.len()).find(|&i| got_bits[i] != expect_bits[i]) {
        bail!("wrong result: key {i} is {:?} but the CPU sort has {:?}", keys[i], expect[i]);
    }
    if let Some(values) = values {
        let mut seen = vec![false; input.len()];
        for (i, &v) in values.iter().enumerate() {
            let slot =
                seen.get_mut(v as usize).ok_or_else(|| anyhow!("wrong result: value {i} is {v}, out of range"))?;
            ensure!(!std::mem::replace(slot, true), "wrong result: value {v} appears twice");
            ensure!(
                input_bits[v as usize] == got_bits[i],
                "wrong result: pair {i} split: key {:?} with value {v}",
                keys[i]
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_have_their_shape() {
        let sorted = generate::<i32>(1000, Distribution::Sorted, 1);
        assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        let reversed = generate::<f32>(1000, Distribution::Reversed, 1);
        assert!(reversed.windows(2).all(|w| w[0] >= w[1]));
        let few = generate::<u32>(1000, Distribution::FewUnique, 1);
        let mut distinct = few.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() <= 16);
        let uniform = generate::<u32>(1000, Distribution::Uniform, 1);
        assert!(!uniform.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn check_catches_wrong_results() {
        let input = vec![3u32, 1, 2];
        let expect = vec![1u32, 2, 3];
        assert!(check(&input, &expect, &[1, 2, 3], Some(&[1, 2, 0])).is_ok());
        assert!(check(&input, &expect, &[1, 3, 2], None).is_err());
        assert!(check(&input, &expect, &[1, 2, 3], Some(&[1, 1, 0])).is_err());
        assert!(check(&input, &expect, &[1, 2, 3], Some(&[2, 1, 0])).is_err());
        assert!(check(&input, &expect, &[1, 2, 3], Some(&[1, 2, 7])).is_err());
    }
}
