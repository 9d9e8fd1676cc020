//! Embedding: record a sort into the caller's command buffer, on the caller's device, over the
//! caller's buffers.
//!
//! A [`SortRecorder`] is made from the caller's `ash` instance, physical device and device (it
//! never destroys them) and an optional pipeline cache. [`SortRecorder::bind`] checks a keys
//! region (and optionally a values region) of the caller's buffers against the device's limits and
//! writes one descriptor set for it, once. [`SortRecorder::record`] then records the whole sort
//! into a command buffer the caller is recording: no device memory is allocated and no descriptor
//! is written per record, so several sorts fit in one command buffer and one frame. The passes are
//! recorded by [`crate::record::record_passes`]; the standalone [`crate::Sorter`] is built on this
//! same recorder. [`SortRecorder::record_batches`] sorts many equal-length arrays in one sequence
//! of passes (bindings made with [`BindDesc::batched`]); [`BindDesc::key_width`] picks the builds
//! for 8-byte keys; [`SortRecorder::rebind`] moves a binding to new regions.
//!
//! Stable order (equal keys keep their input order) is a matter of keys: pack each key's order
//! image with its index into a `u64` (`image << 32 | index`, as [`crate::Sorter::sort_pairs_stable`]
//! does on the host) and sort those.
//!
//! # Contract
//! - **Before** `record`: the caller's writes to the bound regions must be made available and
//!   visible to `COMPUTE_SHADER` stage `SHADER_READ | SHADER_WRITE` accesses, for example with a
//!   memory barrier from `TRANSFER`/`TRANSFER_WRITE` (a copy or fill) or
//!   `COMPUTE_SHADER`/`SHADER_WRITE` (a compute pass) to `COMPUTE_SHADER`/`SHADER_READ |
//!   SHADER_WRITE`.
//! - **After** `record`: the sort's last writes are `COMPUTE_SHADER`/`SHADER_WRITE`; the caller
//!   places a barrier from there to its consumer (`VERTEX_SHADER`/`SHADER_READ` to draw,
//!   `TRANSFER`/`TRANSFER_READ` to copy out, `DRAW_INDIRECT` ...).
//! - **State**: `record` binds compute pipelines, descriptor set 0 of the compute bind point, and
//!   sets push constants (bytes 0..24, compute stage); the caller rebinds its own compute state
//!   afterwards. Graphics state is untouched. Between passes it records
//!   `COMPUTE_SHADER/SHADER_WRITE -> COMPUTE_SHADER/SHADER_READ|SHADER_WRITE` memory barriers.
//! - **Lifetimes**: the recorder and every binding must outlive the execution of each command
//!   buffer they were recorded into; the bound buffers likewise. Drop the recorder only when the
//!   device has finished that work, and before the device is destroyed.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use ash::vk;

use crate::context::{describe, DeviceInfo, DeviceType};
use crate::error::{Error, Result};
use crate::keys::{key_flags, KeyKind, KeyWidth, Order, SortKey};
use crate::pipelines::{geometry_for, local_chunk, KernelOptions, Kernels, Layouts};
use crate::plan::{self, Geometry, PassKind, Plan, SegmentRuns};
use crate::record::{self, PassBarrier, RecordOptions, VulkanEncoder};
use crate::shaders::{Build, Payload, Variant};

/// The carried low runs asked for by `segment_run` and `segment_run_long` (elements, powers of
/// two from 2): neither leaves them to `plan::segment_runs`; `segment_run` alone is the one run
/// every carrying segment takes; `segment_run_long` lets them take it or `segment_run` (8 where
/// unset), whichever gives fewer passes, the long one where they tie.
fn segment_runs_of(run: Option<u32>, long: Option<u32>) -> Result<Option<SegmentRuns>> {
    for (name, value) in [("segment_run", run), ("segment_run_long", long)] {
        if let Some(v) = value.filter(|v| *v < 2 || !v.is_power_of_two()) {
            return Err(Error::InvalidOption {
                name,
                value: v.to_string(),
                reason: "must be a power of two, at least 2",
            });
        }
    }
    let short = run.map_or(plan::SEGMENT_MIN_RUN_LOG2, u32::trailing_zeros);
    match long {
        None => Ok(run.map(|_| SegmentRuns::fixed(short))),
        Some(long) if long.trailing_zeros() < short => Err(Error::InvalidOption {
            name: "segment_run_long",
            value: long.to_string(),
            reason: "must be at least segment_run (8 where unset)",
        }),
        Some(long) => Ok(Some(SegmentRuns { short, long: long.trailing_zeros() })),
    }
}

/// The build of the kernels a binding runs: reading a GPU-side count, batched, or the lean one.
fn variant(gpu_count: bool, batched: bool) -> Variant {
    if gpu_count {
        Variant::BatchedCount
    } else if batched {
        Variant::Batched
    } else {
        Variant::Lean
    }
}

/// A region of one of the caller's buffers. The buffer must have been created with
/// `STORAGE_BUFFER` usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferRegion {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Where the region starts, in bytes: a multiple of `minStorageBufferOffsetAlignment`.
    pub offset: vk::DeviceSize,
    /// The region's length in bytes; at least the binding's capacity times the element size.
    pub size: vk::DeviceSize,
}

