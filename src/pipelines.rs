//! Layouts and compute pipelines of the four kernels, specialised for a device's limits. Each
//! object destroys what it created and nothing else.

use std::collections::hash_map::{Entry, HashMap};

use ash::vk;

use crate::context::DeviceLimits;
use crate::error::{Error, Result};
use crate::plan::{Geometry, Pass, PassKind, Segment, MAX_CHUNK, MAX_FUSED, MAX_FUSED_NARROW};
use crate::push::PushConstants;
use crate::shaders::{
    spirv, spirv_persistent, spirv_shaped, spirv_shaped_chain, spirv_small, spirv_small_two_slots, tile_element_bytes,
    Build, KeyWidth, Payload, Variant,
};

pub use crate::plan::MAX_TILE;

/// Invocations per workgroup of global_merge, before the device's limits.
const GLOBAL_WG: u32 = 256;
/// Most invocations per workgroup of the local kernels by default, before the device's limits;
/// the default is a quarter of the tile ([`LOCAL_WG_DIVISOR`]) up to this.
/// With 4-byte keys, 512: once the local kernels loaded and stored full tiles in unrolled
/// batches, 512 invocations beat 1024 on the H100 by 5 to 11 % at 2^20 and 2^24 keys and pairs
/// and at 2^22 keys; 2^16 keys and 2^22 pairs (a size whose times are bimodal) read 2 % slower
/// (`bench --local-wg 512`, two runs each). With 8-byte keys, 1024: their local kernels took 80
/// to 119 registers at 512 invocations (`examples/kernel_stats.rs`), so one workgroup of 512
/// would fill a multiprocessor; 512 is not measured for them.
fn local_wg_max(width: KeyWidth) -> u32 {
    match width {
        KeyWidth::Bits32 => 512,
        KeyWidth::Bits64 => 1024,
    }
}

/// The default local workgroup is the tile over this: a quarter of the tile. Tiles of at most 1024
/// elements (the tile of every sort of up to 1024) took half once, when a sort of 2^10 u32 on the
/// H100 took 12.4 us with 512 invocations against 14.1 us with 256; with the kernels of chunks of
/// three, 256 took 2^10 keys from 8.35 to 8.2 us and pairs from 10.3 to 9.95 us, and tied at 2^9
/// (`bench --sizes 2^9,2^10 --payload keys,pairs --reps 20 --warmup 5 [--local-wg 256]`, two
/// processes each, alternating; 128 and 64 lost).
const LOCAL_WG_DIVISOR: u32 = 4;

fn prev_power_of_two(x: u32) -> u32 {
    if x == 0 {
        0
    } else {
        1 << (31 - x.leading_zeros())
    }
}

/// Substages per shared-memory chunk of the local kernels: up to [`MAX_CHUNK`] (groups of 32
/// elements) for 4-byte keys alone in tiles of 8192 or more, else up to 4, and never more than
/// `geometry.fused`. On the H100 (`bench`, two runs each against chunks of 4, local workgroups of
/// 512): 2^20 keys 0.123 -> 0.115 ms and 2^24 keys 2.350 -> 2.175 ms, the tile sort 349 -> 302 us
/// and each local merge 99 -> 88 us at 2^24; but 2^20 pairs 0.204 -> 0.214 ms, 2^24 pairs 4.56 ->
/// 4.69 ms, and 2^10 keys (a tile of 1024) 12.9 -> 15.5 us; 2^16 keys (tiles of 2048) even.
/// 32 slots took the keys' tile sort to 101 registers (67 with 16). `requested` (validated by
/// [`geometry_for`]) replaces the default; the sorter and the recorder ask for 3 in sorts of up
/// to 2^15 elements.
pub fn local_chunk(payload: Payload, width: KeyWidth, geometry: &Geometry, requested: Option<u32>) -> u32 {
    if let Some(chunk) = requested {
        return chunk;
    }
    let wide = payload == Payload::Keys && width == KeyWidth::Bits32 && geometry.tile() >= 8192;
    geometry.fused.min(if wide { MAX_CHUNK } else { 4 })
}

/// Substages fused per global pass by default: [`MAX_FUSED`] (6, groups of 64 elements) for 4-byte
/// keys alone, [`MAX_FUSED_NARROW`] (5) otherwise (64 keys and 64 values, or 64 8-byte keys,
/// would not fit in the registers).
pub fn default_fused(payload: Payload, width: KeyWidth) -> u32 {
    if payload == Payload::Keys && width == KeyWidth::Bits32 {
        MAX_FUSED
    } else {
        MAX_FUSED_NARROW
    }
}

