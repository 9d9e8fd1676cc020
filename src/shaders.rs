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

/// The SPIR-V of a kernel for a payload; `gpu_count` picks the variant that reads the element
/// count from binding 2.
pub fn spirv(kind: PassKind, payload: Payload, gpu_count: bool) -> &'static [u32] {
    match (kind, payload, gpu_count) {
        (PassKind::TileSort, Payload::Keys, false) => TILE_SORT_KEYS,
        (PassKind::TileSort, Payload::Pairs, false) => TILE_SORT_PAIRS,
        (PassKind::GlobalMerge, Payload::Keys, false) => GLOBAL_MERGE_KEYS,
        (PassKind::GlobalMerge, Payload::Pairs, false) => GLOBAL_MERGE_PAIRS,
        (PassKind::LocalMerge, Payload::Keys, false) => LOCAL_MERGE_KEYS,
        (PassKind::LocalMerge, Payload::Pairs, false) => LOCAL_MERGE_PAIRS,
        (PassKind::TileSort, Payload::Keys, true) => TILE_SORT_KEYS_COUNT,
        (PassKind::TileSort, Payload::Pairs, true) => TILE_SORT_PAIRS_COUNT,
        (PassKind::GlobalMerge, Payload::Keys, true) => GLOBAL_MERGE_KEYS_COUNT,
        (PassKind::GlobalMerge, Payload::Pairs, true) => GLOBAL_MERGE_PAIRS_COUNT,
        (PassKind::LocalMerge, Payload::Keys, true) => LOCAL_MERGE_KEYS_COUNT,
        (PassKind::LocalMerge, Payload::Pairs, true) => LOCAL_MERGE_PAIRS_COUNT,
    }
}
