//! The standalone sorter: host slices in, sorted host slices out. It is built on the embedding
//! path: a [`SortRecorder`] of its own on the context's device makes the pipelines and records
//! the passes through one [`SortBinding`] over the sorter's device buffers, exactly as a renderer's
//! sorts are recorded. Around that it owns a command buffer, a fence, timestamp queries and
//! buffers that grow as needed and are reused across calls.

use std::time::Duration;

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use crate::abi::{KeyWidth, Payload};
use crate::context::{Context, Shared};
use crate::device::DeviceLimits;
use crate::error::{Error, Result};
use crate::gpu::record::{self, PassBarrier};
use crate::keys::{from_image, key_flags, to_image, KeyKind, Order, SortKey, StableKey};
use crate::network::{pass_count, Plan};
use crate::recorder::{BindDesc, BufferRegion, Extras, RecorderDesc, SortBinding, SortRecorder};
use crate::tuning::{check_size, max_elements, Tuning, MAX_ELEMENTS};

/// How to create a [`Sorter`]. Start from `SorterDesc::default()` and set what you use.
#[derive(Clone, Debug, Default)]
pub struct SorterDesc {
    /// The knobs; the defaults are where they measured fastest.
    pub tuning: Tuning,
    /// How long to wait for the GPU to finish one sort (default two minutes).
    pub timeout: Option<Duration>,
    /// Write a timestamp after every pass and report each pass's GPU time in
    /// [`SortStats::pass_times`]. Costs a little time per pass; off by default.
    pub pass_timestamps: bool,
    /// Where the GPU time of `Sorter::time_repeated` and `Sorter::study` starts: by default
    /// (false) at the end of an empty compute dispatch recorded after the input's copy into
    /// place, standing for the pass that wrote the keys in a renderer, so that the time holds a
    /// compute-to-compute barrier before the first pass as every later pass does; with true, at
    /// the end of the copy itself, holding the transfer-to-compute barrier instead.
    #[cfg(feature = "study")]
    pub time_from_transfer: bool,
    /// Test hooks.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub hooks: Hooks,
}

/// What tests set to reach paths that real sizes reach only on large inputs, or to prove that the
/// tests can fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
pub struct Hooks {
    /// Caps the workgroups per dispatch below the device's `maxComputeWorkGroupCount[0]`, so that
    /// the split-dispatch path can be exercised at small sizes.
    pub max_workgroups_per_dispatch: Option<u32>,
    /// Leaves out the barrier before this pass: the sort is then wrong on real GPUs.
    pub drop_barrier_before_pass: Option<usize>,
    /// Plans for a smaller class of device than this one ([`crate::device::DeviceProfile`]).
    pub profile: Option<crate::device::DeviceProfile>,
    /// Refuses pipelines of workgroups of more invocations than this, as a small GPU's driver
    /// does (`RecorderDesc::refuse_workgroups_above`).
    pub refuse_workgroups_above: Option<u32>,
}

impl SorterDesc {
    /// The test hooks, or none in a build without them.
    pub(crate) fn hooks(&self) -> Hooks {
        #[cfg(feature = "test-hooks")]
        return self.hooks;
        #[cfg(not(feature = "test-hooks"))]
        Hooks::default()
    }
}

/// What one sort did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SortStats {
    /// Elements sorted.
    pub n: usize,
    /// Passes recorded (0 when n < 2: nothing to do).
    pub passes: usize,
    /// GPU time from the start of the first pass to the end of the last, from timestamp queries;
    /// `None` where the queue has no timestamps or nothing ran.
    pub gpu_time: Option<Duration>,
    /// With [`SorterDesc::pass_timestamps`], the GPU time of each pass (from the end of the one
    /// before); empty otherwise.
    pub pass_times: Vec<Duration>,
}

/// A buffer and its memory.
pub(crate) struct Buffer {
    raw: vk::Buffer,
    allocation: Option<Allocation>,
    size: u64,
}