/// Choices that shape the kernels, from [`crate::SorterDesc`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelOptions {
    /// Caps the elements per tile (a power of two, at least 2).
    pub max_tile: Option<u32>,
    /// Caps the substages fused per global pass (1..=6, default [`default_fused`]) and per local
    /// chunk (see [`local_chunk`]).
    pub max_fused: Option<u32>,
    /// Invocations per workgroup of the local kernels instead of the default (a quarter of the
    /// tile, at most 512 with 4-byte keys and 1024 with 8-byte keys); a power of two, capped by
    /// the device.
    pub local_workgroup_size: Option<u32>,
    /// Substages per shared-memory chunk of the local kernels (1..=5) instead of [`local_chunk`]'s
    /// default, whatever `max_fused` says. A tuning knob for `bench`.
    pub local_chunk: Option<u32>,
}

/// The tile and workgroup sizes for a payload and key width on a device: the largest
/// power-of-two tile whose keys (and values) fit in maxComputeSharedMemorySize, capped by
/// [`MAX_TILE`] and the options. Returns the geometry and the local kernels' workgroup size.
pub fn geometry_for(
    limits: &DeviceLimits,
    payload: Payload,
    width: KeyWidth,
    options: KernelOptions,
) -> Result<(Geometry, u32)> {
    let bytes_per_element = tile_element_bytes(payload, width);
    let mut tile = prev_power_of_two(limits.max_compute_shared_memory_size / bytes_per_element).min(MAX_TILE);
    if let Some(cap) = options.max_tile {
        if cap < 2 || !cap.is_power_of_two() {
            return Err(Error::InvalidOption {
                name: "max_tile",
                value: cap.to_string(),
                reason: "must be a power of two of at least 2",
            });
        }
        tile = tile.min(cap);
    }
    let fused = match options.max_fused {
        Some(f) if !(1..=MAX_FUSED).contains(&f) => {
            return Err(Error::InvalidOption { name: "max_fused", value: f.to_string(), reason: "must be 1 to 6" })
        }
        Some(f) => f,
        None => default_fused(payload, width),
    };
    if let Some(chunk) = options.local_chunk {
        if !(1..=MAX_CHUNK).contains(&chunk) {
            return Err(Error::InvalidOption {
                name: "local_chunk",
                value: chunk.to_string(),
                reason: "must be 1 to 5",
            });
        }
    }
    let invocations =
        prev_power_of_two(limits.max_compute_work_group_invocations.min(limits.max_compute_work_group_size_x));
    if tile < 2 || invocations == 0 {
        return Err(Error::InvalidOption {
            name: "device limits",
            value: format!(
                "maxComputeSharedMemorySize {} / maxComputeWorkGroupInvocations {}",
                limits.max_compute_shared_memory_size, limits.max_compute_work_group_invocations
            ),
            reason: "too small for a tile of two elements",
        });
    }
    // By default a quarter of the tile (LOCAL_WG_DIVISOR).
    let local_wg = match options.local_workgroup_size {
        Some(wg) if wg == 0 || !wg.is_power_of_two() => {
            return Err(Error::InvalidOption {
                name: "local_workgroup_size",
                value: wg.to_string(),
                reason: "must be a power of two",
            })
        }
        Some(wg) => wg.min(invocations),
        None => (tile / LOCAL_WG_DIVISOR).clamp(1, local_wg_max(width)).min(invocations),
    };
    // With origins each invocation holds the values of its elements of a tile in registers, at
    // most ORIGINS_SLOTS of them (glsl/local.glsl, r_held).
    let local_wg = if payload == Payload::PairsOrigins { local_wg.max(tile / ORIGINS_SLOTS) } else { local_wg };
    if payload == Payload::PairsOrigins && (local_wg > invocations || tile > 1 << 16) {
        return Err(Error::InvalidOption {
            name: "tile_origins",
            value: format!("tiles of {tile} on at most {invocations} invocations"),
            reason: "each invocation holds at most 16 values of a tile of at most 65536: take a smaller tile",
        });
    }
    let geometry = Geometry { tile_log2: tile.trailing_zeros(), global_wg: GLOBAL_WG.min(invocations), fused };
    Ok((geometry, local_wg))
}

/// The most elements of a tile one invocation of an origins build holds the values of
/// (`LOAD_SLOTS` in glsl/local.glsl).
const ORIGINS_SLOTS: u32 = 16;

/// The descriptor set layout (binding 0: keys, binding 1: values, binding 2: the GPU-side count,
/// all storage buffers) and the pipeline layout with the push-constant range, shared by every
/// kernel. Bindings a sort does not use point at the keys, so that every descriptor is valid.
pub(crate) struct Layouts {
    device: ash::Device,
    pub set_layout: vk::DescriptorSetLayout,
    pub pipeline_layout: vk::PipelineLayout,
}

