//! [`SortRecorder`]: records sorts into the caller's command buffer, on the caller's device, over
//! the caller's buffers.
//!
//! Its docs hold the contract: barriers before and after, the state a sort overwrites, the
//! GPU-side count, lifetimes.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use ash::vk;

use crate::abi::{KeyWidth, Payload};
use crate::device::{describe, DeviceInfo, DeviceType};
use crate::error::{Error, Result};
use crate::gpu::memory::OwnBuffer;
use crate::gpu::pipelines::{ArgsKernel, Creation, KernelKey, Kernels, Layouts, Slot};
use crate::gpu::record::{self, Indirect, PassBarrier, PendingArgs, VulkanEncoder, ARGS_SLOT_BYTES};
use crate::keys::{key_flags, KeyKind, Order, SortKey};
use crate::network::{dispatch_count, dispatch_rules, record_passes, Plan, RecordOptions};
use crate::segment::ceil_log2;
use crate::tuning::{check_size, BindingShape, Sizing, Tuning};

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
    /// and the pipelines. The tiles are sized for it, so a sort of far fewer elements than the
    /// capacity may take a larger tile than through a binding of its own size.
    pub capacity: u32,
    /// The width of the keys sorted through this binding (`u32`/`i32`/`f32` or
    /// `u64`/`i64`/`f64`): each width has its own build of the kernels. Default 32 bits.
    pub key_width: KeyWidth,
    /// Whether sorts through this binding may be batched ([`SortRecorder::record_batches`] with
    /// more than one array). A binding that is neither batched nor reads a GPU-side count runs
    /// its kernels specialized without the batch offset, which costs time.
    pub batched: bool,
}

/// How to create a [`SortRecorder`].
#[derive(Clone, Debug)]
pub struct RecorderDesc {
    /// The most bindings this recorder will make (each is one descriptor set). Default 16.
    pub max_bindings: u32,
    /// A pipeline cache of the caller's to create the pipelines through, or null. `bind` creates
    /// its pipelines from several threads at once, so the cache must be internally synchronised
    /// (created without `EXTERNALLY_SYNCHRONIZED`, the default).
    pub pipeline_cache: vk::PipelineCache,
    /// Test hook: plans for a smaller class of device than this one.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub profile: Option<crate::device::DeviceProfile>,
    /// Whether `device` was created with `VK_EXT_subgroup_size_control` and its
    /// `computeFullSubgroups` feature enabled. Default false. Where it was (and the device offers
    /// it), the tile sort's subgroup form asks for full subgroups wherever its workgroup is a
    /// multiple of the device's maxSubgroupSize, so that a compiler that picks the width per
    /// pipeline (Intel's, AMD's) keeps it on its subgroup shuffles; without it the kernel is
    /// still right at every width, and may take its slower shared-memory form.
    pub full_subgroups: bool,
    /// Test hook: pipelines of workgroups of more invocations than this fail to be made, as the
    /// driver of a small GPU refuses them.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub refuse_workgroups_above: Option<u32>,
    /// Whether `device` was created with the `shaderInt16` feature enabled, which the tiles of
    /// u32 pairs with 16-bit origins need ([`Tuning::tile_origins`]). Default false: pairs then
    /// keep their values in the tile.
    pub shader_int16: bool,
    /// The knobs; the defaults are where they measured fastest.
    pub tuning: Tuning,
}