/// What [`SortRecorder::bind`] binds. Start from `BindDesc::default()` and set what you use:
/// fields may be added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BindDesc {
    /// The keys: 4 bytes each, or 8 with [`KeyWidth::Bits64`].
    pub keys: BufferRegion,
    /// For key+value sorts, the values (u32, one per key); `None` sorts keys alone.
    pub values: Option<BufferRegion>,
    /// A u32 element count written on the GPU (by an emission or culling pass, say) before the
    /// sort runs; `None` takes the count given to `record`. At least 4 bytes.
    pub count: Option<BufferRegion>,
    /// The most elements any sort through this binding takes: fixed here, for the regions' sizes
    /// and the pipelines. The tiles are sized for it: unless `batched`, where segment passes may
    /// be used, a capacity that fits 3 to one tile per multiprocessor gets the smallest such tile
    /// from 2048 (`plan::segment_tile`), so that a sort of far fewer elements than the capacity
    /// may take a smaller tile than through a binding of its own size (1000 u32 keys through a
    /// binding of 2^18: one tile of 2048 instead of 1024).
    pub capacity: u32,
    /// The width of the keys sorted through this binding (`u32`/`i32`/`f32` or
    /// `u64`/`i64`/`f64`): each width has its own build of the kernels. Default 32 bits.
    pub key_width: KeyWidth,
    /// Whether sorts through this binding may be batched ([`SortRecorder::record_batches`] with
    /// more than one array). A binding that is neither batched nor reads a GPU-side count runs
    /// the lean build of the kernels, which has no batch offset (about 2 % faster on the H100).
    pub batched: bool,
}

/// How to create a [`SortRecorder`].
#[derive(Clone, Debug)]
pub struct RecorderDesc {
    /// The most bindings this recorder will make (each is one descriptor set). Default 16.
    pub max_bindings: u32,
    /// A pipeline cache of the caller's to create the pipelines through, or null.
    pub pipeline_cache: vk::PipelineCache,
    /// Caps the elements per tile (a power of two, at least 2); see [`crate::SorterDesc`].
    pub max_tile: Option<u32>,
    /// Caps the substages fused per global pass (1..=6); see [`crate::SorterDesc`].
    pub max_fused_substages: Option<u32>,
    /// Invocations per workgroup of the local kernels; see [`crate::SorterDesc`].
    pub local_workgroup_size: Option<u32>,
    /// Substages per shared-memory chunk of the local kernels; see [`crate::SorterDesc`].
    pub local_chunk_substages: Option<u32>,
    /// The most workgroups of the tile sort, of a local merge and of a segment pass; see
    /// [`crate::SorterDesc`].
    pub merge_workgroups: Option<u32>,
    /// Plans sorts in segment passes after the tile sort; see [`crate::SorterDesc`].
    pub segment_merges: Option<bool>,
    /// Elements of a segment pass's carried low run; see [`crate::SorterDesc`].
    pub segment_run: Option<u32>,
    /// Elements of the longer carried low run a segment pass may take; see [`crate::SorterDesc`].
    pub segment_run_long: Option<u32>,
    /// A pipeline per segment shape, made by [`SortRecorder::bind`] for the sorts of the
    /// binding's capacity and of every power of two from two tiles up to it; see
    /// [`crate::SorterDesc`]. By default (`None`) for the shapes whose chain of chunks has a
    /// module of its own.
    pub shaped_segments: Option<bool>,
    /// Whether `device` was created with the `shaderInt16` feature enabled, which the tiles of
    /// u32 pairs with 16-bit origins need ([`RecorderDesc::tile_origins`]). Default false: pairs
    /// then keep their values in the tile.
    pub shader_int16: bool,
    /// Tiles of u32 pairs that hold each key's 16-bit origin in shared memory in place of its
    /// value, the values put in place as a tile is stored: 6 bytes an element instead of 8, so
    /// twice as many pairs a tile (8192 in 48 KiB). `None` (the default, with
    /// [`RecorderDesc::shader_int16`]): in an unbatched binding whose capacity, and the power of
    /// two at or above it, only a tile that large cuts into 3 to one tile per multiprocessor
    /// (segment passes of one coset per workgroup: 540673 to 2^20 pairs on 132 multiprocessors);
    /// on an H200 that took 2^20 pairs from 162 to 154 us, while they lost in tiles no larger
    /// than the values allow and where the segment passes loop (docs/PERFORMANCE.md, lever
    /// table, "Pairs in tiles of 16-bit origins"). `Some(true)`: every binding of u32
    /// pairs (an error without `shader_int16`); `Some(false)`: none.
    pub tile_origins: Option<bool>,
}

impl Default for RecorderDesc {
    fn default() -> RecorderDesc {
        RecorderDesc {
            max_bindings: 16,
            pipeline_cache: vk::PipelineCache::null(),
            max_tile: None,
            max_fused_substages: None,
            local_workgroup_size: None,
            local_chunk_substages: None,
            merge_workgroups: None,
            segment_merges: None,
            segment_run: None,
            segment_run_long: None,
            shaped_segments: None,
            shader_int16: false,
            tile_origins: None,
        }
    }
}

/// A bound pair of regions, made by [`SortRecorder::bind`]: one descriptor set, written once.
#[derive(Debug)]
pub struct SortBinding {
    pub(crate) set: vk::DescriptorSet,
    capacity: u32,
    payload: Payload,
    width: KeyWidth,
    gpu_count: bool,
    batched: bool,
    /// Index of its pipelines in the recorder's `kernels` (which only grows), fixed by `bind`.
    kernels: usize,
    recorder: u64,
}

impl SortBinding {
    /// The most elements a sort through this binding may take.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Whether values move with the keys.
    pub fn pairs(&self) -> bool {
        self.payload.has_values()
    }

