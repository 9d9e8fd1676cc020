//! `BvkTuning`: `Tuning`'s knobs as C fields, zero for each default. The library checks their
//! ranges (`BVK_ERROR_INVALID_OPTION` naming the knob); this file only maps the encoding.

use bvk::{KernelFamily, Tuning};

use crate::status::{Fail, BVK_KNOB_AUTO, BVK_KNOB_OFF, BVK_KNOB_ON};

/// `BvkTuning::merge_workgroups`: one tile per workgroup always, never looping over tiles.
pub const BVK_ONE_TILE_PER_WORKGROUP: u32 = u32::MAX;

/// `BvkTuning::kernels`: the build a CPU device takes by default, one network per chunk in rolled
/// loops.
pub const BVK_KERNELS_COMPACT: u32 = 1;
/// `BvkTuning::kernels`: the build a GPU takes by default, every chunk size inlined.
pub const BVK_KERNELS_UNROLLED: u32 = 2;

/// The knobs of the sort (README, "The command-line tool", names each); zero takes each default,
/// which is where it measured fastest. The recorder's and the sorter's descs carry one.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BvkTuning {
    /// Caps the elements per tile of the local kernels (a power of two, at least 2).
    pub max_tile: u32,
    /// Caps the substages fused in registers per global pass and per local chunk (1 to 6).
    pub max_fused_substages: u32,
    /// Invocations per workgroup of the local kernels (a power of two).
    pub local_workgroup_size: u32,
    /// Invocations per workgroup of the global merge (a power of two).
    pub global_workgroup_size: u32,
    /// Substages per shared-memory chunk of the local kernels (1 to 5).
    pub local_chunk_substages: u32,
    /// The most workgroups of the passes that loop over tiles (by default the device's
    /// multiprocessors where it reports them); `BVK_ONE_TILE_PER_WORKGROUP`: none loops.
    pub merge_workgroups: u32,
    /// Every pass after the tile sort a segment pass: `BVK_KNOB_AUTO` (0), `_OFF` or `_ON`.
    pub segment_merges: u32,
    /// Elements of the low run a segment pass carries (a power of two, at least 2).
    pub segment_run: u32,
    /// The long carried run (a power of two, at least `segment_run`).
    pub segment_run_long: u32,
    /// Segment passes on pipelines made for their shape: `BVK_KNOB_AUTO` (0), `_OFF` or `_ON`.
    pub shaped_segments: u32,
    /// Tiles of u32 pairs holding 16-bit origins (needs `shaderInt16`): `BVK_KNOB_AUTO` (0),
    /// `_OFF` or `_ON`.
    pub tile_origins: u32,
    /// The build of the local and global kernels: 0 for the device's default,
    /// `BVK_KERNELS_COMPACT` or `BVK_KERNELS_UNROLLED`.
    pub kernels: u32,
}

/// The library's tuning for the caller's knobs.
pub(crate) fn tuning(t: &BvkTuning, what: &str) -> Result<Tuning, Fail> {
    let number = |v: u32| (v != 0).then_some(v);
    let switch = |v: u32, knob: &str| match v {
        BVK_KNOB_AUTO => Ok(None),
        BVK_KNOB_OFF => Ok(Some(false)),
        BVK_KNOB_ON => Ok(Some(true)),
        _ => Err(Fail::bad_enum(&format!("{what}.{knob}"), v, "BVK_KNOB_AUTO, _OFF or _ON (0 to 2)")),
    };
    let mut tuning = Tuning::default();
    tuning.max_tile = number(t.max_tile);
    tuning.max_fused_substages = number(t.max_fused_substages);
    tuning.local_workgroup_size = number(t.local_workgroup_size);
    tuning.global_workgroup_size = number(t.global_workgroup_size);
    tuning.local_chunk_substages = number(t.local_chunk_substages);
    tuning.merge_workgroups = match t.merge_workgroups {
        BVK_ONE_TILE_PER_WORKGROUP => Some(0),
        v => number(v),
    };
    tuning.segment_merges = switch(t.segment_merges, "segment_merges")?;
    tuning.segment_run = number(t.segment_run);
    tuning.segment_run_long = number(t.segment_run_long);
    tuning.shaped_segments = switch(t.shaped_segments, "shaped_segments")?;
    tuning.tile_origins = switch(t.tile_origins, "tile_origins")?;
    tuning.kernels = match t.kernels {
        0 => None,
        BVK_KERNELS_COMPACT => Some(KernelFamily::Compact),
        BVK_KERNELS_UNROLLED => Some(KernelFamily::Unrolled),
        v => {
            return Err(Fail::bad_enum(
                &format!("{what}.kernels"),
                v,
                "0, BVK_KERNELS_COMPACT or BVK_KERNELS_UNROLLED (0 to 2)",
            ))
        }
    };
    Ok(tuning)
}