impl Layouts {
    pub fn new(device: &ash::Device) -> Result<Layouts> {
        let mut layouts = Layouts {
            device: device.clone(),
            set_layout: vk::DescriptorSetLayout::null(),
            pipeline_layout: vk::PipelineLayout::null(),
        };
        let bindings = [0, 1, 2].map(|binding| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        });
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: `device` is a live device and `info` is fully initialised.
        layouts.set_layout = unsafe { device.create_descriptor_set_layout(&info, None) }
            .map_err(Error::vk("vkCreateDescriptorSetLayout"))?;
        let ranges = [vk::PushConstantRange {
            stage_flags: vk::ShaderStageFlags::COMPUTE,
            offset: 0,
            size: std::mem::size_of::<PushConstants>() as u32,
        }];
        let set_layouts = [layouts.set_layout];
        let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&ranges);
        // SAFETY: the set layout was just created on `device`; 24 bytes is within the 128-byte
        // minimum of maxPushConstantsSize.
        layouts.pipeline_layout =
            unsafe { device.create_pipeline_layout(&info, None) }.map_err(Error::vk("vkCreatePipelineLayout"))?;
        Ok(layouts)
    }
}

impl Drop for Layouts {
    fn drop(&mut self) {
        // SAFETY: both were created on `device` by `new` (or are null, which destroy ignores), and
        // the pipelines and descriptor sets that use them are destroyed first by their owners.
        unsafe {
            self.device.destroy_pipeline_layout(self.pipeline_layout, None);
            self.device.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// The largest tile the tile sort's SMALL build takes ([`small_tile_sort`]): tiles of up to 1024
/// always, of 2048 in kernels of chunks of 3 (small sorts, and keys in segment tiles of 2048).
/// `small_sort` in glsl/tile_sort.comp unrolls its stages up to this tile (`SMALL_MAX_LOG`, its
/// log2), so the two change together.
pub const SMALL_MAX_TILE: u32 = 2048;
/// Elements per invocation of the tile sort's SMALL build for keys alone in tiles of 2048
/// (`SMALL_SLOTS` in glsl/tile_sort.comp; smaller tiles take two, [`small_slots`]), and the share
/// of the tile the local kernels' workgroup must be for the SMALL build to be taken
/// ([`small_tile_sort`]).
pub const SMALL_SLOTS: u32 = 4;
/// Elements per invocation of the tile sort's SMALL build for pairs: their tile of 1024 runs on
/// 512 invocations. On the H100 (two processes of each build alternating,
/// `docs/figures/h100-ab-small-pairs-2-slots.txt`) that took 2^10 u32 pairs from 9.0 / 9.1 to
/// 7.1 / 7.2 us, 1000 pairs from 8.9 / 9.0 to 7.2 / 7.2, 256 from 6.4 / 6.3 to 5.3 / 5.4, and tied
/// in tiles of 2048 (2^11 11.6 / 11.7 -> 11.6 / 11.4 us). Four slots cost pairs twice the
/// shuffles of keys; eight lost (2^10 pairs 16.1 us, `h100-ab-small-pairs-8-slots.txt`).
pub const SMALL_PAIR_SLOTS: u32 = 2;

/// The largest tile whose SMALL build runs keys on two elements per invocation (the
/// `SMALL_TWO_SLOTS` build of glsl/tile_sort.comp), as pairs' always does; tiles of 2048 keep
/// [`SMALL_SLOTS`]. On the H100 (two processes of each build alternating,
/// `docs/figures/h100-ab-small-keys-two-slots-tiles-1024.txt`) two slots took 2^10 u32 keys from
/// 6.3 / 6.2 to 5.3 / 5.4 us, 1000 keys from 6.2 / 6.2 to 5.6 / 5.4, 256 from 4.8 / 4.8 to 4.4 /
/// 4.5 and 64 from 4.1 / 4.3 to 3.7 / 3.7; in tiles of 2048 they lost in an earlier build (2^11
/// keys 7.2 / 7.3 -> 7.7 / 7.7 us, 2^13 20.8 / 20.7 -> 21.2 / 21.0,
/// `docs/figures/h100-ab-small-keys-2-slots.txt`).
pub const SMALL_TWO_SLOT_MAX_TILE: u32 = 1024;

/// Elements per invocation of the SMALL build of `payload` on a tile of `tile` elements (its
/// workgroup: the tile over this).
pub fn small_slots(payload: Payload, tile: u32) -> u32 {
    match payload {
        Payload::Keys if tile <= SMALL_TWO_SLOT_MAX_TILE => 2,
        Payload::Keys => SMALL_SLOTS,
        Payload::Pairs | Payload::PairsOrigins => SMALL_PAIR_SLOTS,
    }
}

/// Invocations per workgroup of the SMALL build of `payload` on a tile of `tile` elements.
fn small_workgroup(payload: Payload, tile: u32) -> u32 {
    tile / small_slots(payload, tile)
}

/// The module of the tile sort's SMALL build for a tile of `tile` elements: the one built for
/// its [`small_slots`]. None where there is none (8-byte keys).
pub fn small_module(payload: Payload, width: KeyWidth, variant: Variant, tile: u32) -> Option<&'static [u32]> {
    match (payload, small_slots(payload, tile)) {
        (Payload::Keys, 2) => spirv_small_two_slots(PassKind::TileSort, payload, width, variant),
        _ => spirv_small(PassKind::TileSort, payload, width, variant),
    }
}

/// Tiles above 1024 take the SMALL build only in kernels whose local chunks run at most this many
/// substages: the kernels of small sorts (`sorter::chunk_for`, sorts of up to 2^15 elements) and
/// of 4-byte keys alone in segment tiles of 2048 (`sorter::segment_chunk_for`).
pub const SMALL_WIDE_MAX_CHUNK: u32 = 3;

/// Whether the plain tile sort's pipeline is the SMALL build of glsl/tile_sort.comp: each
/// invocation holds [`small_slots`] elements of the tile in registers (two; keys in tiles of 2048
/// four), and the substages whose partners lie in another invocation of its subgroup run with
/// subgroup shuffles. For 4-byte keys (with or without values) where the local kernels take a quarter of
/// the tile's invocations (`local_wg`, the default) and the SMALL build's own workgroup (the tile
/// over its slots) fits the device's limits, on devices with subgroup
/// shuffles in compute shaders, in tiles of at most 1024 (the default for the tile of 1024, that
/// of every sort of up to 1024 elements) and in tiles of 2048 where the local chunks (`chunk`) run
/// at most [`SMALL_WIDE_MAX_CHUNK`] substages (by default, the tiles of sorts of 1025 to 2^15
/// elements and of 4-byte keys alone in segment tiles of 2048; a `local_chunk` of 3 or less
/// asked for at any size takes it too).
///
/// On the H100 (two processes of each build alternating, twice; docs/PERFORMANCE.md) 2^10 u32
/// keys took 6.7 to 6.9 us instead of 8.2 to 8.3, pairs 9.1 to 9.2 instead of 9.9 to 10.0, 1000
/// keys 6.7 to 6.9 instead of 8.9 to 9.0; 8-byte keys lost (u64 keys 14.6 us in a check run
/// against 11.1), and 8 elements per invocation lost too (2^10 keys 8.4 us, pairs 11.2). In tiles
/// of 2048 (`docs/figures/h100-ab-small-tile-sort-2048.txt`, two processes of each build
/// alternating) it took u32 keys at 2^11 from 10.5 / 10.7 to 9.3 / 9.3 us, 1500 keys from 10.7 /
/// 10.6 to 9.0 / 8.9, 2^12 17.4 / 17.3 -> 16.3 / 16.0, 2^13 23.1 / 23.3 -> 21.8 / 22.1, and with
/// the small sorts' chunks of 3 carried up to 2^14, 2^14 28.0 / 27.9 -> 26.5 / 26.3; pairs gained
/// at 1500 (14.2 / 14.4 -> 12.9 / 12.9 us), 12000 and 2^14 (34.7 / 34.8 -> 33.3 / 33.5) and read
/// within 1 % elsewhere. In the tiles of 2048 of larger sorts it did not pay (a build that took it
/// there: 2^16 keys 38.7 / 38.8 -> 39.3 / 38.9 us, pairs 45.3 / 46.0 -> 47.1 / 47.6; 2^18 pairs
/// 66.8 / 67.7 -> 69.9 / 69.7). With chunks of 3 up to 2^15 (`h100-chunk-3-small-to-2e15.txt`)
/// it took 20000 keys from 38.4 / 39.0 to 35.6 / 36.0 us and 2^15 keys from 37.5 / 37.8 to 35.5 /
/// 35.9; at 40000 and 2^16 chunks of 3 with it lost (2^16 pairs 45.0 / 45.8 -> 48.4 / 48.4 us).
///
/// Its loops over stages and substages are unrolled (`small_sort`): on the H100 that took 2^10
/// keys from 6.8 to 6.0 us, pairs from 9.2 to 8.7, 2^11 keys from 9.3 to 7.4 and 2^15 keys from
/// 35.7 / 36.1 to 34.2 / 33.6 (`docs/figures/h100-ab-small-unroll-barriers.txt`).
pub fn small_tile_sort(
    limits: &DeviceLimits,
    payload: Payload,
    width: KeyWidth,
    tile: u32,
    local_wg: u32,
    chunk: u32,
) -> bool {
    let size = tile <= 1024 || (tile <= SMALL_MAX_TILE && chunk <= SMALL_WIDE_MAX_CHUNK);
    // A tile smaller than its slots would make an empty workgroup.
    let invocations = small_workgroup(payload, tile);
    let fits = invocations >= 1
        && invocations <= limits.max_compute_work_group_invocations
        && invocations <= limits.max_compute_work_group_size_x;
    limits.subgroup_shuffle && width == KeyWidth::Bits32 && size && tile == SMALL_SLOTS * local_wg && fits
}

/// The most chunks of a segment pass that the SHAPED build of segment_merge takes
/// (specialization constants 6 to 13: `SHAPE_CHUNK0` to `SHAPE_CHUNK7`).
pub const SHAPED_MAX_CHUNKS: usize = 8;

/// The chain codes ([`crate::plan::SegmentChunk::chain_code`]) of a segment pass's chunks, for the chain
/// builds of segment_merge (`spirv_shaped_chain`); `fused` is the local chunk.
pub fn shape_chain(fused: u32, dir: u32, log_block: u32) -> Vec<u32> {
    let push = PushConstants { dir, log_block, ..PushConstants::default() };
    Segment::decode(&push).chunks(fused).iter().map(|c| c.chain_code(fused)).collect()
}

/// The specialization constants of the SHAPED build of segment_merge for the segment pass of push
/// constants `dir` and `log_block`, with `local` = the local kernels' workgroup size, tile and
/// chunk: those of the plain build, then the shape and its chunks ([`Segment::chunks`]); None
/// for a shape of more than [`SHAPED_MAX_CHUNKS`] chunks.
pub fn shaped_constants(local: [u32; 3], dir: u32, log_block: u32) -> Option<Vec<u32>> {
    let push = PushConstants { dir, log_block, ..PushConstants::default() };
    let chunks = Segment::decode(&push).chunks(local[2]);
    if chunks.len() > SHAPED_MAX_CHUNKS {
        return None;
    }
    let mut data = vec![local[0], local[1], local[2], 0, log_block, dir];
    data.extend(chunks.iter().map(|c| c.encode()));
    data.resize(6 + SHAPED_MAX_CHUNKS, 0);
    Some(data)
}

/// The compute pipelines of one payload: the two local kernels, and global_merge once per number
/// of fused substages (1..=geometry.fused); segment_merge, and the tile sort and segment_merge
/// whose workgroups loop over tiles or cosets, once a binding needs them
/// ([`Kernels::make_segment_merge`], [`Kernels::make_persistent`]).
pub(crate) struct Kernels {
    device: ash::Device,
    tile_sort: vk::Pipeline,
    /// The PERSISTENT build of tile_sort, null until made.
    tile_sort_persistent: vk::Pipeline,
    local_merge: vk::Pipeline,
    /// segment_merge, null until made.
    segment_merge: vk::Pipeline,
    /// The PERSISTENT build of segment_merge, null until made.
    segment_merge_persistent: vk::Pipeline,
    /// The SHAPED build of segment_merge, one pipeline per shape (the pass's push constants `dir`
    /// and `log_block`), made by [`Kernels::make_shaped`].
    segment_shaped: HashMap<(u32, u32), vk::Pipeline>,
    /// local_merge specialised for windows of two and of four tiles (`WINDOW` = 1, 2).
    local_merge_window: [vk::Pipeline; 2],
    global_merge: [vk::Pipeline; MAX_FUSED as usize],
    pub geometry: Geometry,
    /// Invocations per workgroup of the local kernels.
    pub local_wg: u32,
    /// Substages per shared-memory chunk of the local kernels ([`local_chunk`]).
    pub chunk: u32,
    /// Their build: payload, key width and variant.
    pub build: Build,
}

impl Kernels {
    pub fn new(
        device: &ash::Device,
        layouts: &Layouts,
        limits: &DeviceLimits,
        build: Build,
        options: KernelOptions,
        cache: vk::PipelineCache,
    ) -> Result<Kernels> {
        let Build { payload, width, variant } = build;
        let (geometry, local_wg) = geometry_for(limits, payload, width, options)?;
        let chunk = local_chunk(payload, width, &geometry, options.local_chunk);
        let mut kernels = Kernels {
            device: device.clone(),
            tile_sort: vk::Pipeline::null(),
            tile_sort_persistent: vk::Pipeline::null(),
            local_merge: vk::Pipeline::null(),
            segment_merge: vk::Pipeline::null(),
            segment_merge_persistent: vk::Pipeline::null(),
            segment_shaped: HashMap::new(),
            local_merge_window: [vk::Pipeline::null(); 2],
            global_merge: [vk::Pipeline::null(); MAX_FUSED as usize],
            geometry,
            local_wg,
            chunk,
            build,
        };
        let layout = layouts.pipeline_layout;
        // Specialization constants: 0 = WG_SIZE, 1 = TILE, 2 = FUSED (substages per group: at most
        // per chunk in the local kernels, exactly per pass in global_merge), 3 = WINDOW
        // (local_merge only: windows of 2^WINDOW tiles).
        let local = [local_wg, geometry.tile(), chunk, 0];
        // The SMALL build runs the tile on its own number of invocations.
        let (tile_sort, tile_sort_local) = match small_module(payload, width, variant, geometry.tile()) {
            Some(small) if small_tile_sort(limits, payload, width, geometry.tile(), local_wg, chunk) => {
                (small, [small_workgroup(payload, geometry.tile()), geometry.tile(), chunk, 0])
            }
            _ => (spirv(PassKind::TileSort, payload, width, variant), local),
        };
        kernels.tile_sort = create_pipeline(device, layout, cache, tile_sort, &tile_sort_local)?;
        let merge = spirv(PassKind::LocalMerge, payload, width, variant);
        kernels.local_merge = create_pipeline(device, layout, cache, merge, &local)?;
        for w in 1..=2 {
            let window = [local[0], local[1], local[2], w];
            kernels.local_merge_window[w as usize - 1] = create_pipeline(device, layout, cache, merge, &window)?;
        }
        for m in 1..=geometry.fused {
            let global = [geometry.global_wg, geometry.tile(), m, 0];
            kernels.global_merge[m as usize - 1] =
                create_pipeline(device, layout, cache, spirv(PassKind::GlobalMerge, payload, width, variant), &global)?;
        }
        Ok(kernels)
    }

    /// Makes the build of `kind` (the tile sort or segment_merge) whose workgroups loop over tiles
    /// or cosets, for plans whose pass of that kind has fewer workgroups than tiles
    /// (`Plan::persistent_merges`), unless it is made already; other kinds have no such build.
    /// Sorts that never loop do not pay for its compilation.
    pub fn make_persistent(&mut self, kind: PassKind, layouts: &Layouts, cache: vk::PipelineCache) -> Result<()> {
        let Build { payload, width, variant } = self.build;
        let local = [self.local_wg, self.geometry.tile(), self.chunk, 0];
        let slot = match kind {
            PassKind::TileSort => &mut self.tile_sort_persistent,
            PassKind::SegmentMerge => &mut self.segment_merge_persistent,
            PassKind::GlobalMerge | PassKind::LocalMerge => return Ok(()),
        };
        if *slot == vk::Pipeline::null() {
            if let Some(code) = spirv_persistent(kind, payload, width, variant) {
                *slot = create_pipeline(&self.device, layouts.pipeline_layout, cache, code, &local)?;
            }
        }
        Ok(())
    }

    /// Makes segment_merge, for segmented plans (`Plan::segmented`), unless it is made already.
    pub fn make_segment_merge(&mut self, layouts: &Layouts, cache: vk::PipelineCache) -> Result<()> {
        if self.segment_merge == vk::Pipeline::null() {
            let Build { payload, width, variant } = self.build;
            let local = [self.local_wg, self.geometry.tile(), self.chunk, 0];
            let code = spirv(PassKind::SegmentMerge, payload, width, variant);
            self.segment_merge = create_pipeline(&self.device, layouts.pipeline_layout, cache, code, &local)?;
        }
        Ok(())
    }

    /// Makes a SHAPED pipeline of segment_merge for every shape (`dir`, `log_block`) not made yet:
    /// on the module built for the shape's chain of chunks where there is one (build.rs's
    /// `SHAPED_CHAIN_BUILDS`: optimised by spirv-opt), else, with `every`, on the SHAPED build of every
    /// chain (unoptimised), else none. A segment pass of one coset per workgroup whose shape has
    /// a pipeline runs it ([`Kernels::pass_pipeline`]); the others run the plain build, which
    /// reads the shape from the push constants.
    pub fn make_shaped(
        &mut self,
        shapes: impl IntoIterator<Item = (u32, u32)>,
        every: bool,
        layouts: &Layouts,
        cache: vk::PipelineCache,
    ) -> Result<()> {
        let Build { payload, width, variant } = self.build;
        let Some(any_chain) = spirv_shaped(PassKind::SegmentMerge, payload, width, variant) else {
            return Ok(());
        };
        let local = [self.local_wg, self.geometry.tile(), self.chunk];
        for (dir, log_block) in shapes {
            if let Entry::Vacant(slot) = self.segment_shaped.entry((dir, log_block)) {
                // A shape of more chunks runs on the plain build.
                let Some(data) = shaped_constants(local, dir, log_block) else { continue };
                let chain = shape_chain(local[2], dir, log_block);
                let code = match spirv_shaped_chain(PassKind::SegmentMerge, payload, width, variant, &chain) {
                    Some(code) => code,
                    None if every => any_chain,
                    None => continue,
                };
                slot.insert(create_pipeline(&self.device, layouts.pipeline_layout, cache, code, &data)?);
            }
        }
        Ok(())
    }

    /// The pipeline a pass runs: for a segment pass of one coset per workgroup, its shape's SHAPED
    /// pipeline where one is made, else [`Kernels::pipeline`].
    pub fn pass_pipeline(&self, pass: &Pass) -> vk::Pipeline {
        if pass.kind == PassKind::SegmentMerge && pass.substages == 0 {
            if let Some(p) = self.segment_shaped.get(&(pass.push.dir, pass.push.log_block)) {
                return *p;
            }
        }
        self.pipeline(pass.kind, pass.substages)
    }

    /// The pipeline of a kernel; for `GlobalMerge`, the one fusing `substages`; for `LocalMerge`
    /// with `substages` w = 1 or 2, the one taking windows of 2^w tiles; for `TileSort` and
    /// `SegmentMerge` with `substages` 1, the one whose workgroups loop over tiles or cosets (made
    /// by [`Kernels::make_persistent`]).
    pub fn pipeline(&self, kind: PassKind, substages: u32) -> vk::Pipeline {
        match kind {
            PassKind::TileSort if substages > 0 => {
                debug_assert!(self.tile_sort_persistent != vk::Pipeline::null(), "persistent tile_sort not made");
                self.tile_sort_persistent
            }
            PassKind::TileSort => self.tile_sort,
            PassKind::LocalMerge if substages > 0 => self.local_merge_window[(substages.min(2) - 1) as usize],
            PassKind::LocalMerge => self.local_merge,
            PassKind::GlobalMerge => self.global_merge[(substages.clamp(1, MAX_FUSED) - 1) as usize],
            PassKind::SegmentMerge if substages > 0 => {
                debug_assert!(
                    self.segment_merge_persistent != vk::Pipeline::null(),
                    "persistent segment_merge not made"
                );
                self.segment_merge_persistent
            }
            PassKind::SegmentMerge => {
                debug_assert!(self.segment_merge != vk::Pipeline::null(), "segment_merge not made");
                self.segment_merge
            }
        }
    }
}

fn create_pipeline(
    device: &ash::Device,
    layout: vk::PipelineLayout,
    cache: vk::PipelineCache,
    code: &[u32],
    data: &[u32],
) -> Result<vk::Pipeline> {
    let info = vk::ShaderModuleCreateInfo::default().code(code);
    // SAFETY: `code` is SPIR-V that build.rs compiled for Vulkan 1.1.
    let module = unsafe { device.create_shader_module(&info, None) }.map_err(Error::vk("vkCreateShaderModule"))?;
    let entries: Vec<vk::SpecializationMapEntry> = (0..data.len() as u32)
        .map(|id| vk::SpecializationMapEntry { constant_id: id, offset: id * 4, size: 4 })
        .collect();
    let specialization = vk::SpecializationInfo::default().map_entries(&entries).data(bytemuck::cast_slice(data));
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(c"main")
        .specialization_info(&specialization);
    let info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout)];
    // SAFETY: the module and layout are live objects of `device`, the cache is null or the
    // caller's live cache of `device`; the specialization data holds the u32 constants the map
    // entries describe, constant i at byte 4 i (a kernel without constant i ignores its entry).
    let result = unsafe { device.create_compute_pipelines(cache, &info, None) };
    // SAFETY: a pipeline keeps no reference to the module it was created from.
    unsafe { device.destroy_shader_module(module, None) };
    match result {
        Ok(pipelines) => Ok(pipelines[0]),
        Err((pipelines, result)) => {
            for p in pipelines {
                // SAFETY: any pipeline that was created is destroyed before it was ever used.
                unsafe { device.destroy_pipeline(p, None) };
            }
            Err(Error::vk("vkCreateComputePipelines")(result))
        }
    }
}