    /// The width of the keys it sorts.
    pub fn key_width(&self) -> KeyWidth {
        self.width
    }

    /// Whether sorts through it read their element count from the GPU.
    pub fn gpu_count(&self) -> bool {
        self.gpu_count
    }

    /// Whether its tiles hold each key's 16-bit origin in place of its value
    /// ([`RecorderDesc::tile_origins`]): what [`SortRecorder::bind`] chose for it.
    pub fn tile_origins(&self) -> bool {
        self.payload == Payload::PairsOrigins
    }
}

/// What one `record` recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// Passes recorded (0 when n < 2).
    pub passes: usize,
}

static NEXT_RECORDER: AtomicU64 = AtomicU64::new(1);

/// Records sorts into the caller's command buffers. See the [module docs](self) for the contract.
pub struct SortRecorder {
    // Field order is drop order: pipelines before the layouts they were made with.
    kernels: Vec<Kernels>,
    layouts: Layouts,
    device: ash::Device,
    info: DeviceInfo,
    pool: vk::DescriptorPool,
    bindings_left: u32,
    options: KernelOptions,
    /// The most workgroups of the tile sort, of a local merge without windows and of a segment
    /// pass (`Plan::persistent_merges`).
    merge_groups: u32,
    /// Plans are `Plan::segmented` (Some(true)), never (Some(false)), or where
    /// `plan::segments_pay` says (None).
    segments: Option<bool>,
    /// The segment passes' carried low runs where the recorder was given one, else
    /// `plan::segment_runs` picks them per sort.
    segment_runs: Option<SegmentRuns>,
    /// Segment passes of one coset per workgroup run a pipeline made for their shape
    /// (`Kernels::make_shaped`): every shape (Some(true)), none (Some(false)), or those whose
    /// chain of chunks has a module of its own (None).
    shaped: Option<bool>,
    /// `bind` makes the shaped pipelines of sorts of the capacity alone, not of every shorter
    /// sort the binding may take (the standalone sorter, which binds for each sort's length).
    shapes_of_capacity_only: bool,
    /// The device is a CPU implementation, whose loops may stop early (`plan::CPU_LOOP_LIMIT`).
    cpu: bool,
    /// u32 pairs take tiles of 16-bit origins: never (Some(false): also where the device has no
    /// `shaderInt16` enabled), always (Some(true)), or where they give a larger segment tile
    /// (None; see `RecorderDesc::tile_origins`).
    origins: Option<bool>,
    cache: vk::PipelineCache,
    id: u64,
}

impl std::fmt::Debug for SortRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SortRecorder").field("device", &self.info.name).finish_non_exhaustive()
    }
}

impl SortRecorder {
    /// Creates the layouts and a descriptor pool on the caller's device. Pipelines are made by
    /// [`SortRecorder::bind`] (for the binding's capacity), never by `record`.
    ///
    /// # Safety
    /// `physical_device` must belong to `instance` and `device` must have been created from it,
    /// and all three must stay alive until the recorder is dropped. `desc.pipeline_cache` is null
    /// or a pipeline cache of `device` used under the caller's external synchronisation rules.
    pub unsafe fn new(
        instance: &ash::Instance,
        physical_device: vk::PhysicalDevice,
        device: &ash::Device,
        desc: &RecorderDesc,
    ) -> Result<SortRecorder> {
        // SAFETY: the caller guarantees `physical_device` belongs to the live `instance`.
        let info = unsafe { describe(instance, 0, physical_device) };
        Self::with_info(device, info, desc)
    }

