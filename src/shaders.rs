//! The SPIR-V modules compiled from `glsl/` by `build.rs`, one constant per module and payload.

use crate::plan::PassKind;

include!(concat!(env!("OUT_DIR"), "/shaders.rs"));

/// What travels with the keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Payload {
    /// Keys alone.
    Keys,
    /// Keys, and u32 values moved with them.
    Pairs,
}

/// Which build of a kernel: the standalone sorter's lean one, or an embedded one (batched, and
/// reading a GPU-side count or not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One array, n from the push constants.
    Lean,
    /// Batches (workgroup row y sorts array y), n from the push constants.
    Batched,
    /// Batches, each of min(count, n) elements, count read from binding 2.
    BatchedCount,
}

/// The SPIR-V of a kernel for a payload and variant.
pub fn spirv(kind: PassKind, payload: Payload, variant: Variant) -> &'static [u32] {
    use PassKind::{GlobalMerge, LocalMerge, TileSort};
    use Payload::{Keys, Pairs};
    use Variant::{Batched, BatchedCount, Lean};
    match (kind, payload, variant) {
        (TileSort, Keys, Lean) => TILE_SORT_KEYS,
        (TileSort, Pairs, Lean) => TILE_SORT_PAIRS,
        (GlobalMerge, Keys, Lean) => GLOBAL_MERGE_KEYS,
        (GlobalMerge, Pairs, Lean) => GLOBAL_MERGE_PAIRS,
        (LocalMerge, Keys, Lean) => LOCAL_MERGE_KEYS,
        (LocalMerge, Pairs, Lean) => LOCAL_MERGE_PAIRS,
        (TileSort, Keys, Batched) => TILE_SORT_KEYS_BATCHED,
        (TileSort, Pairs, Batched) => TILE_SORT_PAIRS_BATCHED,
        (GlobalMerge, Keys, Batched) => GLOBAL_MERGE_KEYS_BATCHED,
        (GlobalMerge, Pairs, Batched) => GLOBAL_MERGE_PAIRS_BATCHED,
        (LocalMerge, Keys, Batched) => LOCAL_MERGE_KEYS_BATCHED,
        (LocalMerge, Pairs, Batched) => LOCAL_MERGE_PAIRS_BATCHED,
        (TileSort, Keys, BatchedCount) => TILE_SORT_KEYS_BATCHED_COUNT,
        (TileSort, Pairs, BatchedCount) => TILE_SORT_PAIRS_BATCHED_COUNT,
        (GlobalMerge, Keys, BatchedCount) => GLOBAL_MERGE_KEYS_BATCHED_COUNT,
        (GlobalMerge, Pairs, BatchedCount) => GLOBAL_MERGE_PAIRS_BATCHED_COUNT,
        (LocalMerge, Keys, BatchedCount) => LOCAL_MERGE_KEYS_BATCHED_COUNT,
        (LocalMerge, Pairs, BatchedCount) => LOCAL_MERGE_PAIRS_BATCHED_COUNT,
    }
}