impl Drop for Kernels {
    fn drop(&mut self) {
        let local = [
            self.tile_sort,
            self.tile_sort_persistent,
            self.local_merge,
            self.segment_merge,
            self.segment_merge_persistent,
        ];
        let shaped = self.segment_shaped.values().copied();
        for p in local.into_iter().chain(self.local_merge_window).chain(self.global_merge).chain(shaped) {
            // SAFETY: created on `device` by `new` (or null); the owner waits for the GPU to finish
            // every command buffer that uses them before dropping.
            unsafe { self.device.destroy_pipeline(p, None) };
        }
    }
}

/// The probe kernels of the pass model: a vec4 copy (the bandwidth ceiling) and an empty dispatch
/// (the fixed cost of a pass).
pub(crate) struct Probes {
    device: ash::Device,
    pub copy: vk::Pipeline,
    pub empty: vk::Pipeline,
    /// Invocations per workgroup of `copy` (one 16-byte word each).
    pub copy_wg: u32,
}

impl Probes {
    pub fn new(device: &ash::Device, layouts: &Layouts, limits: &DeviceLimits) -> Result<Probes> {
        let copy_wg = GLOBAL_WG.min(prev_power_of_two(limits.max_compute_work_group_invocations)).max(1);
        let mut probes =
            Probes { device: device.clone(), copy: vk::Pipeline::null(), empty: vk::Pipeline::null(), copy_wg };
        probes.copy = create_pipeline(
            device,
            layouts.pipeline_layout,
            vk::PipelineCache::null(),
            crate::shaders::COPY,
            &[copy_wg, 0, 0, 0],
        )?;
        probes.empty = create_pipeline(
            device,
            layouts.pipeline_layout,
            vk::PipelineCache::null(),
            crate::shaders::EMPTY,
            &[0, 0, 0, 0],
        )?;
        Ok(probes)
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        // SAFETY: created on `device` by `new` (or null); the sorter waits for its submissions to
        // finish before dropping.
        unsafe {
            self.device.destroy_pipeline(self.copy, None);
            self.device.destroy_pipeline(self.empty, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    #[test]
    fn small_tile_sort_takes_two_slots_for_keys_up_to_tiles_of_1024() {
        for variant in [Variant::Lean, Variant::Batched, Variant::BatchedCount] {
            let four =
                spirv_small(PassKind::TileSort, Payload::Keys, KeyWidth::Bits32, variant).expect("keys' SMALL build");
            let two = spirv_small_two_slots(PassKind::TileSort, Payload::Keys, KeyWidth::Bits32, variant)
                .expect("keys' SMALL build on two slots");
            assert_ne!(four, two, "the two builds of keys' SMALL tile sort must differ");
            for tile in [2, 64, 512, 1024] {
                assert_eq!(small_slots(Payload::Keys, tile), 2);
                assert_eq!(small_module(Payload::Keys, KeyWidth::Bits32, variant, tile), Some(two));
            }
            assert_eq!(small_slots(Payload::Keys, 2048), 4);
            assert_eq!(small_module(Payload::Keys, KeyWidth::Bits32, variant, 2048), Some(four));
            // Pairs take their one SMALL build, on two slots, at every tile; 8-byte keys none.
            let pairs = spirv_small(PassKind::TileSort, Payload::Pairs, KeyWidth::Bits32, variant);
            for tile in [1024, 2048] {
                assert_eq!(small_slots(Payload::Pairs, tile), 2);
                assert_eq!(small_module(Payload::Pairs, KeyWidth::Bits32, variant, tile), pairs);
                assert_eq!(small_module(Payload::Keys, KeyWidth::Bits64, variant, tile), None);
            }
            assert_eq!(spirv_small_two_slots(PassKind::TileSort, Payload::Pairs, KeyWidth::Bits32, variant), None);
        }
    }

    #[test]
    fn chain_modules_cover_the_segment_passes_of_tiles_of_2048() {
        // Sorts in tiles of 2048, as plan::segment_tile gives them to sorts of 3 to 132 tiles on
        // the H100 (13 to 19 levels), with the local chunks they take: the standalone sorter's
        // (sorter::sized_chunk_for: 3 up to 2^15, and for keys above), else local_chunk's 4 (for
        // keys where the tile is not a segment tile), and a recorder binding's shorter sorts,
        // which keep its capacity's chunk (for keys 3 or 4, for pairs 4 where the capacity is
        // above 2^15). Every chain of 4-byte keys alone has a module on either chunk, at
        // every level; pairs' chains on chunks of 3 (up to 15 levels) have one too, and pairs on
        // chunks of 4 have none (they lost on the H100) and run the plain build.
        let geometry =
            |payload| Geometry { tile_log2: 11, global_wg: 256, fused: default_fused(payload, KeyWidth::Bits32) };
        let mut checked = 0;
        for levels in 13..=19u32 {
            // The shortest sort of `levels` levels: its plan is that of every such sort.
            let n = (1u32 << (levels - 1)) + 1;
            let standalone =
                |payload| crate::sorter::sized_chunk_for(n as usize, payload, KeyWidth::Bits32, Some(2048), None);
            for (payload, requested) in [
                (Payload::Keys, standalone(Payload::Keys)),
                (Payload::Keys, Some(3)),
                (Payload::Keys, Some(4)),
                (Payload::Pairs, standalone(Payload::Pairs)),
                (Payload::Pairs, Some(4)),
            ] {
                let geometry = geometry(payload);
                let chunk = local_chunk(payload, KeyWidth::Bits32, &geometry, requested);
                let plan = Plan::segmented(n, geometry, 0).expect("a plan");
                let passes: Vec<_> = plan.passes.iter().filter(|p| p.kind == PassKind::SegmentMerge).collect();
                assert!(passes.len() >= 2, "levels {levels}: {} segment passes", passes.len());
                for pass in passes {
                    let chain = shape_chain(chunk, pass.push.dir, pass.push.log_block);
                    for variant in [Variant::Lean, Variant::Batched, Variant::BatchedCount] {
                        let module =
                            spirv_shaped_chain(PassKind::SegmentMerge, payload, KeyWidth::Bits32, variant, &chain);
                        let wanted = chunk == 3 || payload == Payload::Keys;
                        assert_eq!(
                            module.is_some(),
                            wanted,
                            "{payload:?} {variant:?}, {levels} levels, chunk {chunk}: chain {chain:?} \
                             (build.rs SHAPED_CHAIN_BUILDS)"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked >= 400, "{checked} segment passes checked");
    }
}
