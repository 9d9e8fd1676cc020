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
    /// 4-byte keys and u32 values, whose tiles hold each key's 16-bit origin in shared memory in
    /// place of its value (6 bytes an element instead of 8, so tiles twice as large), the values
    /// put in place as a tile is stored. Needs the device's `shaderInt16` feature enabled. The
    /// recorder picks it where it gives a sort a larger segment tile
    /// ([`crate::RecorderDesc::tile_origins`]).
    PairsOrigins,
}

impl Payload {
    /// Whether values move with the keys.
    pub fn has_values(self) -> bool {
        self != Payload::Keys
    }
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

/// The bytes of one element in the buffers (and in a tile but for origins: [`tile_element_bytes`]):
/// the key's, and the u32 value's with pairs.
pub fn element_bytes(payload: Payload, width: KeyWidth) -> u32 {
    let value = if payload.has_values() { 4 } else { 0 };
    width.bytes() + value
}

/// The bytes of one element in a tile in shared memory: [`element_bytes`], except that 4-byte
/// keys with origins take 2 for the origin instead of 4 for the value.
pub fn tile_element_bytes(payload: Payload, width: KeyWidth) -> u32 {
    match (payload, width) {
        (Payload::PairsOrigins, KeyWidth::Bits32) => width.bytes() + 2,
        _ => element_bytes(payload, width),
    }
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