impl Default for RecorderDesc {
    fn default() -> RecorderDesc {
        RecorderDesc {
            max_bindings: 16,
            pipeline_cache: vk::PipelineCache::null(),
            shader_int16: false,
            full_subgroups: false,
            tuning: Tuning::default(),
            #[cfg(feature = "test-hooks")]
            profile: None,
            #[cfg(feature = "test-hooks")]
            refuse_workgroups_above: None,
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
    /// With a GPU-side count: the recorder's buffer of indirect arguments for the dispatches after
    /// the first pass (written on the GPU by `dispatch_args` beside that pass), as its index in
    /// the recorder's `args` and its handle, and how many dispatches it holds.
    args: Option<(usize, vk::Buffer)>,
    args_slots: u32,
    /// The most invocations per workgroup `bind` planned for after the driver refused a larger
    /// pipeline; None where it took the first plan.
    workgroup_limit: Option<u32>,
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
    /// ([`Tuning::tile_origins`]): what [`SortRecorder::bind`] chose for it.
    pub fn tile_origins(&self) -> bool {
        self.payload == Payload::PairsOrigins
    }

    /// Where the driver refused a pipeline of this binding's kernels, the most invocations per
    /// workgroup that [`SortRecorder::bind`] then planned them for and the driver took (each
    /// refusal halves it); None where the first plan's pipelines were made.
    pub fn workgroup_limit(&self) -> Option<u32> {
        self.workgroup_limit
    }
}

/// What one `record` recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// Passes recorded (0 when n < 2).
    pub passes: usize,
}

static NEXT_RECORDER: AtomicU64 = AtomicU64::new(1);

/// Records sorts into the caller's command buffers.
///
/// A [`SortRecorder`] is made from the caller's `ash` instance, physical device and device (it
/// never destroys them) and an optional pipeline cache. [`SortRecorder::bind`] checks a keys
/// region (and optionally a values region) of the caller's buffers against the device's limits and
/// writes one descriptor set for it, once. [`SortRecorder::record`] then records the whole sort
/// into a command buffer the caller is recording: no device memory is allocated and no descriptor
/// is written per record, so several sorts fit in one command buffer and one frame. The passes are
/// recorded by one function for Vulkan and the CPU model alike; the standalone [`crate::Sorter`] is built on this
/// same recorder. [`SortRecorder::record_batches`] sorts many equal-length arrays in one sequence
/// of passes (bindings made with [`BindDesc::batched`]); [`BindDesc::key_width`] picks the builds
/// for 8-byte keys; [`SortRecorder::rebind`] moves a binding to new regions.
///
/// Stable order (equal keys keep their input order) is a matter of keys: pack each key's order
/// image with its index into a `u64` (`image << 32 | index`, as [`crate::Sorter::sort_pairs_stable`]
/// does on the host) and sort those.
///
/// # Contract
/// - **Before** `record`: the caller's writes to the bound regions must be made available and
///   visible to `COMPUTE_SHADER` stage `SHADER_READ | SHADER_WRITE` accesses, for example with a
///   memory barrier from `TRANSFER`/`TRANSFER_WRITE` (a copy or fill) or
///   `COMPUTE_SHADER`/`SHADER_WRITE` (a compute pass) to `COMPUTE_SHADER`/`SHADER_READ |
///   SHADER_WRITE`.
/// - **After** `record`: the sort's last writes are `COMPUTE_SHADER`/`SHADER_WRITE`; the caller
///   places a barrier from there to its consumer (`VERTEX_SHADER`/`SHADER_READ` to draw,
///   `TRANSFER`/`TRANSFER_READ` to copy out, `DRAW_INDIRECT` ...).
/// - **State**: `record` binds compute pipelines, descriptor set 0 of the compute bind point, and
///   sets push constants (bytes 0..112 with a GPU-side count, else 0..28; compute stage); the
///   caller rebinds its own compute state afterwards. Graphics state is untouched. Between passes
///   it records `COMPUTE_SHADER/SHADER_WRITE -> COMPUTE_SHADER/SHADER_READ|SHADER_WRITE` memory
///   barriers.
/// - **GPU-side count**: the sort's first pass (the tile sort) is dispatched directly, its
///   workgroups past the count returning at once; beside it, `dispatch_args` reads the count and
///   writes the indirect arguments of every later dispatch into a buffer the recorder made at
///   `bind`, and the barrier after the first pass also makes them visible to `DRAW_INDIRECT`
///   `INDIRECT_COMMAND_READ`. The count itself is read by compute shaders alone, so the
///   **Before** barrier covers it. Two sorts through one binding need the **After** barrier
///   between them anyway (the second reads the keys the first wrote); from `COMPUTE_SHADER`, it
///   also orders the first's indirect reads (the logically earlier `DRAW_INDIRECT` stage) before
///   the second rewrites the arguments.
/// - **Lifetimes**: the recorder and every binding must outlive the execution of each command
///   buffer they were recorded into; the bound buffers likewise. Drop the recorder only when the
///   device has finished that work, and before the device is destroyed.
pub struct SortRecorder {
    // Field order is drop order: pipelines before the layouts they were made with.
    kernels: Vec<Kernels>,
    layouts: Layouts,
    /// What binding 2 points at in bindings without a GPU-side count: every kernel declares the
    /// count's binding, and only the counted ones read it.
    no_count: OwnBuffer,
    /// `dispatch_args`, made by the first binding with a GPU-side count.
    args_kernel: Option<ArgsKernel>,
    /// The indirect arguments of each binding with a GPU-side count; a rebound binding's old
    /// buffer is dropped (None). The recorder owns them, so bindings hold no device memory.
    args: Vec<Option<OwnBuffer>>,
    device: ash::Device,
    info: DeviceInfo,
    pool: vk::DescriptorPool,
    bindings_left: u32,
    sizing: Sizing,
    /// How pipelines are created: full subgroups, the test hook's refusals.
    creation: Creation,
    /// Bindings whose first plan the driver refused: the kernels of that plan and the sizing
    /// whose pipelines it took, so that a later binding of the same kernels plans with it at once.
    settled: Vec<(KernelKey, Sizing)>,
    /// `bind` makes the shaped pipelines of sorts of the capacity alone, not of every shorter
    /// sort the binding may take (the standalone sorter, which binds for each sort's length).
    shapes_of_capacity_only: bool,
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
    /// or an internally synchronised pipeline cache of `device` (created without
    /// `VK_PIPELINE_CACHE_CREATE_EXTERNALLY_SYNCHRONIZED_BIT`), which `bind` uses from several
    /// threads at once. With `desc.full_subgroups`, `device` was created with
    /// `VK_EXT_subgroup_size_control` and its `computeFullSubgroups` feature enabled.
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
        #[cfg(feature = "test-hooks")]
        let info = {
            let mut info = info;
            if let Some(profile) = desc.profile {
                profile.apply(&mut info);
            }
            info
        };
        info.check_usable()?;
        // Origins need shaderInt16 offered by the device and enabled by the caller.
        let int16 = desc.shader_int16 && info.shader_int16;
        let sizing = Sizing::new(desc.tuning, info.limits, info.device_type == DeviceType::Cpu, int16)?;
        // Full subgroups need the feature offered by the device and enabled by the caller.
        let full_subgroups = (desc.full_subgroups && info.full_subgroups).then_some(info.max_subgroup_size);
        #[cfg(not(feature = "test-hooks"))]
        let refuse_above = None;
        #[cfg(feature = "test-hooks")]
        let refuse_above = desc.refuse_workgroups_above;
        let creation = Creation { flags: vk::PipelineCreateFlags::empty(), full_subgroups, refuse_above };
        if desc.max_bindings == 0 {
            return Err(Error::InvalidOption { name: "max_bindings", value: "0".into(), reason: "must be at least 1" });
        }
        let no_count = OwnBuffer::new(device, &info.memory, 16, vk::BufferUsageFlags::STORAGE_BUFFER)?;
        let layouts = Layouts::new(device)?;
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 4 * desc.max_bindings,
        }];
        let info_pool = vk::DescriptorPoolCreateInfo::default().max_sets(desc.max_bindings).pool_sizes(&sizes);
        // SAFETY: `device` is live and the info complete.
        let pool =
            unsafe { device.create_descriptor_pool(&info_pool, None) }.map_err(Error::vk("vkCreateDescriptorPool"))?;
        Ok(SortRecorder {
            sizing,
            creation,
            settled: Vec::new(),
            shapes_of_capacity_only: false,
            kernels: Vec::new(),
            layouts,
            no_count,
            args_kernel: None,
            args: Vec::new(),
            device: device.clone(),
            info,
            pool,
            bindings_left: desc.max_bindings,
            cache: desc.pipeline_cache,
            id: NEXT_RECORDER.fetch_add(1, AtomicOrdering::Relaxed),
        })
    }

    /// The device as the recorder sees it (limits included).
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

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
        // Nothing uses the old arguments either (the same promise): free them.
        if let Some((index, _)) = binding.args {
            self.args[index] = None;
        }
        *binding = fresh;
        Ok(())
    }

    /// Everything `bind` and `rebind` share: the checks, the pipelines, and the descriptor writes
    /// to make (the binding's set is still null).
    fn prepare(&mut self, desc: &BindDesc) -> Result<(SortBinding, [vk::DescriptorBufferInfo; 4])> {
        let BindDesc { keys, values, count, capacity, key_width, batched } = *desc;
        let key_bytes = u64::from(key_width.bytes());
        let (key_len, value_len) = (u64::from(capacity) * key_bytes, u64::from(capacity) * 4);
        if capacity == 0 {
            return Err(Error::InvalidOption { name: "capacity", value: "0".into(), reason: "must be at least 1" });
        }
        check_size(&self.info.limits, capacity as usize, key_width)?;
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
        let (payload, kernels, workgroup_limit) =
            self.bind_kernels(values.is_some(), key_width, capacity, batched, count.is_some())?;
        // With a count, every dispatch after the first pass is indirect: the slots for the most
        // of them a sort through this binding records, and the kernel that writes them.
        let (args, args_slots) = match count {
            None => (None, 0),
            Some(_) => {
                if self.args_kernel.is_none() {
                    self.args_kernel = Some(ArgsKernel::new(&self.device, &self.layouts, self.cache)?);
                }
                let slots = self.most_dispatches(&self.kernels[kernels], capacity)?;
                let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::INDIRECT_BUFFER;
                let buffer =
                    OwnBuffer::new(&self.device, &self.info.memory, u64::from(slots) * ARGS_SLOT_BYTES, usage)?;
                let handle = buffer.buffer;
                self.args.push(Some(buffer));
                (Some((self.args.len() - 1, handle)), slots)
            }
        };
        // Unused bindings point at something valid that no kernel reads: values at the keys (the
        // kernels of keys alone do not declare binding 1), the count and the arguments at the
        // recorder's own buffer.
        let own = BufferRegion { buffer: self.no_count.buffer, offset: 0, size: 4 };
        let args_region = match args {
            Some((_, buffer)) => BufferRegion { buffer, offset: 0, size: u64::from(args_slots) * ARGS_SLOT_BYTES },
            None => own,
        };
        let infos = [
            (keys, key_len),
            (values.unwrap_or(keys), value_len),
            (count.unwrap_or(own), 4),
            (args_region, args_region.size),
        ]
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
            args,
            args_slots,
            workgroup_limit,
        };
        Ok((binding, infos))
    }

    /// The most dispatches a sort through a binding of `key` and `capacity` records, with room to
    /// spare: those of the sorts of each length around every power of two up to the capacity, and
    /// of the capacity, doubled. A sort whose plan takes more fails `plan`'s check.
    fn most_dispatches(&self, kernels: &Kernels, capacity: u32) -> Result<u32> {
        let (key, sizing) = (&kernels.key, &kernels.sizing);
        let max_groups = self.info.limits.max_compute_work_group_count_x;
        let mut most = 0;
        for n in sample_lengths(sizing, key, capacity) {
            let plan = plan_with(sizing, key, n, 0)?;
            most = most.max(dispatch_count(&plan, max_groups) as u32);
        }
        Ok(2 * most + 8)
    }

    /// Writes bindings 0 to 3 of `set`.
    ///
    /// # Safety
    /// No command buffer that uses `set` is pending or recording; the regions were checked by
    /// `prepare`.
    unsafe fn write_set(&self, set: vk::DescriptorSet, infos: &[vk::DescriptorBufferInfo; 4]) {
        let infos = infos.map(|i| [i]);
        let writes = [0, 1, 2, 3].map(|b| {
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

    /// The payload and the index in `kernels` of the pipelines of a binding ([`Self::kernels_for`]),
    /// and the workgroup limit they were planned for, if any. Where the driver refuses a pipeline
    /// (any Vulkan error but a lost device: register pressure at 1 024 invocations on a small GPU,
    /// say), the binding is planned again as if the device took workgroups of at most half the
    /// refused one's invocations, the same capacity in tiles and workgroups fit for that, down to
    /// one invocation or the least the knobs allow; then the error names the kernel, the sizes
    /// tried and the knob.
    fn bind_kernels(
        &mut self,
        pairs: bool,
        width: KeyWidth,
        capacity: u32,
        batched: bool,
        counted: bool,
    ) -> Result<(Payload, usize, Option<u32>)> {
        let plan = |sizing: &Sizing| -> Result<(Payload, KernelKey)> {
            let payload = if pairs { sizing.pairs_payload(width, capacity, batched)? } else { Payload::Keys };
            let shape = sizing.binding(payload, width, capacity, batched)?;
            Ok((payload, KernelKey { shape, width, batched, counted }))
        };
        let first = plan(&self.sizing)?.1;
        let settled = self.settled.iter().find(|(key, _)| *key == first).map(|(_, sizing)| *sizing);
        let mut sizing = settled.unwrap_or(self.sizing);
        let mut limit = settled.map(|s| s.limits.max_compute_work_group_invocations);
        let mut tried = Vec::new();
        loop {
            let (payload, key) = plan(&sizing)?;
            let refused = match self.kernels_for(key, &sizing, capacity) {
                Ok(index) => {
                    if !tried.is_empty() {
                        self.settled.push((first, sizing));
                    }
                    return Ok((payload, index, limit));
                }
                Err(Error::PipelineRefused { device, kernel, workgroups, knob, result }) => {
                    tried.extend(workgroups);
                    Error::PipelineRefused { device, kernel, workgroups: tried.clone(), knob, result }
                }
                Err(e) => return Err(e),
            };
            let half = tried.last().map_or(0, |wg| wg / 2);
            match sizing.with_workgroups_of_at_most(half) {
                Ok(smaller) if half >= 1 => {
                    sizing = smaller;
                    limit = Some(half);
                }
                _ => return Err(refused),
            }
        }
    }

    /// The index in `kernels` of the pipelines of `key` planned with `sizing`, with every pipeline
    /// that a sort through a binding of `capacity` runs made ([`slots_with`]): `record` makes
    /// none. On an error, kernels it added are dropped again.
    fn kernels_for(&mut self, key: KernelKey, sizing: &Sizing, capacity: u32) -> Result<usize> {
        let found = self.kernels.iter().position(|k| k.key == key && k.sizing.limits == sizing.limits);
        let index = match found {
            Some(i) => i,
            None => {
                let every_shape = sizing.tuning.shaped_segments == Some(true);
                self.kernels.push(Kernels::new(&self.device, sizing, key, self.creation, every_shape));
                self.kernels.len() - 1
            }
        };
        let kernels = &self.kernels[index];
        let made = slots_with(sizing, &kernels.key, capacity, self.shapes_of_capacity_only, |s| kernels.has_source(s))
            .and_then(|slots| self.kernels[index].make(slots, &self.layouts, self.cache, &self.info.name));
        match made {
            Ok(()) => Ok(index),
            Err(e) => {
                if found.is_none() {
                    self.kernels.pop();
                }
                Err(e)
            }
        }
    }

    /// Makes the shaped pipelines of the sorts of each binding's capacity alone
    /// (`shapes_of_capacity_only`).
    pub(crate) fn shape_capacity_only(&mut self) {
        self.shapes_of_capacity_only = true;
    }

    /// The shape an unbatched binding of pairs (or keys) of this capacity and key width gets,
    /// without making anything: what [`crate::Sorter`] reports of its sorts.
    pub(crate) fn binding_shape(&self, pairs: bool, width: KeyWidth, capacity: u32) -> Result<BindingShape> {
        let payload = if pairs { self.sizing.pairs_payload(width, capacity, false)? } else { Payload::Keys };
        self.sizing.binding(payload, width, capacity, false)
    }

    /// The plan a sort of n elements through an unbatched binding of this capacity would take.
    #[cfg(any(feature = "study", feature = "test-hooks"))]
    pub(crate) fn plan_of(&self, pairs: bool, kind: KeyKind, order: Order, n: u32) -> Result<Plan> {
        let shape = self.binding_shape(pairs, kind.width(), n)?;
        let key = KernelKey { shape, width: kind.width(), batched: false, counted: false };
        plan_with(&self.sizing, &key, n, key_flags(kind, order))
    }

    /// Records a sort of the first `n` elements of the binding's regions, keys of type `K`, into
    /// `cmd`, and returns what it recorded. Nothing is recorded for n < 2. With a GPU-side count
    /// the sort takes min(count, n) elements, the count read on the GPU: pass the capacity as `n`
    /// to be bounded by the binding alone (a count above n is clamped to n). The passes are
    /// planned for `n`: the first (the tile sort) is dispatched directly and bounds itself by the
    /// count, and each later one indirectly with the workgroups that the count needs (none for a
    /// stage the count does not reach), their arguments written beside the first pass; elements
    /// at or past the count are never read or written.
    ///
    /// # Safety
    /// `cmd` must be a command buffer of this recorder's device in the recording state, outside a
    /// render pass, for a queue family with compute. The Contract in [`SortRecorder`]'s docs
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
    /// the passes but no wait beyond the barriers already there (a few percent of a frame's sort
    /// in the particle example: docs/PERFORMANCE.md). Fails as `record_kind` would, and
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
        let plan = plan_with(&kernels.sizing, &kernels.key, n, key_flags(kind, order))?;
        if let Some(pass) = plan.passes.iter().find(|p| kernels.pass_pipeline(p).is_none()) {
            // `bind` makes what `slots` finds; a plan outside it is a planning bug, not a misuse.
            return Err(Error::Build {
                what: format!(
                    "no {} pipeline bound for a sort of {n} through a binding of {}",
                    Slot::of(pass).label(kernels.key.shape.chunk),
                    binding.capacity
                ),
            });
        }
        if binding.gpu_count {
            let dispatches = dispatch_count(&plan, self.info.limits.max_compute_work_group_count_x);
            if dispatches > binding.args_slots as usize {
                return Err(Error::InvalidOption {
                    name: "n",
                    value: n.to_string(),
                    reason: "its sort takes more dispatches than the binding's indirect arguments hold; record \
                             the binding's capacity, or bind a region of this length",
                });
            }
        }
        Ok(plan)
    }

    /// Test hook: the labels of `binding`'s pipelines made with full subgroups.
    #[cfg(feature = "test-hooks")]
    pub(crate) fn full_subgroup_labels(&self, binding: &SortBinding) -> Vec<String> {
        self.kernels.get(binding.kernels).map(Kernels::full_subgroup_labels).unwrap_or_default()
    }

    /// How many pipelines the recorder's bindings have made.
    #[cfg(feature = "study")]
    pub(crate) fn pipelines_made(&self) -> usize {
        self.kernels.iter().map(Kernels::made).sum()
    }

    /// The layouts every pipeline of this recorder was made with.
    #[cfg(feature = "study")]
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
        let options = RecordOptions {
            max_groups_per_dispatch: extras.max_groups.unwrap_or(self.info.limits.max_compute_work_group_count_x),
            drop_barrier_before_pass: extras.drop_barrier_before_pass,
        };
        let mut encoder = self.encoder(cmd, binding, batches, extras);
        if let (Some((_, args)), Some(kernel)) = (binding.args, &self.args_kernel) {
            // The arguments of every dispatch after the first pass for the count, from the rules
            // of the same plan and splits that record_passes records below. A plan of one pass
            // has none: its tile sort bounds itself by the count.
            let rules = dispatch_rules(plan, options.max_groups_per_dispatch);
            if !rules.is_empty() {
                let pending = PendingArgs { pipeline: kernel.pipeline, n: plan.n, batches, rules };
                encoder.indirect =
                    Some(Indirect { buffer: args, pending: Some(pending), next_slot: 0, visible: false });
            }
        }
        record_passes(&mut encoder, plan, &options);
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
            indirect: None,
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
    /// Test hook: the pass before which no barrier is recorded.
    pub drop_barrier_before_pass: Option<usize>,
}

impl Drop for SortRecorder {
    fn drop(&mut self) {
        self.kernels.clear();
        self.args_kernel = None;
        self.args.clear();
        // SAFETY: created on `device` by `new`; the caller has let every command buffer that uses
        // the sets finish (Contract). Destroying the pool frees its sets.
        unsafe { self.device.destroy_descriptor_pool(self.pool, None) };
        // `layouts` drops after this, destroying the pipeline and set layouts.
    }
}

/// The lengths whose plans stand for every sort through a binding of `capacity` (a CPU test
/// checks every n of small capacities): a plan changes with n where its stages do, at powers of
/// two, and where its tiles outnumber the multiprocessors, half of them or the merge workgroups.
pub(crate) fn sample_lengths(sizing: &Sizing, key: &KernelKey, capacity: u32) -> Vec<u32> {
    let top = ceil_log2(u64::from(capacity));
    let tile = u64::from(key.shape.geometry.tile());
    let multiprocessors = u64::from(sizing.limits.multiprocessors);
    let tile_counts = [multiprocessors / 2, multiprocessors, u64::from(sizing.merge_groups)];
    let mut lengths: Vec<u32> = (1..=top)
        .map(|level| 1u64 << level)
        .chain(tile_counts.iter().map(|t| t * tile))
        .flat_map(|edge| [edge.saturating_sub(1), edge, edge + 1])
        .chain([u64::from(capacity)])
        .filter(|&n| n >= 2 && n <= u64::from(capacity))
        .map(|n| n as u32)
        .collect();
    lengths.sort_unstable();
    lengths.dedup();
    lengths
}

/// The passes of a sort of n elements through kernels of `key`: a segment plan where
/// [`Sizing::segmented`] says, else the plan of global and local merges; every pass that may
/// loop capped at the merge workgroups ([`Plan::looping_passes`]).
pub(crate) fn plan_with(sizing: &Sizing, key: &KernelKey, n: u32, key_flags: u32) -> Result<Plan> {
    let (shape, width) = (&key.shape, key.width);
    let geometry = shape.geometry;
    let plan = if sizing.segmented(n, &geometry, shape.payload, width) {
        let runs = sizing.runs(n, &geometry, shape.payload, width);
        Plan::segmented_with_runs(n, geometry, key_flags, runs)?
    } else {
        Plan::new(n, geometry, key_flags)?
    };
    Ok(plan.looping_passes(sizing.merge_groups, |kind| sizing.loop_tiles(shape, width, kind)))
}

/// The pipelines the sorts through a binding of `key` and `capacity` run: those of the plans of
/// every [`sample_lengths`], a segment pass on its shape's pipeline where the shape is one of
/// [`segment_shapes`] and `has_source`, else on the plain build.
pub(crate) fn slots_with(
    sizing: &Sizing,
    key: &KernelKey,
    capacity: u32,
    shapes_of_capacity_only: bool,
    mut has_source: impl FnMut(Slot) -> Result<bool>,
) -> Result<BTreeSet<Slot>> {
    let shapes = if sizing.tuning.shaped_segments == Some(false) {
        Vec::new()
    } else {
        segment_shapes(sizing, key, capacity, shapes_of_capacity_only)?
    };
    let mut slots = BTreeSet::new();
    for n in sample_lengths(sizing, key, capacity) {
        for pass in &plan_with(sizing, key, n, 0)?.passes {
            let shaped = Slot::shaped(pass)
                .filter(|s| matches!(s, Slot::Shaped { dir, shape } if shapes.contains(&(*dir, *shape))));
            match shaped {
                Some(s) if slots.contains(&s) || has_source(s)? => slots.insert(s),
                _ => slots.insert(Slot::of(pass)),
            };
        }
    }
    Ok(slots)
}

/// The shapes (push constants `dir`, `shape`) of the segment passes of one coset per workgroup
/// in the sorts a binding of `capacity` may take: those of n = the capacity, and (unless
/// `capacity_only`) of every power of two from two tiles below it. A sort of another length whose
/// plan has a shape not among them runs that pass on the plain build.
fn segment_shapes(sizing: &Sizing, key: &KernelKey, capacity: u32, capacity_only: bool) -> Result<Vec<(u32, u32)>> {
    let tile_log2 = key.shape.geometry.tile_log2;
    let top = ceil_log2(u64::from(capacity));
    let lengths = if capacity_only { top..top } else { tile_log2 + 1..top };
    let mut shapes = Vec::new();
    for n in lengths.map(|level| 1u32 << level).chain([capacity]) {
        for pass in &plan_with(sizing, key, n, 0)?.passes {
            if let Some(Slot::Shaped { dir, shape }) = Slot::shaped(pass) {
                if !shapes.contains(&(dir, shape)) {
                    shapes.push((dir, shape));
                }
            }
        }
    }
    Ok(shapes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceLimits;
    use crate::network::Pass;

    fn limits(shared_memory: u32, multiprocessors: u32) -> DeviceLimits {
        DeviceLimits::for_tests(shared_memory, multiprocessors)
    }

    /// Whether `slots` holds what `pass` runs, as `Kernels::pass_pipeline` finds it.
    fn covered(slots: &BTreeSet<Slot>, pass: &Pass) -> bool {
        Slot::shaped(pass).is_some_and(|s| slots.contains(&s)) || slots.contains(&Slot::of(pass))
    }

    /// `bind` makes the pipelines of the sample lengths' plans and `record` makes none: every
    /// length up to the capacity must plan within them, at every threshold of the sizing rules
    /// (small tiles and few multiprocessors bring the thresholds down to lengths a test can sweep).
    #[test]
    fn the_pipelines_of_the_sample_lengths_serve_every_length_up_to_the_capacity() {
        let tunings = [
            Tuning { max_tile: Some(256), ..Tuning::default() },
            Tuning { max_tile: Some(128), merge_workgroups: Some(4), ..Tuning::default() },
            Tuning { max_tile: Some(256), segment_merges: Some(true), ..Tuning::default() },
            Tuning { max_tile: Some(256), shaped_segments: Some(true), ..Tuning::default() },
        ];
        let devices = [(limits(32 << 10, 0), true), (limits(48 << 10, 6), false), (limits(16 << 10, 3), false)];
        let mut checked = 0u64;
        for tuning in tunings {
            for (limits, cpu) in devices {
                let sizing = Sizing::new(tuning, limits, cpu, true).expect("a valid sizing");
                for (payload, width) in [
                    (Payload::Keys, KeyWidth::Bits32),
                    (Payload::Pairs, KeyWidth::Bits64),
                    (Payload::Pairs, KeyWidth::Bits32),
                ] {
                    for capacity in [2, 255, 257, 1000, 4096, 6000] {
                        let shape = sizing.binding(payload, width, capacity, false).expect("a binding shape");
                        let key = KernelKey { shape, width, batched: false, counted: false };
                        for capacity_only in [false, true] {
                            for sources in [true, false] {
                                let slots =
                                    slots_with(&sizing, &key, capacity, capacity_only, |_| Ok(sources)).expect("slots");
                                for n in 2..=capacity {
                                    for flags in [0, key_flags(KeyKind::F32, Order::Descending)] {
                                        let plan = plan_with(&sizing, &key, n, flags).expect("a plan");
                                        let pass = plan.passes.iter().find(|p| !covered(&slots, p));
                                        assert!(
                                            pass.is_none(),
                                            "n = {n} of a binding of {capacity} ({payload:?}, {width:?}, {tuning:?}, \
                                             {limits:?}) runs {:?}, not made: {slots:?}",
                                            pass.map(Slot::of)
                                        );
                                        checked += 1;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000, "the sweep ran: {checked} plans");
    }

    #[test]
    fn a_small_binding_makes_its_tile_sort_alone() {
        let sizing = Sizing::new(Tuning::default(), limits(48 << 10, 132), false, true).expect("a valid sizing");
        let shape = sizing.binding(Payload::Keys, KeyWidth::Bits32, 1024, false).expect("a binding shape");
        let key = KernelKey { shape, width: KeyWidth::Bits32, batched: false, counted: false };
        let slots = slots_with(&sizing, &key, 1024, false, |_| Ok(true)).expect("slots");
        assert_eq!(slots.into_iter().collect::<Vec<_>>(), [Slot::TileSort { looping: false }]);
    }
}