/// A Vulkan error of a call that makes a buffer: out of device or host memory is
/// [`Error::OutOfMemory`] naming the buffer (drivers may refuse a buffer larger than their heap
/// at creation, before any allocation), anything else the call's error.
fn out_of_memory(e: vk::Result, what: &'static str, bytes: u64, call: &'static str) -> Error {
    match e {
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
            Error::OutOfMemory { what, bytes }
        }
        e => Error::vk(call)(e),
    }
}

impl Buffer {
    pub(crate) fn new(
        shared: &Shared,
        what: &'static str,
        size: u64,
        usage: vk::BufferUsageFlags,
        location: MemoryLocation,
    ) -> Result<Buffer> {
        let device = &shared.device;
        let info = vk::BufferCreateInfo::default().size(size).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: `info` is complete; size is non-zero and within maxStorageBufferRange (checked
        // by the sorter before any buffer is made).
        let raw =
            unsafe { device.create_buffer(&info, None) }.map_err(|e| out_of_memory(e, what, size, "vkCreateBuffer"))?;
        // SAFETY: `raw` was just created on this device.
        let requirements = unsafe { device.get_buffer_memory_requirements(raw) };
        let allocation = shared.allocator().allocate(&AllocationCreateDesc {
            name: what,
            requirements,
            location,
            linear: true,
            allocation_scheme: AllocationScheme::GpuAllocatorManaged,
        });
        let mut buffer = Buffer { raw, allocation: None, size };
        match allocation {
            Ok(a) => buffer.allocation = Some(a),
            Err(e) => {
                buffer.destroy(shared);
                return Err(Error::alloc(what, size)(e));
            }
        }
        // SAFETY: the memory handle is only used to bind this buffer; the allocation, which owns
        // it, outlives the buffer (both are released together in `destroy`).
        let memory = buffer.allocation.as_ref().map(|a| (unsafe { a.memory() }, a.offset())).unwrap_or_default();
        // SAFETY: the allocation satisfies the buffer's requirements (the allocator was given them)
        // and is bound once, before any use.
        if let Err(e) = unsafe { device.bind_buffer_memory(raw, memory.0, memory.1) } {
            buffer.destroy(shared);
            return Err(out_of_memory(e, what, size, "vkBindBufferMemory"));
        }
        Ok(buffer)
    }

    pub(crate) fn mapped(&mut self) -> Result<&mut [u8]> {
        self.allocation.as_mut().and_then(|a| a.mapped_slice_mut()).ok_or(Error::Allocation {
            what: "staging",
            source: gpu_allocator::AllocationError::FailedToMap("not host-visible".into()),
        })
    }

    pub(crate) fn destroy(&mut self, shared: &Shared) {
        // SAFETY: the buffer was created on this device and no submitted work uses it any more
        // (the sorter waits for its fence before replacing or dropping buffers).
        unsafe { shared.device.destroy_buffer(self.raw, None) };
        if let Some(a) = self.allocation.take() {
            // Freeing can only fail for an allocation of another allocator; nothing to recover.
            let _ = shared.allocator().free(a);
        }
    }
}

/// Sorts host slices on the GPU. Pipelines, command buffer and buffers are made once and reused;
/// the buffers grow to the largest input seen.
pub struct Sorter {
    // Field order is drop order: the probes and the recorder's pipelines go before `ctx`, which may
    // hold the last reference to the device.
    #[cfg(feature = "study")]
    pub(crate) probes: Option<crate::gpu::pipelines::Probes>,
    /// Makes the pipelines and records the passes, as for a renderer.
    pub(crate) recorder: SortRecorder,
    /// The binding over `keys` (and `values`), rebound before each sort; `None` before the first.
    pub(crate) binding: Option<SortBinding>,
    pub(crate) ctx: Context,
    pub(crate) desc: SorterDesc,
    pub(crate) max_groups: u32,
    pub(crate) timeout: Duration,
    pub(crate) pool: vk::CommandPool,
    pub(crate) cmd: vk::CommandBuffer,
    pub(crate) fence: vk::Fence,
    /// Whether the fence guards a submission not yet waited for (after a timeout).
    pub(crate) pending: bool,
    pub(crate) queries: vk::QueryPool,
    /// Queries in `queries`.
    pub(crate) query_capacity: u32,
    pub(crate) keys: Option<Buffer>,
    pub(crate) values: Option<Buffer>,
    pub(crate) staging_keys: Option<Buffer>,
    pub(crate) staging_values: Option<Buffer>,
    /// Device copies of the input for `Sorter::time_repeated`, made on first use.
    #[cfg(feature = "study")]
    pub(crate) pristine_keys: Option<Buffer>,
    #[cfg(feature = "study")]
    pub(crate) pristine_values: Option<Buffer>,
    /// The GPU-side count sorts take ([`Sorter::set_gpu_count`]), and the buffer it is written to.
    #[cfg(feature = "study")]
    pub(crate) gpu_count: Option<u32>,
    #[cfg(feature = "study")]
    pub(crate) count_buffer: Option<Buffer>,
}

impl std::fmt::Debug for Sorter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sorter").field("context", &self.ctx).field("desc", &self.desc).finish_non_exhaustive()
    }
}

