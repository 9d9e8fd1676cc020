//! Test hooks (feature `test-hooks`): the internals that the integration tests, the fuzz targets
//! and `examples/kernel_stats.rs` check against. Not part of the API.

pub use crate::abi::{Form, PassKind, Payload, PushConstants, FLAG_DESCENDING, KEY_F32, KEY_I32, KEY_U32};
pub use crate::keys::{from_image, from_image64, key_flags, to_image, to_image64};
pub use crate::network::model::{Command, Recording, Step, Trace};
pub use crate::network::{direct_dispatches, dispatch_rules, pass_count, record_passes, Pass, Plan, RecordOptions};
pub use crate::segment::Segment;
pub use crate::sorter::Hooks;
pub use crate::tuning::{
    geometry, local_chunk, segment_tile, small_tile_sort, tile_for, Geometry, MAX_FUSED, MAX_TILE, SMALL_SORT,
};

pub use crate::device::DeviceProfile;

use crate::abi::KeyWidth;
use crate::error::Result;
use crate::keys::{KeyKind, Order};
use crate::{Sorter, Tuning};

/// The kernels a sort of `n` elements takes through a sorter: its payload, tile, local workgroup
/// and chunk, and whether its tile sort is the SMALL build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The payload the kernels are built for.
    pub payload: Payload,
    /// Elements per tile.
    pub tile: u32,
    /// Invocations per workgroup of the local kernels.
    pub local_wg: u32,
    /// Substages per local chunk.
    pub chunk: u32,
    /// The tile sort keeps its tile in registers and subgroup shuffles.
    pub small_tile_sort: bool,
}

/// The kernels a sort of `n` elements takes through `sorter`.
pub fn shape(sorter: &Sorter, n: usize, pairs: bool, width: KeyWidth) -> Result<Shape> {
    let s = sorter.recorder.binding_shape(pairs, width, n as u32)?;
    let limits = sorter.recorder.device_info().limits;
    let tile = s.geometry.tile();
    Ok(Shape {
        payload: s.payload,
        tile,
        local_wg: s.local_wg,
        chunk: s.chunk,
        small_tile_sort: small_tile_sort(&limits, s.payload, width, tile, s.local_wg, s.chunk),
    })
}

/// The plan a sorter records for a sort of `n` elements.
pub fn plan(sorter: &Sorter, n: usize, pairs: bool, kind: KeyKind, order: Order) -> Result<Plan> {
    sorter.plan(n, pairs, kind, order)
}

/// The most invocations per workgroup the sorter's last binding was planned for after the
/// driver refused a larger pipeline ([`crate::SortBinding::workgroup_limit`]); None where it took
/// the first plan, or before the first sort.
pub fn workgroup_limit(sorter: &Sorter) -> Option<u32> {
    sorter.binding.as_ref().and_then(crate::SortBinding::workgroup_limit)
}

/// The labels of the pipelines of the sorter's last binding created with full subgroups
/// (`REQUIRE_FULL_SUBGROUPS`).
pub fn full_subgroup_kernels(sorter: &Sorter) -> Vec<String> {
    sorter.binding.as_ref().map(|b| sorter.recorder.full_subgroup_labels(b)).unwrap_or_default()
}

/// The tuning a sorter was made with.
pub fn tuning(sorter: &Sorter) -> Tuning {
    sorter.desc.tuning
}

/// Makes the pipelines a binding of `capacity` elements of pairs (or keys) of `width` takes on
/// `device`, each created with `flags`, every build that may loop and every shape of the
/// capacity's segment plan included; calls `f` with each one's label, then destroys them.
///
/// # Safety
/// As [`crate::SortRecorder::new`]: `physical_device` belongs to `instance`, `device` was made from
/// it, and `flags` are flags the device takes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn each_kernel(
    instance: &ash::Instance,
    physical_device: ash::vk::PhysicalDevice,
    device: &ash::Device,
    tuning: Tuning,
    capacity: u32,
    pairs: bool,
    width: KeyWidth,
    flags: ash::vk::PipelineCreateFlags,
    mut f: impl FnMut(&str, &Shape, ash::vk::Pipeline),
) -> Result<()> {
    use crate::gpu::pipelines::{KernelKey, Kernels, Layouts, Slot};
    // SAFETY: forwarded from the caller.
    let info = unsafe { crate::device::describe(instance, 0, physical_device) };
    let sizing = crate::tuning::Sizing::new(tuning, info.limits, info.device_type == crate::DeviceType::Cpu, false)?;
    let payload = if pairs { sizing.pairs_payload(width, capacity, false)? } else { Payload::Keys };
    let binding = sizing.binding(payload, width, capacity, false)?;
    let key = KernelKey { shape: binding, width, batched: false, counted: false };
    let layouts = Layouts::new(device)?;
    let cache = ash::vk::PipelineCache::null();
    let creation = crate::gpu::pipelines::Creation { flags, ..Default::default() };
    let mut kernels = Kernels::new(device, &sizing, key, creation, false);
    let runs = sizing.runs(capacity, &binding.geometry, payload, width);
    let plan = Plan::segmented_with_runs(capacity, binding.geometry, 0, runs)?;
    let shaped = plan.passes.iter().filter_map(Slot::shaped);
    let mut slots = vec![
        Slot::TileSort { looping: false },
        Slot::TileSort { looping: true },
        Slot::SegmentMerge { looping: false },
        Slot::SegmentMerge { looping: true },
    ];
    slots.extend((0..=2).map(|window| Slot::LocalMerge { window }));
    slots.extend((1..=binding.geometry.fused).map(|fused| Slot::GlobalMerge { fused }));
    kernels.make(slots.into_iter().chain(shaped), &layouts, cache, &info.name)?;
    let tile = binding.geometry.tile();
    let shape = Shape {
        payload,
        tile,
        local_wg: binding.local_wg,
        chunk: binding.chunk,
        small_tile_sort: small_tile_sort(&info.limits, payload, width, tile, binding.local_wg, binding.chunk),
    };
    for (label, pipeline) in kernels.labelled() {
        f(&label, &shape, pipeline);
    }
    Ok(())
}
