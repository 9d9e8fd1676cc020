//! The SPIR-V modules compiled from `glsl/` by `build.rs`: the probes, and [`spirv`], which picks
//! the build of a sorting kernel for a payload, key width and variant.

pub use crate::keys::KeyWidth;
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

/// What selects the SPIR-V of the sorting kernels: payload, key width and variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Build {
    /// Keys alone or pairs.
    pub payload: Payload,
    /// 4- or 8-byte keys.
    pub width: KeyWidth,
    /// Lean, batched, or batched with a GPU-side count.
    pub variant: Variant,
}

impl Build {
    /// The bytes of one element: the key's, and the value's where there is one (what
    /// [`crate::plan::segments_pay`] takes).
    pub fn element_bytes(&self) -> u32 {
        element_bytes(self.payload, self.width)
    }
}

/// The bytes of one element in the buffers and in a tile: the key's, and the u32 value's with
/// pairs.
pub fn element_bytes(payload: Payload, width: KeyWidth) -> u32 {
    let value = match payload {
        Payload::Keys => 0,
        Payload::Pairs => 4,
    };
    width.bytes() + value
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