pub(crate) const STORAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);
pub(crate) const STAGING: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::TRANSFER_SRC.as_raw() | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

impl Sorter {
    /// Creates a sorter on `ctx`.
    pub fn new(ctx: &Context, desc: &SorterDesc) -> Result<Sorter> {
        let shared = &ctx.shared;
        let device = &shared.device;
        // Validates the knobs before anything else is created.
        let recorder = Self::new_recorder(shared, desc)?;
        let limits = recorder.device_info().limits;
        let max_groups = match desc.hooks().max_workgroups_per_dispatch {
            Some(0) => {
                return Err(Error::InvalidOption {
                    name: "max_workgroups_per_dispatch",
                    value: "0".into(),
                    reason: "must be at least 1",
                })
            }
            Some(cap) => cap.min(limits.max_compute_work_group_count_x),
            None => limits.max_compute_work_group_count_x,
        };
        let mut sorter = Sorter {
            #[cfg(feature = "study")]
            probes: None,
            recorder,
            binding: None,
            ctx: ctx.clone(),
            desc: desc.clone(),
            max_groups,
            timeout: desc.timeout.unwrap_or(Duration::from_secs(120)),
            pool: vk::CommandPool::null(),
            cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            pending: false,
            queries: vk::QueryPool::null(),
            query_capacity: 0,
            keys: None,
            values: None,
            staging_keys: None,
            staging_values: None,
            #[cfg(feature = "study")]
            pristine_keys: None,
            #[cfg(feature = "study")]
            pristine_values: None,
            #[cfg(feature = "study")]
            gpu_count: None,
            #[cfg(feature = "study")]
            count_buffer: None,
        };
        let info = vk::CommandPoolCreateInfo::default().queue_family_index(shared.queue_family);
        // Each creation below: `device` is live and the info is complete; every handle is stored
        // in `sorter` at once, so its Drop destroys it if a later step fails.
        // SAFETY: see above.
        sorter.pool = unsafe { device.create_command_pool(&info, None) }.map_err(Error::vk("vkCreateCommandPool"))?;
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(sorter.pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: see above.
        sorter.cmd =
            unsafe { device.allocate_command_buffers(&info) }.map_err(Error::vk("vkAllocateCommandBuffers"))?[0];
        // SAFETY: see above.
        sorter.fence = unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(Error::vk("vkCreateFence"))?;
        if limits.timestamp_valid_bits > 0 {
            // Room for per-pass timestamps: one query before the first pass and one after each, for
            // the most passes any sort takes (the smallest tile, no fusion, the largest n).
            let capacity = 1 + pass_count(MAX_ELEMENTS, 1, 1) as u32;
            let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(capacity);
            // SAFETY: see above.
            sorter.queries =
                unsafe { device.create_query_pool(&info, None) }.map_err(Error::vk("vkCreateQueryPool"))?;
            sorter.query_capacity = capacity;
        }
        Ok(sorter)
    }

    /// Turns per-pass timestamps ([`SorterDesc::pass_timestamps`]) on or off for later sorts,
    /// keeping the sorter's buffers: a second sorter would place its buffers elsewhere.
    pub fn set_pass_timestamps(&mut self, on: bool) {
        self.desc.pass_timestamps = on;
    }

    /// Changes how long later calls wait for the GPU (see [`SorterDesc::timeout`]). After a
    /// [`Error::Timeout`] the submission stays pending and its resources alive; the next call
    /// waits for it first, with this timeout.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The context this sorter runs on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The most 4-byte keys one call can sort on this device (8-byte keys: see
    /// [`Sorter::max_elements_of`]).
    pub fn max_elements(&self) -> u64 {
        max_elements(&self.recorder.device_info().limits, KeyWidth::Bits32)
    }

    /// The most keys of this kind one call can sort on this device.
    pub fn max_elements_of(&self, kind: KeyKind) -> u64 {
        max_elements(&self.recorder.device_info().limits, kind.width())
    }

    /// Whether a sort of `n` pairs of `kind` keys takes tiles that hold 16-bit origins in place
    /// of the values ([`Tuning::tile_origins`]).
    pub fn tile_origins(&self, n: usize, kind: KeyKind) -> Result<bool> {
        self.check_size(n, kind.width())?;
        Ok(self.recorder.binding_shape(true, kind.width(), n as u32)?.payload == Payload::PairsOrigins)
    }

    /// The passes a sort of `n` elements records.
    #[cfg(any(feature = "study", feature = "test-hooks"))]
    pub(crate) fn plan(&self, n: usize, pairs: bool, kind: KeyKind, order: Order) -> Result<Plan> {
        self.check_size(n, kind.width())?;
        self.recorder.plan_of(pairs, kind, order, n as u32)
    }

    /// Sorts `keys` in place.
    pub fn sort<K: SortKey>(&mut self, keys: &mut [K], order: Order) -> Result<SortStats> {
        self.run(bytemuck::cast_slice_mut(keys), None, K::KIND, order)
    }

    /// Sorts `keys` in place and moves `values[i]` with `keys[i]`. Equal keys may come out in any
    /// order; [`Sorter::sort_pairs_stable`] keeps them in input order.
    pub fn sort_pairs<K: SortKey>(&mut self, keys: &mut [K], values: &mut [u32], order: Order) -> Result<SortStats> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch { keys: keys.len(), values: values.len() });
        }
        self.run(bytemuck::cast_slice_mut(keys), Some(values), K::KIND, order)
    }

    /// Sorts `keys` in place and moves `values[i]` with `keys[i]`, stably: equal keys keep the
    /// order they had (in both orders). Each key's order image is packed with its index into an
    /// 8-byte key on the host and sorted on the GPU with the values, so a stable sort moves 12
    /// bytes per element instead of 8 and needs 8 more bytes per element of host memory. Keys
    /// alone need no stable sort: equal keys are the same bits.
    pub fn sort_pairs_stable<K: StableKey>(
        &mut self,
        keys: &mut [K],
        values: &mut [u32],
        order: Order,
    ) -> Result<SortStats> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch { keys: keys.len(), values: values.len() });
        }
        self.check_size(keys.len(), KeyWidth::Bits64)?;
        let flags = key_flags(K::KIND, order);
        let bits: &[u32] = bytemuck::cast_slice(keys);
        // Ascending by (image, index): the image already carries the order.
        let mut packed: Vec<u64> =
            bits.iter().enumerate().map(|(i, &b)| u64::from(to_image(b, flags)) << 32 | i as u64).collect();
        let stats = self.run(bytemuck::cast_slice_mut(&mut packed), Some(values), KeyKind::U64, Order::Ascending)?;
        let bits: &mut [u32] = bytemuck::cast_slice_mut(keys);
        for (b, p) in bits.iter_mut().zip(&packed) {
            *b = from_image((p >> 32) as u32, flags);
        }
        Ok(stats)
    }

    /// The sorter's recorder: one binding, rebound for every sort (the sorter waits for each sort
    /// before the next), with the shapes of each binding's capacity alone (it binds for each
    /// sort's length). Context::new enables shaderInt16 wherever the device offers it.
    pub(crate) fn new_recorder(shared: &Shared, desc: &SorterDesc) -> Result<SortRecorder> {
        let recorder_desc = RecorderDesc {
            max_bindings: 1,
            pipeline_cache: shared.pipeline_cache.cache,
            shader_int16: shared.info.shader_int16,
            full_subgroups: shared.info.full_subgroups,
            tuning: desc.tuning,
            #[cfg(feature = "test-hooks")]
            profile: desc.hooks.profile,
            #[cfg(feature = "test-hooks")]
            refuse_workgroups_above: desc.hooks.refuse_workgroups_above,
        };
        let mut recorder = SortRecorder::with_info(&shared.device, shared.info.clone(), &recorder_desc)?;
        recorder.shape_capacity_only();
        Ok(recorder)
    }

    pub(crate) fn check_size(&self, n: usize, width: KeyWidth) -> Result<()> {
        check_size(&self.recorder.device_info().limits, n, width)
    }

    /// Points the sorter's binding at its device buffers for a sort of n elements (keys of
    /// `width`, values with `pairs`), making the pipelines for it on first use. The recorder sizes
    /// the tiles for the capacity, which is n (`tuning::Sizing::binding`).
    pub(crate) fn bind(&mut self, pairs: bool, width: KeyWidth, n: usize) -> Result<()> {
        let region = |slot: &Option<Buffer>, bytes: u64| BufferRegion { buffer: raw(slot), offset: 0, size: bytes };
        #[allow(unused_mut)]
        let mut desc = BindDesc {
            keys: region(&self.keys, n as u64 * u64::from(width.bytes())),
            values: pairs.then(|| region(&self.values, n as u64 * 4)),
            capacity: n as u32,
            key_width: width,
            ..BindDesc::default()
        };
        #[cfg(feature = "study")]
        if self.gpu_count.is_some() {
            let shared = self.ctx.shared.clone();
            Self::ensure(&shared, &mut self.count_buffer, "count", 16, STORAGE, MemoryLocation::GpuOnly)?;
            desc.count = Some(region(&self.count_buffer, 4));
        }
        match &mut self.binding {
            // SAFETY: no command buffer of this sorter is pending (callers settle first, and every
            // submission is waited for) or recording, so none uses the set.
            Some(binding) => unsafe { self.recorder.rebind(binding, &desc) },
            None => {
                self.binding = Some(self.recorder.bind(&desc)?);
                Ok(())
            }
        }
    }

    /// The binding made by `bind`.
    pub(crate) fn binding(&self) -> &SortBinding {
        match &self.binding {
            Some(b) => b,
            None => unreachable!("`bind` runs before anything is recorded"),
        }
    }

    /// Fails at once on a lost device; waits for a submission left pending by an earlier timeout.
    pub(crate) fn settle(&mut self) -> Result<()> {
        if self.ctx.shared.is_lost() {
            return Err(Error::DeviceLost { call: "an earlier call (the device stays lost)" });
        }
        if self.pending {
            self.wait()?;
        }
        Ok(())
    }

    pub(crate) fn wait(&mut self) -> Result<()> {
        let device = &self.ctx.shared.device;
        let nanos = u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: the fence belongs to this device.
        match unsafe { device.wait_for_fences(&[self.fence], true, nanos) } {
            Ok(()) => {
                self.pending = false;
                // SAFETY: the fence is signalled and no submission uses it any more.
                unsafe { device.reset_fences(&[self.fence]) }.map_err(Error::vk("vkResetFences"))
            }
            Err(vk::Result::TIMEOUT) => Err(Error::Timeout(self.timeout)),
            Err(e) => Err(self.ctx.shared.note(Error::vk("vkWaitForFences")(e))),
        }
    }

    /// Makes `slot` at least `bytes` long; returns whether it was replaced.
    pub(crate) fn ensure(
        shared: &Shared,
        slot: &mut Option<Buffer>,
        what: &'static str,
        bytes: u64,
        usage: vk::BufferUsageFlags,
        location: MemoryLocation,
    ) -> Result<()> {
        if slot.as_ref().is_some_and(|b| b.size >= bytes) {
            return Ok(());
        }
        if let Some(mut old) = slot.take() {
            old.destroy(shared);
        }
        *slot = Some(Buffer::new(shared, what, bytes, usage, location)?);
        Ok(())
    }

    /// Sorts keys given as 4-byte words (two per key for 8-byte kinds).
    fn run(&mut self, keys: &mut [u32], values: Option<&mut [u32]>, kind: KeyKind, order: Order) -> Result<SortStats> {
        let n = keys.len() / words_per_key(kind.width());
        if let Some(v) = &values {
            if v.len() != n {
                return Err(Error::LengthMismatch { keys: n, values: v.len() });
            }
        }
        if n < 2 {
            return Ok(SortStats { n, ..SortStats::default() });
        }
        self.check_size(n, kind.width())?;
        self.settle()?;
        self.stage_input(keys, values.as_deref(), kind.width())?;
        let plan = self.recorder.plan(self.binding(), n as u32, 1, kind, order)?;
        self.record(&plan, kind.width())?;
        self.finish()?;
        let (gpu_time, pass_times) = self.gpu_times(plan.passes.len())?;
        self.read_back(keys, values)?;
        Ok(SortStats { n, passes: plan.passes.len(), gpu_time, pass_times })
    }

    /// Makes the device and staging buffers hold the input (`keys` as 4-byte words, values with
    /// pairs), writes it to staging, and binds the device buffers for a sort of all of it.
    pub(crate) fn stage_input(&mut self, keys: &[u32], values: Option<&[u32]>, width: KeyWidth) -> Result<()> {
        let n = keys.len() / words_per_key(width);
        let (key_bytes, value_bytes) = (keys.len() as u64 * 4, n as u64 * 4);
        let shared = self.ctx.shared.clone();
        Self::ensure(&shared, &mut self.keys, "keys", key_bytes, STORAGE, MemoryLocation::GpuOnly)?;
        Self::ensure(&shared, &mut self.staging_keys, "staging keys", key_bytes, STAGING, MemoryLocation::GpuToCpu)?;
        if values.is_some() {
            Self::ensure(&shared, &mut self.values, "values", value_bytes, STORAGE, MemoryLocation::GpuOnly)?;
            Self::ensure(
                &shared,
                &mut self.staging_values,
                "staging values",
                value_bytes,
                STAGING,
                MemoryLocation::GpuToCpu,
            )?;
        }
        if let Some(staging) = self.staging_keys.as_mut() {
            staging.mapped()?[..key_bytes as usize].copy_from_slice(bytemuck::cast_slice(keys));
        }
        if let (Some(v), Some(staging)) = (values, self.staging_values.as_mut()) {
            staging.mapped()?[..value_bytes as usize].copy_from_slice(bytemuck::cast_slice(v));
        }
        self.bind(values.is_some(), width, n)
    }

    /// Reads a finished sort's result back from staging.
    pub(crate) fn read_back(&mut self, keys: &mut [u32], values: Option<&mut [u32]>) -> Result<()> {
        if let Some(staging) = self.staging_keys.as_mut() {
            keys.copy_from_slice(bytemuck::cast_slice(&staging.mapped()?[..keys.len() * 4]));
        }
        if let (Some(v), Some(staging)) = (values, self.staging_values.as_mut()) {
            let bytes = v.len() * 4;
            v.copy_from_slice(bytemuck::cast_slice(&staging.mapped()?[..bytes]));
        }
        Ok(())
    }

    /// Resets the command pool and begins the sorter's command buffer.
    pub(crate) fn begin(&self) -> Result<()> {
        let device = &self.ctx.shared.device;
        // SAFETY: the command buffer is not pending (every submission is waited for).
        unsafe { device.reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty()) }
            .map_err(Error::vk("vkResetCommandPool"))?;
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the command buffer was just reset.
        unsafe { device.begin_command_buffer(self.cmd, &begin) }.map_err(Error::vk("vkBeginCommandBuffer"))
    }

    /// Ends the command buffer begun by `begin`, submits it and waits for it.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.end_and_submit()?;
        self.wait()
    }

    /// Ends the command buffer begun by `begin` and submits it.
    fn end_and_submit(&mut self) -> Result<()> {
        // SAFETY: recording was begun by `begin`.
        unsafe { self.ctx.shared.device.end_command_buffer(self.cmd) }.map_err(Error::vk("vkEndCommandBuffer"))?;
        self.submit()
    }

    /// As [`finish`](Self::finish), but polls the fence instead of sleeping in
    /// `vkWaitForFences`: the submit-per-pass study times each pass's round trip, and a sleeping
    /// wait adds the host's wake-up, which varies from run to run, to every pass.
    #[cfg(feature = "study")]
    pub(crate) fn finish_polling(&mut self) -> Result<()> {
        self.end_and_submit()?;
        let start = std::time::Instant::now();
        loop {
            // SAFETY: the fence belongs to this device.
            match unsafe { self.ctx.shared.device.get_fence_status(self.fence) } {
                Ok(true) => break,
                Ok(false) if start.elapsed() < self.timeout => std::hint::spin_loop(),
                Ok(false) => return Err(Error::Timeout(self.timeout)),
                Err(e) => return Err(self.ctx.shared.note(Error::vk("vkGetFenceStatus")(e))),
            }
        }
        // The fence is signalled: this returns at once, resetting it.
        self.wait()
    }

    /// The first `count` timestamps, written by the submissions waited for since they were reset.
    pub(crate) fn read_ticks(&self, count: usize) -> Result<Vec<u64>> {
        let mut ticks = vec![0u64; count];
        // SAFETY: the caller's submissions (this one or an earlier, completed one) reset these
        // queries and wrote them, and every one of them was waited for.
        unsafe {
            self.ctx.shared.device.get_query_pool_results(
                self.queries,
                0,
                &mut ticks,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(Error::vk("vkGetQueryPoolResults"))?;
        Ok(ticks)
    }

    /// Records one sort: upload, every pass of `plan`, download, with timestamps where the queue
    /// has them.
    pub(crate) fn record(&self, plan: &Plan, width: KeyWidth) -> Result<()> {
        self.begin()?;
        let device = &self.ctx.shared.device;
        let cmd = self.cmd;
        let pairs = self.binding().pairs();
        let bytes = (u64::from(plan.n) * u64::from(width.bytes()), u64::from(plan.n) * 4);
        let (k, sk, v, sv) = (raw(&self.keys), raw(&self.staging_keys), raw(&self.values), raw(&self.staging_values));
        let timed = self.queries != vk::QueryPool::null();
        if timed {
            // One query before the first pass, and one after the last or after each.
            let used = if self.desc.pass_timestamps { 1 + plan.passes.len() as u32 } else { 2 };
            record::reset_queries(device, cmd, self.queries, used);
        }
        // Host writes to staging are visible to transfers at submission; no barrier needed before.
        record::copy(device, cmd, &copies(pairs, bytes, (sk, k), (sv, v)));
        #[cfg(feature = "study")]
        self.write_count(cmd);
        if timed {
            record::timestamp(device, cmd, vk::PipelineStageFlags::TRANSFER, self.queries, 0);
        }
        record::input_barrier(device, cmd);
        let per_pass = timed && self.desc.pass_timestamps;
        let extras = Extras {
            pass_timestamps: per_pass.then_some((self.queries, 1)),
            barrier: PassBarrier::Memory,
            max_groups: Some(self.max_groups),
            drop_barrier_before_pass: self.desc.hooks().drop_barrier_before_pass,
        };
        // SAFETY: `cmd` is recording (begun above), outside a render pass, on the compute queue;
        // the binding, its buffers and the recorder outlive the submission, which `finish` waits
        // for.
        unsafe { self.recorder.record_plan(cmd, self.binding(), plan, 1, &extras) };
        if timed && !per_pass {
            record::timestamp(device, cmd, vk::PipelineStageFlags::COMPUTE_SHADER, self.queries, 1);
        }
        record::download(device, cmd, &copies(pairs, bytes, (k, sk), (v, sv)));
        Ok(())
    }

    pub(crate) fn submit(&mut self) -> Result<()> {
        let shared = &self.ctx.shared;
        let cmds = [self.cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        let queue = shared.queue();
        // SAFETY: the queue is locked for the call (external synchronisation); the command buffer
        // is fully recorded and the fence unsignalled.
        unsafe { shared.device.queue_submit(*queue, &submit, self.fence) }
            .map_err(|e| shared.note(Error::vk("vkQueueSubmit")(e)))?;
        self.pending = true;
        Ok(())
    }

    /// The whole sort's GPU time and, with per-pass timestamps, each pass's.
    fn gpu_times(&self, passes: usize) -> Result<(Option<Duration>, Vec<Duration>)> {
        if self.queries == vk::QueryPool::null() {
            return Ok((None, Vec::new()));
        }
        let limits = &self.recorder.device_info().limits;
        let per_pass = self.desc.pass_timestamps;
        let ticks = self.read_ticks(if per_pass { 1 + passes } else { 2 })?;
        let total = ticks_to_duration(ticks[0], ticks[ticks.len() - 1], limits);
        let pass_times = if per_pass {
            ticks.windows(2).map(|w| ticks_to_duration(w[0], w[1], limits)).collect()
        } else {
            Vec::new()
        };
        Ok((Some(total), pass_times))
    }
}

/// 4-byte words per key of this width.
pub(crate) fn words_per_key(width: KeyWidth) -> usize {
    width.bytes() as usize / 4
}

pub(crate) fn raw(slot: &Option<Buffer>) -> vk::Buffer {
    slot.as_ref().map_or(vk::Buffer::null(), |b| b.raw)
}

/// Copies from source to destination of the keys' bytes, and with `pairs` of the values' too.
pub(crate) fn copies(
    pairs: bool,
    (key_bytes, value_bytes): (u64, u64),
    keys: (vk::Buffer, vk::Buffer),
    values: (vk::Buffer, vk::Buffer),
) -> Vec<(vk::Buffer, vk::Buffer, u64)> {
    let mut list = vec![(keys.0, keys.1, key_bytes)];
    if pairs {
        list.push((values.0, values.1, value_bytes));
    }
    list
}

/// The time between two timestamps, masked to the queue's valid bits (so a wrap is harmless).
pub(crate) fn ticks_to_duration(start: u64, end: u64, limits: &DeviceLimits) -> Duration {
    let mask = if limits.timestamp_valid_bits >= 64 { u64::MAX } else { (1u64 << limits.timestamp_valid_bits) - 1 };
    Duration::from_nanos((((end.wrapping_sub(start)) & mask) as f64 * f64::from(limits.timestamp_period)) as u64)
}

impl Context {
    /// Test hook: makes and frees one device-local storage buffer of `bytes` by the path every
    /// buffer of the sorter takes, so that a test can ask for more memory than the device has.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn allocate_for_tests(&self, bytes: u64) -> Result<()> {
        Buffer::new(&self.shared, "a test buffer", bytes, STORAGE, MemoryLocation::GpuOnly)?.destroy(&self.shared);
        Ok(())
    }
}

impl Drop for Sorter {
    fn drop(&mut self) {
        let shared = self.ctx.shared.clone();
        let device = &shared.device;
        if self.pending {
            // SAFETY: the fence belongs to this device. Whatever the outcome (a lost device
            // signals nothing), the objects below are destroyed: waiting longer could hang.
            let _ = unsafe { device.wait_for_fences(&[self.fence], true, u64::MAX) };
        }
        for slot in [
            &mut self.keys,
            &mut self.values,
            &mut self.staging_keys,
            &mut self.staging_values,
            #[cfg(feature = "study")]
            &mut self.pristine_keys,
            #[cfg(feature = "study")]
            &mut self.pristine_values,
            #[cfg(feature = "study")]
            &mut self.count_buffer,
        ] {
            if let Some(mut b) = slot.take() {
                b.destroy(&shared);
            }
        }
        #[cfg(feature = "study")]
        {
            self.probes = None;
        }
        // SAFETY: no submission of this sorter is pending (waited above); each handle was created
        // on this device by `new`, or is null, which the destroy calls ignore. The recorder (the
        // pipelines, layouts and descriptor pool) drops after this, before `ctx`.
        unsafe {
            device.destroy_query_pool(self.queries, None);
            device.destroy_fence(self.fence, None);
            device.destroy_command_pool(self.pool, None);
        }
    }
}