    /// [`SortRecorder::new`] for a device already described (the standalone sorter's).
    pub(crate) fn with_info(device: &ash::Device, info: DeviceInfo, desc: &RecorderDesc) -> Result<SortRecorder> {
        let options = KernelOptions {
            max_tile: desc.max_tile,
            max_fused: desc.max_fused_substages,
            local_workgroup_size: desc.local_workgroup_size,
            local_chunk: desc.local_chunk_substages,
        };
        // Validate the options before creating anything.
        geometry_for(&info.limits, Payload::Pairs, KeyWidth::Bits64, options)?;
        let segment_runs = segment_runs_of(desc.segment_run, desc.segment_run_long)?;
        // Origins need shaderInt16 offered by the device and enabled by the caller. Asked for, a
        // tile they cannot take is an error; by default they are then simply not taken.
        let int16 = desc.shader_int16 && info.shader_int16;
        let origins_fit = || geometry_for(&info.limits, Payload::PairsOrigins, KeyWidth::Bits32, options);
        let origins = match (desc.tile_origins, int16) {
            (Some(true), false) => {
                return Err(Error::InvalidOption {
                    name: "tile_origins",
                    value: "true".into(),
                    reason: "needs a device that offers the shaderInt16 feature, created with it enabled \
                             (RecorderDesc::shader_int16; a Context enables it wherever the device offers it)",
                })
            }
            (Some(true), true) => {
                origins_fit()?;
                Some(true)
            }
            (None, true) if origins_fit().is_ok() => None,
            _ => Some(false),
        };
        if desc.max_bindings == 0 {
            return Err(Error::InvalidOption { name: "max_bindings", value: "0".into(), reason: "must be at least 1" });
        }
        let layouts = Layouts::new(device)?;
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 3 * desc.max_bindings,
        }];
        let info_pool = vk::DescriptorPoolCreateInfo::default().max_sets(desc.max_bindings).pool_sizes(&sizes);
        // SAFETY: `device` is live and the info complete.
        let pool =
            unsafe { device.create_descriptor_pool(&info_pool, None) }.map_err(Error::vk("vkCreateDescriptorPool"))?;
        // One workgroup per multiprocessor where the device says how many it has.
        let merge_groups = desc.merge_workgroups.unwrap_or(info.limits.multiprocessors);
        Ok(SortRecorder {
            merge_groups,
            segments: desc.segment_merges,
            segment_runs,
            shaped: desc.shaped_segments,
            shapes_of_capacity_only: false,
            cpu: info.device_type == DeviceType::Cpu,
            origins,
            kernels: Vec::new(),
            layouts,
            device: device.clone(),
            info,
            pool,
            bindings_left: desc.max_bindings,
            options,
            cache: desc.pipeline_cache,
            id: NEXT_RECORDER.fetch_add(1, AtomicOrdering::Relaxed),
        })
    }

    /// The device as the recorder sees it (limits included).
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Checks one region for `capacity` elements of `element_bytes` each.
    fn check_region(&self, what: &'static str, region: &BufferRegion, capacity: u32, element_bytes: u64) -> Result<()> {
        let alignment = self.info.limits.min_storage_buffer_offset_alignment.max(1);
        if region.offset % alignment != 0 {
            return Err(Error::MisalignedOffset { what, offset: region.offset, alignment });
        }
        let needed = u64::from(capacity) * element_bytes;
        if region.size < needed {
            return Err(Error::BufferTooSmall { what, size: region.size, needed, capacity });
        }
        if region.buffer == vk::Buffer::null() {
            return Err(Error::InvalidOption { name: what, value: "null".into(), reason: "must be a live buffer" });
        }
        Ok(())
    }

    /// Binds a keys region and, for pairs, a values region of the same capacity, and optionally a
    /// GPU-side count: checks each (offset alignment, size, the device's limits), makes the
    /// pipelines for this capacity and key width if they do not exist yet, and writes one
    /// descriptor set. Sorts recorded through the binding may take any n up to `capacity`.
    pub fn bind(&mut self, desc: &BindDesc) -> Result<SortBinding> {
        let (mut binding, infos) = self.prepare(desc)?;
        if self.bindings_left == 0 {
            return Err(Error::InvalidOption {
                name: "max_bindings",
                value: "exceeded".into(),
                reason: "every binding of RecorderDesc::max_bindings is in use; create the recorder with more",
            });
        }
        let set_layouts = [self.layouts.set_layout];
        let info = vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.pool).set_layouts(&set_layouts);
        // SAFETY: the pool has room (bindings_left > 0) and the layout is live.
        binding.set =
            unsafe { self.device.allocate_descriptor_sets(&info) }.map_err(Error::vk("vkAllocateDescriptorSets"))?[0];
        self.bindings_left -= 1;
        // SAFETY: the set was just allocated, so no command buffer uses it.
        unsafe { self.write_set(binding.set, &infos) };
        Ok(binding)
    }

    /// Points an existing binding at new regions (a resized buffer, say), with a new capacity,
    /// key width or payload if `desc` says so, reusing its descriptor set: the checks and errors
    /// of [`SortRecorder::bind`], and on an error `binding` is left as it was.
    ///
    /// # Safety
    /// No command buffer recorded with `binding` may be pending execution or still recording
    /// (the descriptor set is rewritten in place); the new regions fall under the Contract's
    /// lifetimes as the old ones did.
    pub unsafe fn rebind(&mut self, binding: &mut SortBinding, desc: &BindDesc) -> Result<()> {
        self.check_own(binding)?;
        let (mut fresh, infos) = self.prepare(desc)?;
        fresh.set = binding.set;
        // SAFETY: the caller guarantees that no command buffer using the set is pending or
        // recording.
        unsafe { self.write_set(fresh.set, &infos) };
        *binding = fresh;
        Ok(())
    }

    /// Everything `bind` and `rebind` share: the checks, the pipelines, and the descriptor writes
    /// to make (the binding's set is still null).
    fn prepare(&mut self, desc: &BindDesc) -> Result<(SortBinding, [vk::DescriptorBufferInfo; 3])> {
        let BindDesc { keys, values, count, capacity, key_width, batched } = *desc;
        let key_bytes = u64::from(key_width.bytes());
        let (key_len, value_len) = (u64::from(capacity) * key_bytes, u64::from(capacity) * 4);
        if capacity == 0 {
            return Err(Error::InvalidOption { name: "capacity", value: "0".into(), reason: "must be at least 1" });
        }
        crate::sorter::check_size(&self.info.limits, capacity as usize, key_width)?;
        self.check_region("keys", &keys, capacity, key_bytes)?;
        let mut written = vec![("keys", keys, key_len)];
        if let Some(v) = &values {
            self.check_region("values", v, capacity, 4)?;
            written.push(("values", *v, value_len));
        }
        if let Some(c) = &count {
            self.check_region("count", c, 1, 4)?;
        }
        // The passes write the first `capacity` elements of keys and values; the count must not
        // change under them (every workgroup must see the same count), nor keys overlap values.
        let overlaps = |a: &BufferRegion, a_len: u64, b: &BufferRegion, b_len: u64| {
            a.buffer == b.buffer && a.offset < b.offset + b_len && b.offset < a.offset + a_len
        };
        if let Some(v) = &values {
            if overlaps(&keys, key_len, v, value_len) {
                return Err(Error::OverlappingRegions { first: "keys", second: "values" });
            }
        }
        if let Some(c) = &count {
            if let Some((what, _, _)) = written.iter().find(|(_, r, len)| overlaps(r, *len, c, 4)) {
                return Err(Error::OverlappingRegions { first: what, second: "count" });
            }
        }
        let payload = if values.is_some() { self.pairs_payload(key_width, capacity, batched)? } else { Payload::Keys };
        let build = Build { payload, width: key_width, variant: variant(count.is_some(), batched) };
        let kernels = self.kernels_for_capacity(build, capacity, batched)?;
        // Unused bindings point at the keys, so that every descriptor is valid: the kernels of keys
        // alone do not declare binding 1, those of a host count not binding 2.
        let infos = [(keys, key_len), (values.unwrap_or(keys), value_len), (count.unwrap_or(keys), 4)]
            .map(|(r, range)| vk::DescriptorBufferInfo { buffer: r.buffer, offset: r.offset, range });
        let binding = SortBinding {
            set: vk::DescriptorSet::null(),
            capacity,
            payload,
            width: key_width,
            gpu_count: count.is_some(),
            batched,
            kernels,
            recorder: self.id,
        };
        Ok((binding, infos))
    }

    /// Writes bindings 0, 1 and 2 of `set`.
    ///
    /// # Safety
    /// No command buffer that uses `set` is pending or recording; the regions were checked by
    /// `prepare`.
    unsafe fn write_set(&self, set: vk::DescriptorSet, infos: &[vk::DescriptorBufferInfo; 3]) {
        let infos = infos.map(|i| [i]);
        let writes = [0, 1, 2].map(|b| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(b)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(&infos[b as usize])
        });
        // SAFETY: the set is live and unused (the caller's promise); the regions were checked
        // against the alignment limit and their sizes, and the caller keeps the buffers alive (see
        // Contract).
        unsafe { self.device.update_descriptor_sets(&writes, &[]) };
    }

    /// The index in `kernels` of the pipelines for sorts of up to `capacity` elements (in all, of
    /// up to as many arrays as fit where `batched`), made on first use.
    fn kernels_for_capacity(&mut self, build: Build, capacity: u32, batched: bool) -> Result<usize> {
        let options = self.sized_options(build.payload, build.width, capacity, batched)?;
        let (geometry, _) = geometry_for(&self.info.limits, build.payload, build.width, options)?;
        let chunk = local_chunk(build.payload, build.width, &geometry, options.local_chunk);
        let found = self.kernels.iter().position(|k| k.build == build && k.geometry == geometry && k.chunk == chunk);
        let index = match found {
            Some(i) => i,
            None => {
                let kernels = Kernels::new(&self.device, &self.layouts, &self.info.limits, build, options, self.cache)?;
                self.kernels.push(kernels);
                self.kernels.len() - 1
            }
        };
        // A tile sort loops only where a sort has more tiles than merge workgroups, a segment pass
        // where it has more cosets (at most the power of two at or above n over the tile) than
        // that (see `persistent`), so bindings too small for that never compile the looping builds.
        let loop_above = |workgroups: u32| self.merge_groups > 0 && workgroups > self.merge_groups;
        if loop_above(capacity.div_ceil(geometry.tile())) {
            self.kernels[index].make_persistent(PassKind::TileSort, &self.layouts, self.cache)?;
        }
        let maybe = self.segments.unwrap_or(self.info.limits.multiprocessors > 0);
        if maybe && capacity > geometry.tile() {
            self.kernels[index].make_segment_merge(&self.layouts, self.cache)?;
            if plan::segments_loop(build.element_bytes()) && loop_above(capacity.next_power_of_two() / geometry.tile())
            {
                self.kernels[index].make_persistent(PassKind::SegmentMerge, &self.layouts, self.cache)?;
            }
            if self.shaped != Some(false) {
                let shapes = self.segment_shapes(&self.kernels[index], capacity)?;
                let every = self.shaped == Some(true);
                self.kernels[index].make_shaped(shapes, every, &self.layouts, self.cache)?;
            }
        }
        Ok(index)
    }

    /// The shapes (push constants `dir`, `log_block`) of the segment passes of one coset per
    /// workgroup in the sorts a binding of `capacity` through `kernels` may take: those of n =
    /// the capacity, and (unless `shapes_of_capacity_only`) of every power of two from two tiles
    /// below it. A sort of another length whose plan has a shape not among them runs that pass
    /// on the plain build.
    fn segment_shapes(&self, kernels: &Kernels, capacity: u32) -> Result<Vec<(u32, u32)>> {
        let geometry = kernels.geometry;
        let top = plan::ceil_log2(u64::from(capacity));
        let lengths = if self.shapes_of_capacity_only { top..top } else { geometry.tile_log2 + 1..top };
        let mut shapes = Vec::new();
        for n in lengths.map(|level| 1u32 << level).chain([capacity]) {
            let plan = self.persistent(self.new_plan(n, geometry, kernels.build, 0)?, kernels.local_wg, kernels.build);
            for pass in &plan.passes {
                let shape = (pass.push.dir, pass.push.log_block);
                if pass.kind == PassKind::SegmentMerge && pass.substages == 0 && !shapes.contains(&shape) {
                    shapes.push(shape);
                }
            }
        }
        Ok(shapes)
    }

    /// Makes the shaped pipelines of the sorts of each binding's capacity alone
    /// (`shapes_of_capacity_only`).
    pub(crate) fn shape_capacity_only(&mut self) {
        self.shapes_of_capacity_only = true;
    }

    /// Tiles and local chunks sized for the capacity, as the standalone sorter sizes them for n:
    /// the tile of [`plan::segment_tile`] where the binding's sorts may take segment passes, else
    /// the sorter's `tile_for`; the chunk of the sorter's `sized_chunk_for`. A `batched` binding takes `tile_for`: its capacity holds many
    /// arrays, and a tile sized to spread one array of the capacity over the multiprocessors
    /// would cut shorter arrays into several tiles where `tile_for`'s holds each in one (one
    /// pass). Not measured on a GPU: batched bindings keep the tiles they had before segment tiles.
    fn sized_options(&self, payload: Payload, width: KeyWidth, capacity: u32, batched: bool) -> Result<KernelOptions> {
        let mut options = self.options;
        let segment_tile = if batched { None } else { self.segment_tile(payload, width, capacity)? };
        let by_size = match segment_tile {
            Some(tile) => tile,
            None => crate::sorter::tile_for(capacity as usize),
        };
        options.max_tile = Some(options.max_tile.map_or(by_size, |cap| cap.min(by_size)));
        if options.local_chunk.is_none() {
            let n = capacity as usize;
            options.local_chunk = crate::sorter::sized_chunk_for(n, payload, width, segment_tile, options.max_fused);
        }
        Ok(options)
    }

    /// The tile for a binding of this capacity whose sorts may take segment passes (unless the
    /// recorder was asked for none, on a device that reports its multiprocessors), from the
    /// largest tile the options and shared memory allow; None where segments are off or no tile
    /// gives 3 to one per multiprocessor.
    fn segment_tile(&self, payload: Payload, width: KeyWidth, capacity: u32) -> Result<Option<u32>> {
        let multiprocessors = self.info.limits.multiprocessors;
        if self.segments == Some(false) || multiprocessors == 0 {
            return Ok(None);
        }
        let (largest, _) = geometry_for(&self.info.limits, payload, width, self.options)?;
        Ok(plan::segment_tile(capacity, largest.tile(), multiprocessors))
    }

    /// The payload of a binding of pairs of `width` keys for `capacity` elements: with origins
    /// (`origins`) where the recorder takes them always, or by default where their larger tile is
    /// the only one that gives an unbatched binding's sorts a segment tile, for the capacity and
    /// for the power of two at or above it (the network's length, whose cosets the segment passes
    /// run); else plain pairs. On an H200 (132 multiprocessors) 600000 and 2^20 pairs, whose
    /// networks of 2^20 fit 128 cosets of 8192, went from 154.4 to 141 us and from 162.0 to 153.7
    /// us, while 1081344 (132 tiles of 8192 in a network of 2^21) went from 214 to 234 us.
    pub(crate) fn pairs_payload(&self, width: KeyWidth, capacity: u32, batched: bool) -> Result<Payload> {
        if width != KeyWidth::Bits32 {
            return Ok(Payload::Pairs);
        }
        let origins = match self.origins {
            Some(choice) => choice,
            None => match capacity.checked_next_power_of_two() {
                Some(network) if !batched => {
                    self.segment_tile(Payload::Pairs, width, capacity)?.is_none()
                        && self.segment_tile(Payload::PairsOrigins, width, capacity)?.is_some()
                        && self.segment_tile(Payload::PairsOrigins, width, network)?.is_some()
                }
                _ => false,
            },
        };
        Ok(if origins { Payload::PairsOrigins } else { Payload::Pairs })
    }

    /// The geometry and local workgroup size an unbatched binding of this capacity, payload and
    /// key width gets, without making anything.
    pub(crate) fn geometry(&self, payload: Payload, width: KeyWidth, capacity: u32) -> Result<(Geometry, u32)> {
        geometry_for(&self.info.limits, payload, width, self.sized_options(payload, width, capacity, false)?)
    }

    /// Records a sort of the first `n` elements of the binding's regions, keys of type `K`, into
    /// `cmd`, and returns what it recorded. Nothing is recorded for n < 2. With a GPU-side count
    /// the sort takes min(count, n) elements, the count read when the passes run: pass the
    /// capacity as `n` to be bounded by the binding alone (a count above n is clamped to n).
    /// Workgroups of the local kernels whose tile lies wholly past the count return at once;
    /// every pass of a sort of `n` is still recorded and dispatched, and the global passes test
    /// each element against the count.
    ///
    /// # Safety
    /// `cmd` must be a command buffer of this recorder's device in the recording state, outside a
    /// render pass, for a queue family with compute. The Contract in the [module docs](self)
    /// applies: barriers before and after, bound state, lifetimes.
    pub unsafe fn record<K: SortKey>(
        &self,
        cmd: vk::CommandBuffer,
        binding: &SortBinding,
        n: u32,
        order: Order,
    ) -> Result<Recorded> {
        // SAFETY: forwarded from the caller.
        unsafe { self.record_kind(cmd, binding, n, K::KIND, order) }
    }

    /// Records sorts of `batches` independent arrays of `n` elements each, side by side in the
    /// binding's regions (array b holds elements b*n .. b*n + n), as one sequence of passes: the
    /// batch parameter of NVIDIA's CUDA sample. With a GPU-side count, each array sorts its first
    /// min(count, n) elements. `n * batches` must fit the capacity and `batches` the device's
    /// `maxComputeWorkGroupCount[1]`; more than one array needs a binding made with `batched`
    /// (or a GPU-side count).
    ///
    /// # Safety
    /// As [`SortRecorder::record`].
    pub unsafe fn record_batches<K: SortKey>(
        &self,
        cmd: vk::CommandBuffer,
        binding: &SortBinding,
        n: u32,
        batches: u32,
        order: Order,
    ) -> Result<Recorded> {
        let plan = self.plan(binding, n, batches, K::KIND, order)?;
        // SAFETY: forwarded from the caller.
        unsafe { self.record_plan(cmd, binding, &plan, batches, &Extras::default()) };
        Ok(Recorded { passes: plan.passes.len() })
    }

    /// [`SortRecorder::record`] with the key type as a value.
    ///
    /// # Safety
    /// As [`SortRecorder::record`].
    pub unsafe fn record_kind(
        &self,
        cmd: vk::CommandBuffer,
        binding: &SortBinding,
        n: u32,
        kind: KeyKind,
        order: Order,
    ) -> Result<Recorded> {
        // SAFETY: forwarded from the caller.
        unsafe { self.record_one(cmd, binding, n, kind, order, &Extras::default()) }
    }

    /// Plans one array of `n` and records it with `extras`.
    ///
    /// # Safety
    /// As [`SortRecorder::record`], and a pool in `extras` as [`SortRecorder::record_timed`] asks.
    unsafe fn record_one(
        &self,
        cmd: vk::CommandBuffer,
        binding: &SortBinding,
        n: u32,
        kind: KeyKind,
        order: Order,
        extras: &Extras<'_>,
    ) -> Result<Recorded> {
        let plan = self.plan(binding, n, 1, kind, order)?;
        // SAFETY: forwarded from the caller.
        Ok(unsafe { self.record_planned(cmd, binding, &plan, extras) })
    }

    /// Records one array's `plan` with `extras`.
    ///
    /// # Safety
    /// As [`SortRecorder::record_one`], and `plan` is what [`SortRecorder::plan`] made for
    /// `binding` with one array (its passes index that binding's pipelines and sizes).
    unsafe fn record_planned(
        &self,
        cmd: vk::CommandBuffer,
        binding: &SortBinding,
        plan: &Plan,
        extras: &Extras<'_>,
    ) -> Recorded {
        // SAFETY: forwarded from the caller.
        unsafe { self.record_plan(cmd, binding, plan, 1, extras) };
        Recorded { passes: plan.passes.len() }
    }

    /// The passes [`SortRecorder::record_kind`] records for a sort of `n` elements of `kind` in
    /// `order` through `binding` (0 for n < 2): the queries [`SortRecorder::record_timed`] writes.
    /// Fails as `record_kind` would.
    pub fn passes(&self, binding: &SortBinding, n: u32, kind: KeyKind, order: Order) -> Result<usize> {
        Ok(self.plan(binding, n, 1, kind, order)?.passes.len())
    }

    /// [`SortRecorder::record_kind`], with a timestamp after each pass (at the compute-shader
    /// stage): query `first + i` of `pool` after pass `i`. With a timestamp of the caller's just
    /// before the sort, the differences are each pass's GPU time, the barrier before it included:
    /// how a renderer profiles its frame's sort pass by pass. The timestamps add commands between
    /// the passes but no wait beyond the barriers already there; in the particle example on an
    /// H200 they added about 9 us to a sort of 160 to 180 us. Fails as `record_kind` would, and
    /// with [`Error::InvalidOption`] where `first` plus the passes overflows a query index.
    ///
    /// # Safety
    /// As [`SortRecorder::record`], and: `pool` is a `TIMESTAMP` query pool of this recorder's
    /// device with at least `first` + [`SortRecorder::passes`] queries, those queries reset
    /// before this command buffer runs (by `vkCmdResetQueryPool` earlier in it or in an earlier
    /// submission, or on the host) and written by nothing else before they are read; the queue
    /// family has `timestampValidBits` above zero.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn record_timed(
        &self,
        cmd: vk::CommandBuffer,
        binding: &SortBinding,
        n: u32,
        kind: KeyKind,
        order: Order,
        pool: vk::QueryPool,
        first: u32,
    ) -> Result<Recorded> {
        let plan = self.plan(binding, n, 1, kind, order)?;
        if first.checked_add(plan.passes.len() as u32).is_none() {
            return Err(Error::InvalidOption {
                name: "first",
                value: first.to_string(),
                reason: "first plus the sort's passes must fit a u32 query index",
            });
        }
        let extras = Extras { pass_timestamps: Some((pool, first)), ..Extras::default() };
        // SAFETY: forwarded from the caller, who also vouches for the pool and its queries; the
        // check above keeps every query index the plan's passes take within u32.
        Ok(unsafe { self.record_planned(cmd, binding, &plan, &extras) })
    }

    /// A binding made by another recorder is an error.
    fn check_own(&self, binding: &SortBinding) -> Result<()> {
        if binding.recorder != self.id {
            return Err(Error::InvalidOption {
                name: "binding",
                value: "from another recorder".into(),
                reason: "a binding records only through the recorder that made it",
            });
        }
        Ok(())
    }

    /// Checks a sort against its binding and plans it (no passes for n < 2).
    pub(crate) fn plan(
        &self,
        binding: &SortBinding,
        n: u32,
        batches: u32,
        kind: KeyKind,
        order: Order,
    ) -> Result<Plan> {
        self.check_own(binding)?;
        if kind.width() != binding.width {
            return Err(Error::KeyWidthMismatch { kind: kind.name(), bound: binding.width.bytes() * 8 });
        }
        let max_rows = self.info.limits.max_compute_work_group_count_y;
        if batches == 0 || batches > max_rows {
            return Err(Error::InvalidOption {
                name: "batches",
                value: batches.to_string(),
                reason: "must be at least 1 and at most the device's maxComputeWorkGroupCount[1]",
            });
        }
        if batches > 1 && !binding.batched && !binding.gpu_count {
            return Err(Error::InvalidOption {
                name: "batches",
                value: batches.to_string(),
                reason: "more than one array needs a binding made with BindDesc::batched",
            });
        }
        let total = n.checked_mul(batches).filter(|t| *t <= binding.capacity);
        if total.is_none() {
            return Err(Error::OverCapacity { n: n.saturating_mul(batches), capacity: binding.capacity });
        }
        // The binding comes from this recorder (checked above), whose `kernels` only grows.
        let kernels = &self.kernels[binding.kernels];
        let plan = self.new_plan(n, kernels.geometry, kernels.build, key_flags(kind, order))?;
        Ok(self.persistent(plan, kernels.local_wg, kernels.build))
    }

    /// The passes of a sort of n elements with this geometry and build:
    /// [`Plan::segmented_with_runs`] (the recorder's carried runs, else [`plan::segment_runs`]')
    /// where the recorder was asked for segment passes, or by default where [`plan::segments_pay`]
    /// says so; else [`Plan::new`].
    pub(crate) fn new_plan(&self, n: u32, geometry: Geometry, build: Build, key_flags: u32) -> Result<Plan> {
        let multiprocessors = self.info.limits.multiprocessors;
        let segments = self.segments.unwrap_or_else(|| {
            plan::segments_pay(n, &geometry, build.element_bytes(), multiprocessors, self.merge_groups)
        });
        if segments {
            let runs = self.segment_runs.unwrap_or_else(|| {
                plan::segment_runs(n, &geometry, build.width.bytes(), build.element_bytes(), multiprocessors)
            });
            Plan::segmented_with_runs(n, geometry, key_flags, runs)
        } else {
            Plan::new(n, geometry, key_flags)
        }
    }

    /// Caps a plan's tile sort, local merges and segment passes at this recorder's merge
    /// workgroups, each looping over no more tiles than the device's loops allow
    /// ([`plan::max_loop_tiles`]) and segment passes only where [`plan::segments_loop`] says;
    /// `local_wg`: the invocations per workgroup of the plan's local kernels, `build` their build.
    pub(crate) fn persistent(&self, plan: Plan, local_wg: u32, build: Build) -> Plan {
        let (cpu, geometry) = (self.cpu, plan.geometry);
        let segments_loop = plan::segments_loop(build.element_bytes());
        plan.persistent_merges(self.merge_groups, |kind| {
            if kind == PassKind::SegmentMerge && !segments_loop {
                // One coset per loop: the pass keeps a workgroup per coset.
                1
            } else {
                plan::max_loop_tiles(cpu, &geometry, local_wg, kind)
            }
        })
    }

    /// The layouts every pipeline of this recorder was made with.
    pub(crate) fn layouts(&self) -> &Layouts {
        &self.layouts
    }

    /// Records a plan made by [`SortRecorder::plan`] for `binding`: its descriptor set, then
    /// every pass (nothing for a plan without passes).
    ///
    /// # Safety
    /// As [`SortRecorder::record`].
    pub(crate) unsafe fn record_plan(
        &self,
        cmd: vk::CommandBuffer,
        binding: &SortBinding,
        plan: &Plan,
        batches: u32,
        extras: &Extras<'_>,
    ) {
        if plan.passes.is_empty() {
            return;
        }
        record::bind_set(&self.device, cmd, self.layouts.pipeline_layout, binding.set);
        let mut encoder = self.encoder(cmd, binding, batches, extras);
        let options = RecordOptions {
            max_groups_per_dispatch: extras.max_groups.unwrap_or(self.info.limits.max_compute_work_group_count_x),
            drop_barrier_before_pass: extras.drop_barrier_before_pass,
        };
        record::record_passes(&mut encoder, plan, &options);
    }

    /// An encoder into `cmd` for the pipelines of `binding`.
    pub(crate) fn encoder<'a>(
        &'a self,
        cmd: vk::CommandBuffer,
        binding: &SortBinding,
        batches: u32,
        extras: &Extras<'a>,
    ) -> VulkanEncoder<'a> {
        VulkanEncoder {
            device: &self.device,
            cmd,
            layout: self.layouts.pipeline_layout,
            kernels: &self.kernels[binding.kernels],
            pass_timestamps: extras.pass_timestamps,
            barrier: extras.barrier,
            batches,
        }
    }
}

/// What the standalone sorter's benchmarks and tests add to a recording.
#[derive(Clone, Copy, Default)]
pub(crate) struct Extras<'a> {
    /// A timestamp after each pass: query `first + index` of this pool.
    pub pass_timestamps: Option<(vk::QueryPool, u32)>,
    /// How the barrier between passes is recorded.
    pub barrier: PassBarrier<'a>,
    /// Most workgroups per dispatch, if below the device's limit.
    pub max_groups: Option<u32>,
    /// Test-only: the pass before which no barrier is recorded.
    pub drop_barrier_before_pass: Option<usize>,
}

impl Drop for SortRecorder {
    fn drop(&mut self) {
        self.kernels.clear();
        // SAFETY: created on `device` by `new`; the caller has let every command buffer that uses
        // the sets finish (Contract). Destroying the pool frees its sets.
        unsafe { self.device.destroy_descriptor_pool(self.pool, None) };
        // `layouts` drops after this, destroying the pipeline and set layouts.
    }
}
