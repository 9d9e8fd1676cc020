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

/// The SPIR-V of a kernel for a payload.
pub fn spirv(kind: PassKind, payload: Payload) -> &'static [u32] {
    match (kind, payload) {
        (PassKind::TileSort, Payload::Keys) => TILE_SORT_KEYS,
        (PassKind::TileSort, Payload::Pairs) => TILE_SORT_PAIRS,
        (PassKind::GlobalMerge, Payload::Keys) => GLOBAL_MERGE_KEYS,
        (PassKind::GlobalMerge, Payload::Pairs) => GLOBAL_MERGE_PAIRS,
        (PassKind::LocalMerge, Payload::Keys) => LOCAL_MERGE_KEYS,
        (PassKind::LocalMerge, Payload::Pairs) => LOCAL_MERGE_PAIRS,
    }
}
