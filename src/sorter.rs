//! The standalone sorter: host slices in, sorted host slices out. It is built on the embedding
//! path: a [`SortRecorder`] of its own on the context's device makes the pipelines and records
//! the passes through one [`SortBinding`] over the sorter's device buffers, exactly as a renderer's
//! sorts are recorded. Around that it owns a command buffer, a fence, timestamp queries and
//! buffers that grow as needed and are reused across calls.

use std::time::{Duration, Instant};

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use crate::context::{Context, DeviceType, Shared};
use crate::embed::{BindDesc, BufferRegion, Extras, RecorderDesc, SortBinding, SortRecorder};
use crate::error::{Error, Result};
use crate::keys::{from_image, key_flags, to_image, KeyKind, KeyWidth, Order, SortKey, StableKey};
use crate::pipelines::{KernelOptions, Probes};
use crate::plan::{pass_count, Plan, MAX_ELEMENTS};
use crate::push::PushConstants;
use crate::record::{self, BarrierFlavor, Encoder as _, PassBarrier};
use crate::shaders::{Build, Payload, Variant};
use crate::timing::WarmUp;

/// How to create a [`Sorter`].
#[derive(Clone, Debug, Default)]
pub struct SorterDesc {
    /// Caps the elements per tile of the local kernels (a power of two, at least 2). Smaller tiles
    /// mean more global passes; tests use it to reach those passes at small sizes.
    pub max_tile: Option<u32>,
    /// Caps the substages fused in registers per global pass (1..=6; by default 6 for 4-byte keys
    /// alone, which take 6 only in sorts of at least `plan::FUSED6_MIN_TILES` tiles, else 5) and per
    /// shared-memory chunk of the local kernels (whatever the cap, at most 5 for 4-byte keys alone
    /// in tiles of 8192 or more, 3 in sorts of up to 2^15 elements and for 4-byte keys alone in
    /// segment tiles of 2048, else 4). 1 runs one substage per global pass, as NVIDIA's CUDA
    /// sample does.
    pub max_fused_substages: Option<u32>,
    /// Invocations per workgroup of the local kernels (a power of two); by default a quarter of
    /// the tile, at most 512 with 4-byte keys and 1024 with 8-byte keys, capped by the device. A
    /// tuning knob for `bench`.
    pub local_workgroup_size: Option<u32>,
    /// Substages per shared-memory chunk of the local kernels (1..=5) instead of the default (see
    /// `max_fused_substages`), whatever `max_fused_substages` says. A tuning knob for `bench`.
    pub local_chunk_substages: Option<u32>,
    /// The most workgroups of the tile sort, of a local merge without windows and of a segment
    /// pass. Where a sort has more tiles (cosets), each workgroup loops over several and loads the
    /// next while it works on this one. By default the device's multiprocessors where it reports
    /// them (`VK_NV_shader_sm_builtins`), else one tile per workgroup; `Some(0)` always takes one
    /// tile per workgroup. On a CPU device a pass takes more workgroups where one would loop over
    /// more tiles than the driver's loops allow (`plan::CPU_LOOP_LIMIT`). A tuning knob for
    /// `bench`.
    pub merge_workgroups: Option<u32>,
    /// Plan every pass after the tile sort as a segment pass ([`crate::plan::Plan::segmented`]): a
    /// run of substages that may cross a stage boundary, on cosets of a tile's size in shared
    /// memory, about one pass per log2(tile) substages instead of two or more per stage.
    /// `Some(true)` always, `Some(false)` never; by default where they paid on the H100
    /// ([`crate::plan::segments_pay`]: on a device that reports its multiprocessors, sorts of 3 to
    /// one tile per multiprocessor with small tiles or more tiles than half the multiprocessors,
    /// and sorts of more tiles than multiprocessors, of at least 4096, where the segment passes
    /// loop over cosets (`merge_workgroups` not 0) or the elements are 8-byte keys with values).
    /// Where segments may be used (not `Some(false)`), a sort that fits 3 to one tile per
    /// multiprocessor gets the smallest such tile from 2048 elements up
    /// ([`crate::plan::segment_tile`]), so that each segment pass has a workgroup on as many
    /// multiprocessors as it can.
    pub segment_merges: Option<bool>,
    /// Elements of the low run a segment pass carries uncompared where it starts with a stage's
    /// flip or inside its strides of a tile and more, so that it moves runs of that many
    /// consecutive elements (a power of two, at least 2; capped at half the tile). Alone, every
    /// such pass carries this run; with [`SorterDesc::segment_run_long`], this is the short run.
    /// By default ([`crate::plan::segment_runs`]), in sorts of more tiles than multiprocessors,
    /// 16 for 4-byte keys where that adds no pass and for 4-byte keys with values whatever it
    /// adds; else 8. A tuning knob for `bench`.
    pub segment_run: Option<u32>,
    /// The long run (a power of two, at least `segment_run`, 8 where that is unset): each segment
    /// pass that carries a run then carries `segment_run` or this, this one wherever that adds no
    /// pass to the sort (never the default: on the H100 it did not pay, see
    /// [`crate::plan::segment_runs`]). A tuning knob for `bench`.
    pub segment_run_long: Option<u32>,
    /// Run segment passes of one coset per workgroup on a pipeline made for their shape (the
    /// SHAPED build of segment_merge: its shape and its chain of chunks as specialization
    /// constants, so that the driver compiles every stride and branch as a literal) instead of
    /// the build that reads the shape from the push constants. `None` (the default): the shapes
    /// whose chain of chunks has a module of its own, every chunk's kind and size a literal that
    /// spirv-opt optimises: in tiles of 2048, 4-byte keys alone with local chunks of 4 or 3
    /// (sorts of 4097 to 132 x 2048 keys on the H100, where 2^16 keys went from 38.3 to 34.5 us
    /// on chunks of 4) and pairs with chunks of 3 (sorts of up to 2^15 pairs); docs/PERFORMANCE.md, lever table,
    /// "Segment passes on a module per chain" and the row after it); `Some(true)`:
    /// every shape, the others on a build that takes its chunks' kinds and sizes from
    /// specialization constants too (unoptimised: on the H100 it lost for pairs from 2^16 and for
    /// keys at 2^20); `Some(false)`: none. A pipeline per shape is made when a sort's length is
    /// first bound. A tuning knob for `bench`.
    pub shaped_segments: Option<bool>,
    /// Tiles of u32 pairs with 16-bit origins in place of their values, twice as many pairs a
    /// tile: `None` (the default) where only that tile gives a sort segment passes of one coset
    /// per workgroup, `Some(true)` always, `Some(false)` never; see
    /// [`crate::RecorderDesc::tile_origins`]. Needs the device's `shaderInt16` feature (an error
    /// with `Some(true)` where it is missing; never taken otherwise).
    pub tile_origins: Option<bool>,
    /// Caps the workgroups per dispatch below the device's `maxComputeWorkGroupCount[0]`, so that
    /// the split-dispatch path can be exercised at small sizes.
    pub max_workgroups_per_dispatch: Option<u32>,
    /// How long to wait for the GPU to finish one sort (default two minutes).
    pub timeout: Option<Duration>,
    /// Write a timestamp after every pass and report each pass's GPU time in
    /// [`SortStats::pass_times`]. Costs a little time per pass; off by default.
    pub pass_timestamps: bool,
    /// Where the GPU time of [`Sorter::time_repeated`] and [`Sorter::study`] starts. By default
    /// (false) at the end of an empty compute dispatch recorded after the input's copy into
    /// place, standing for the pass that wrote the keys in an embedding renderer: the time then
    /// holds a compute-to-compute barrier before the first pass, as every later pass does. With
    /// true, at the end of the copy itself: the time then holds the transfer-to-compute barrier,
    /// which cost the H100 about 2.5 us more per sort.
    pub time_from_transfer: bool,
    /// Test-only: leave out the barrier before this pass. The sort is then wrong on real GPUs;
    /// this exists only to prove that the tests catch a missing barrier.
    #[doc(hidden)]
    pub drop_barrier_before_pass: Option<usize>,
}

impl SorterDesc {
    fn kernel_options(&self) -> KernelOptions {
        KernelOptions {
            max_tile: self.max_tile,
            max_fused: self.max_fused_substages,
            local_workgroup_size: self.local_workgroup_size,
            local_chunk: self.local_chunk_substages,
        }
    }
}

/// The most sorts [`Sorter::time_repeated`] times in one command buffer (two queries each).
const MAX_TIMED_REPS: u32 = 240;

/// Untimed copies at the head of the calibration's command buffer on a GPU, so that its probes
/// follow steady work rather than an idle GPU: about this long ...
const PROBE_LEAD: Duration = Duration::from_millis(300);
/// ... in at most this many copies (the most in a warm-up batch too).
const MAX_LEAD_COPIES: f64 = 8192.0;
/// Before that command buffer, on a GPU, the calibration runs copies in command buffers of about
/// this long (at most [`MAX_LEAD_COPIES`] copies, so shorter for small copies) until a copy's
/// time settles ([`WarmUp`]).
const PROBE_WARM_BATCH: Duration = Duration::from_millis(100);

/// Sorts of fewer than this many tiles of the largest size get smaller tiles.
const TILES_WANTED: usize = 32;
/// The smallest tile chosen for a small sort (an explicit `max_tile` may go lower). On the H100,
/// 2^16 keys took 93 us with 8192-element tiles and 72 us with 2048 (`bench --max-tile`).
const SMALLEST_SIZED_TILE: u32 = 2048;
/// The tile of sorts of at most this many elements. A sort of 2^10 elements in a tile of 2048 was
/// one partial tile, which then tested every bound: 17.3 us for keys on the H100, 13.0 us in a
/// tile of 1024. Each tile size is a set of pipelines kept for the life of the sorter, so small
/// sorts get this one size rather than n rounded up to a power of two (which compiled up to ten
/// sets for the sizes below 1024, and grew the soak test's memory as new sizes came).
const SMALL_SORT_TILE: u32 = 1024;

/// Substages per local chunk in sorts of up to [`SMALL_CHUNK_SORT`] elements (the default is 4, or
/// 5 for 4-byte keys alone in tiles of 8192): with 512 invocations, a tile of 1024 or 2048 runs
/// chunks of 3 on 128 or 256 of them where chunks of 4 keep only 64 or 128 busy. On the H100
/// (`bench --local-chunk 3` against the default, two runs each): 2^10 keys 12.3 -> 10.8 us, pairs
/// 16.3 -> 13.6 us; 2^11 keys 13.5 -> 13.0 us, pairs 18.1 -> 16.6 us; 2^13 keys 27.7 -> 27.0 us,
/// pairs 33.5 -> 32.5 us; 2^14 and 2^15 even; but 2^16 (32 tiles of 2048) 45.7 -> 47.8 us.
/// The kernels of these sorts also take the tile sort's SMALL build in tiles of 2048
/// ([`crate::pipelines::small_tile_sort`]), which is what carried the limit from 2^13 to 2^15.
const SMALL_SORT_CHUNK: u32 = 3;
/// The largest sort that takes [`SMALL_SORT_CHUNK`]: 2^15, sixteen tiles of 2048. With the SMALL
/// tile sort of 2048, on the H100 (`docs/figures/h100-ab-small-tile-sort-2048.txt`), 2^14 u32
/// keys took 26.5 / 26.3 us against 28.0 / 27.9 with chunks of 4 and the plain tile sort, pairs
/// 33.3 / 33.5 against 34.7 / 34.8, and 12000 keys 26.2 / 26.3 against 27.9 / 27.4; the SMALL
/// tile sort with chunks of 4 there tied with the plain one (2^14 keys 27.8 / 27.2 us against
/// 27.8 / 27.4 in an earlier call). Chunks of 3 with the SMALL tile sort against chunks of 4
/// (`docs/figures/h100-chunk-3-small-to-2e15.txt`, `bench --local-chunk 3` against the default,
/// two processes each): 20000 keys 38.4 / 39.0 -> 35.6 / 36.0 us, pairs 48.1 / 48.5 -> 44.1 / 44.4
/// us; 2^15 keys 37.5 / 37.8 -> 35.5 / 35.9 us, pairs 45.2 / 45.5 -> 44.0 / 44.1 us; but 40000
/// keys 37.9 / 37.9 -> 39.3 / 40.0 us, pairs 44.8 / 45.2 -> 48.7 / 48.6 us, and 2^16 keys 38.1 /
/// 38.6 -> 40.1 / 39.9 us, pairs 45.0 / 45.8 -> 48.4 / 48.4 us.
const SMALL_CHUNK_SORT: usize = 1 << 15;

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

/// The device's costs that the pass model is made of, measured by [`Sorter::calibrate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// Bytes read plus bytes written per second by a vec4 copy kernel over the calibration size.
    pub copy_bytes_per_second: f64,
    /// GPU time per empty dispatch in a chain with a compute-to-compute barrier after each.
    pub dispatch_and_barrier: Duration,
    /// GPU time per empty dispatch in a chain with no barriers.
    pub dispatch_alone: Duration,
    /// How long the copies ran before the probes until a copy's time had settled
    /// ([`crate::timing::WarmUp`], counted from the end of the first batch of copies; the lead in
    /// the probes' command buffer not included); zero on a CPU device.
    pub warm_up: Duration,
    /// What the first copy alone moved, before any warm-up: how far from settled the device was.
    pub cold_copy_bytes_per_second: f64,
}

impl Calibration {
    /// The time the pass model predicts for `passes` passes that each read and write
    /// `bytes_per_pass / 2` bytes: the bytes over the copy bandwidth plus a dispatch and a
    /// barrier per pass.
    pub fn predict(&self, passes: usize, bytes_per_pass: f64) -> Duration {
        let per_pass = bytes_per_pass / self.copy_bytes_per_second + self.dispatch_and_barrier.as_secs_f64();
        Duration::from_secs_f64(per_pass * passes as f64)
    }
}

/// How [`Sorter::study`] separates the passes of a sort. Every mode keeps every dependency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PassSync {
    /// Every pass in one command buffer, with a barrier of this flavour between consecutive passes
    /// (the sorter's own way, with [`BarrierFlavor::Memory`]).
    Barrier(BarrierFlavor),
    /// Each pass in a command buffer of its own, submitted and waited for with a fence before the
    /// next pass is recorded.
    SubmitPerPass,
    /// Every pass of a sort in one command buffer with the sorter's memory barrier between passes,
    /// each sort a submission of its own, waited for before the next sort is recorded: the way a
    /// renderer sorts once a frame, with the GPU idle between sorts while the host waits.
    SubmitPerSort,
}

/// What [`Sorter::study`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PassStudy {
    /// The passes each sort ran.
    pub plan: Plan,
    /// For each sort, each pass's GPU time: from the end of the pass before (for the first pass,
    /// from the end of the copy that put the input in place) to the end of the pass.
    pub pass_times: Vec<Vec<Duration>>,
    /// For each sort, the GPU time from the end of the input copy to the end of the last pass.
    pub totals: Vec<Duration>,
    /// For each sort, host time: with [`PassSync::SubmitPerPass`], from recording the first pass
    /// to the last pass's fence; with [`PassSync::SubmitPerSort`], its submission's
    /// submit-to-fence time (the first's includes the upload, the last's the download); with
    /// barriers, the whole batch's submit-to-fence time over the sorts in it (which includes the
    /// upload and download).
    pub wall: Vec<Duration>,
}

/// A buffer and its memory.
struct Buffer {
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
    fn new(
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

    fn mapped(&mut self) -> Result<&mut [u8]> {
        self.allocation.as_mut().and_then(|a| a.mapped_slice_mut()).ok_or(Error::Allocation {
            what: "staging",
            source: gpu_allocator::AllocationError::FailedToMap("not host-visible".into()),
        })
    }

    fn destroy(&mut self, shared: &Shared) {
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
    probes: Option<Probes>,
    /// Makes the pipelines and records the passes, as for a renderer (see `embed`).
    recorder: SortRecorder,
    /// The binding over `keys` (and `values`), rebound before each sort; `None` before the first.
    binding: Option<SortBinding>,
    ctx: Context,
    desc: SorterDesc,
    max_groups: u32,
    timeout: Duration,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// Whether the fence guards a submission not yet waited for (after a timeout).
    pending: bool,
    queries: vk::QueryPool,
    /// Queries in `queries`.
    query_capacity: u32,
    keys: Option<Buffer>,
    values: Option<Buffer>,
    staging_keys: Option<Buffer>,
    staging_values: Option<Buffer>,
    /// Device copies of the input for [`Sorter::time_repeated`], made on first use.
    pristine_keys: Option<Buffer>,
    pristine_values: Option<Buffer>,
}

impl std::fmt::Debug for Sorter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sorter").field("context", &self.ctx).field("desc", &self.desc).finish_non_exhaustive()
    }
}

const STORAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);
const STAGING: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::TRANSFER_SRC.as_raw() | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

impl Sorter {
    /// Creates a sorter on `ctx`.
    pub fn new(ctx: &Context, desc: &SorterDesc) -> Result<Sorter> {
        let shared = &ctx.shared;
        let device = &shared.device;
        let limits = shared.info.limits;
        let max_groups = match desc.max_workgroups_per_dispatch {
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
        let options = desc.kernel_options();
        // One binding, rebound for every sort (the sorter waits for each sort before the next).
        let recorder_desc = RecorderDesc {
            max_bindings: 1,
            pipeline_cache: shared.pipeline_cache,
            max_tile: options.max_tile,
            max_fused_substages: options.max_fused,
            local_workgroup_size: options.local_workgroup_size,
            local_chunk_substages: options.local_chunk,
            merge_workgroups: desc.merge_workgroups,
            segment_merges: desc.segment_merges,
            segment_run: desc.segment_run,
            segment_run_long: desc.segment_run_long,
            shaped_segments: desc.shaped_segments,
            // Context::new enables shaderInt16 wherever the device offers it.
            shader_int16: shared.info.shader_int16,
            tile_origins: desc.tile_origins,
        };
        // Validates the tile options before anything else is created.
        let mut recorder = SortRecorder::with_info(device, shared.info.clone(), &recorder_desc)?;
        // The sorter binds for each sort's length.
        recorder.shape_capacity_only();
        let mut sorter = Sorter {
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
            pristine_keys: None,
            pristine_values: None,
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
        max_elements(&self.ctx.shared.info.limits, KeyWidth::Bits32)
    }

    /// The most keys of this kind one call can sort on this device.
    pub fn max_elements_of(&self, kind: KeyKind) -> u64 {
        max_elements(&self.ctx.shared.info.limits, kind.width())
    }

    /// Whether a sort of `n` pairs of `kind` keys takes tiles that hold 16-bit origins in place
    /// of the values ([`SorterDesc::tile_origins`]).
    pub fn tile_origins(&self, n: usize, kind: KeyKind) -> Result<bool> {
        self.check_size(n, kind.width())?;
        Ok(self.recorder.pairs_payload(kind.width(), n as u32, false)? == Payload::PairsOrigins)
    }

    /// The passes a sort of `n` elements records.
    pub fn plan(&mut self, n: usize, pairs: bool, kind: KeyKind, order: Order) -> Result<Plan> {
        self.check_size(n, kind.width())?;
        let payload = if pairs { self.recorder.pairs_payload(kind.width(), n as u32, false)? } else { Payload::Keys };
        let (geometry, local_wg) = self.recorder.geometry(payload, kind.width(), n as u32)?;
        let build = Build { payload, width: kind.width(), variant: Variant::Lean };
        let plan = self.recorder.new_plan(n as u32, geometry, build, key_flags(kind, order))?;
        Ok(self.recorder.persistent(plan, local_wg, build))
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

    fn check_size(&self, n: usize, width: KeyWidth) -> Result<()> {
        check_size(&self.ctx.shared.info.limits, n, width)
    }

    /// Points the sorter's binding at its device buffers for a sort of n elements (keys of
    /// `width`, values with `pairs`), making the pipelines for it on first use. The recorder sizes
    /// the tiles for the capacity, which is n: where segment passes may be used, the smallest tile
    /// from 2048 that leaves 3 to one tile per multiprocessor (`plan::segment_tile`), else by
    /// [`tile_for`] (as large as shared memory allows but small enough that small sorts still
    /// spread over many workgroups).
    fn bind(&mut self, pairs: bool, width: KeyWidth, n: usize) -> Result<()> {
        let region = |slot: &Option<Buffer>, bytes: u64| BufferRegion { buffer: raw(slot), offset: 0, size: bytes };
        let desc = BindDesc {
            keys: region(&self.keys, n as u64 * u64::from(width.bytes())),
            values: pairs.then(|| region(&self.values, n as u64 * 4)),
            capacity: n as u32,
            key_width: width,
            ..BindDesc::default()
        };
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
    fn binding(&self) -> &SortBinding {
        match &self.binding {
            Some(b) => b,
            None => unreachable!("`bind` runs before anything is recorded"),
        }
    }

    /// Fails at once on a lost device; waits for a submission left pending by an earlier timeout.
    fn settle(&mut self) -> Result<()> {
        if self.ctx.shared.is_lost() {
            return Err(Error::DeviceLost { call: "an earlier call (the device stays lost)" });
        }
        if self.pending {
            self.wait()?;
        }
        Ok(())
    }

    fn wait(&mut self) -> Result<()> {
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
    fn ensure(
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
    fn stage_input(&mut self, keys: &[u32], values: Option<&[u32]>, width: KeyWidth) -> Result<()> {
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
    fn read_back(&mut self, keys: &mut [u32], values: Option<&mut [u32]>) -> Result<()> {
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
    fn begin(&self) -> Result<()> {
        let device = &self.ctx.shared.device;
        // SAFETY: the command buffer is not pending (every submission is waited for).
        unsafe { device.reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty()) }
            .map_err(Error::vk("vkResetCommandPool"))?;
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the command buffer was just reset.
        unsafe { device.begin_command_buffer(self.cmd, &begin) }.map_err(Error::vk("vkBeginCommandBuffer"))
    }

    /// Ends the command buffer begun by `begin`, submits it and waits for it.
    fn finish(&mut self) -> Result<()> {
        // SAFETY: recording was begun by `begin`.
        unsafe { self.ctx.shared.device.end_command_buffer(self.cmd) }.map_err(Error::vk("vkEndCommandBuffer"))?;
        self.submit()?;
        self.wait()
    }

    /// The first `count` timestamps, written by the submissions waited for since they were reset.
    fn read_ticks(&self, count: usize) -> Result<Vec<u64>> {
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

    /// Measures the pass model's costs on this device: the median over `reps` runs of a vec4 copy
    /// of `elements` u32 words (rounded down to a multiple of 4) between the sorter's two device
    /// buffers, and of chains of `chain` empty dispatches with and without barriers, all in one
    /// command buffer (on a GPU after copies until a copy's time settles, 2 to 4 s, and about 0.3 s
    /// more of them in the same command buffer). `None` where the queue has no timestamps.
    pub fn calibrate(&mut self, elements: usize, chain: u32, reps: u32) -> Result<Option<Calibration>> {
        if self.queries == vk::QueryPool::null() {
            return Ok(None);
        }
        self.check_size(elements, KeyWidth::Bits32)?;
        self.settle()?;
        let words = (elements / 4).max(1) as u32;
        let bytes = u64::from(words) * 16;
        let shared = self.ctx.shared.clone();
        Self::ensure(&shared, &mut self.keys, "keys", bytes, STORAGE, MemoryLocation::GpuOnly)?;
        Self::ensure(&shared, &mut self.values, "values", bytes, STORAGE, MemoryLocation::GpuOnly)?;
        // The copy reads binding 0 and writes binding 1: the binding of a pair sort of the words.
        self.bind(true, KeyWidth::Bits32, words as usize * 4)?;
        let probes = self.probes()?;
        let (copy, copy_wg, empty) = (probes.copy, probes.copy_wg, probes.empty);
        let max_groups = self.max_groups;
        let layout = self.recorder.layouts().pipeline_layout;
        let reps = reps.max(1);
        let record_copy = move |device: &ash::Device, cmd: vk::CommandBuffer| {
            record::bind_pipeline(device, cmd, copy);
            let groups = words.div_ceil(copy_wg);
            let mut offset = 0;
            while offset < groups {
                let count = (groups - offset).min(max_groups);
                let push = PushConstants { n: words, group_offset: offset, ..PushConstants::default() };
                record::push_constants(device, cmd, layout, &push);
                record::dispatch(device, cmd, count);
                offset += count;
            }
        };
        let chain = chain.max(1);
        // The barrier a sort records between passes (BarrierFlavor::Memory).
        let barrier = PassBarrier::Memory;
        // On a GPU, every probe runs in one command buffer after PROBE_LEAD of untimed copies (as
        // many as a first copy says fit), so that no host round trip sits between the probes and
        // the work ahead of them. Early in the first process on a fresh H100 the probes often read
        // about half speed (a copy at 1493 GB/s, a dispatch + barrier at 4.1 us, with the SM clock
        // already at 1980 MHz; 2731 GB/s and 1.3 us right after a batch of 2^24-key sorts). The
        // lead avoided that on one of three fresh machines; docs/PERFORMANCE.md has the runs. The
        // H200 read 1452 to 1576 GB/s and 2.8 to 3.5 us with that lead in some processes, 3.8 TB/s
        // and 1.26 us in others, while the sorts of the same processes, timed after their own
        // warm-up, read their usual times; so the copies now also warm up as the sorts do, in
        // command buffers of their own until a copy's time settles. A CPU device gets neither,
        // which would only add to its time.
        let cpu = self.ctx.shared.info.device_type == DeviceType::Cpu;
        let mut per_copy = self.timed(true, record_copy)?.max(Duration::from_nanos(100));
        let cold = per_copy;
        let mut warm_up = WarmUp::new();
        if !cpu {
            loop {
                let copies =
                    (PROBE_WARM_BATCH.as_secs_f64() / per_copy.as_secs_f64()).ceil().clamp(1.0, MAX_LEAD_COPIES) as u32;
                let batch = self.timed(true, |device, cmd| {
                    for _ in 0..copies {
                        record_copy(device, cmd);
                        record::compute_barrier(device, cmd);
                    }
                })?;
                per_copy = (batch / copies).max(Duration::from_nanos(100));
                if warm_up.settled(per_copy) {
                    break;
                }
            }
        }
        let warmed = warm_up.elapsed();
        let lead = if cpu {
            0
        } else {
            (PROBE_LEAD.as_secs_f64() / per_copy.as_secs_f64()).ceil().min(MAX_LEAD_COPIES) as u32
        };
        // Per rep: the copy, the chain with barriers, the chain without; each between two
        // timestamps, with a barrier before each so that no probe overlaps the work before it.
        let probes_per_rep = 3;
        let stamps = reps * probes_per_rep + 1;
        self.ensure_queries(stamps)?;
        self.begin()?;
        let device = &self.ctx.shared.device;
        let cmd = self.cmd;
        record::reset_queries(device, cmd, self.queries, stamps);
        record::bind_set(device, cmd, layout, self.binding().set);
        for _ in 0..lead {
            record_copy(device, cmd);
            record::compute_barrier(device, cmd);
        }
        // Each timestamp is written once all compute work recorded before it is done.
        record::timestamp(device, cmd, vk::PipelineStageFlags::COMPUTE_SHADER, self.queries, 0);
        for rep in 0..reps {
            let at = rep * probes_per_rep;
            record_copy(device, cmd);
            record::compute_barrier(device, cmd);
            record::timestamp(device, cmd, vk::PipelineStageFlags::COMPUTE_SHADER, self.queries, at + 1);
            record_empty_chain(device, cmd, empty, chain, Some(&barrier));
            record::compute_barrier(device, cmd);
            record::timestamp(device, cmd, vk::PipelineStageFlags::COMPUTE_SHADER, self.queries, at + 2);
            record_empty_chain(device, cmd, empty, chain, None);
            record::compute_barrier(device, cmd);
            record::timestamp(device, cmd, vk::PipelineStageFlags::COMPUTE_SHADER, self.queries, at + 3);
        }
        self.finish()?;
        let ticks = self.read_ticks(stamps as usize)?;
        let limits = &self.ctx.shared.info.limits;
        let probe = |rep: u32, which: u32| {
            let at = (rep * probes_per_rep + which) as usize;
            ticks_to_duration(ticks[at], ticks[at + 1], limits)
        };
        let median = |which: u32, per: u32| {
            let mut v: Vec<Duration> = (0..reps).map(|rep| probe(rep, which) / per).collect();
            v.sort();
            v[v.len() / 2]
        };
        Ok(Some(Calibration {
            copy_bytes_per_second: 2.0 * bytes as f64 / median(0, 1).as_secs_f64(),
            dispatch_and_barrier: median(1, chain),
            dispatch_alone: median(2, chain),
            warm_up: warmed,
            cold_copy_bytes_per_second: 2.0 * bytes as f64 / cold.as_secs_f64(),
        }))
    }

    /// The calibration pipelines (the copy kernel and the empty dispatch), made on first use.
    fn probes(&mut self) -> Result<&Probes> {
        let shared = &self.ctx.shared;
        match &mut self.probes {
            Some(p) => Ok(p),
            slot => Ok(slot.insert(Probes::new(&shared.device, self.recorder.layouts(), &shared.info.limits)?)),
        }
    }

    /// The GPU time per dispatch of a chain of `chain` empty dispatches (one workgroup each), with
    /// a barrier of `barrier`'s flavour between consecutive ones or none: the fixed cost of a
    /// pass, and with it of a barrier. Median over `reps` chains; `None` where the queue has no
    /// timestamps.
    pub fn empty_chain(&mut self, barrier: Option<BarrierFlavor>, chain: u32, reps: u32) -> Result<Option<Duration>> {
        if self.queries == vk::QueryPool::null() {
            return Ok(None);
        }
        if let Some(flavor) = barrier {
            pass_barrier(flavor, &self.ctx.shared, &[])?;
        }
        self.settle()?;
        let shared = self.ctx.shared.clone();
        // The buffer flavour needs buffers to name: the sorter's (made small if there are none yet).
        Self::ensure(&shared, &mut self.keys, "keys", 16, STORAGE, MemoryLocation::GpuOnly)?;
        Self::ensure(&shared, &mut self.values, "values", 16, STORAGE, MemoryLocation::GpuOnly)?;
        let empty = self.probes()?.empty;
        let buffers = [raw(&self.keys), raw(&self.values)];
        let flavor = barrier.map(|f| pass_barrier(f, &shared, &buffers)).transpose()?;
        let chain = chain.max(1);
        let mut times = Vec::new();
        for _ in 0..reps.max(1) {
            times.push(
                self.timed(false, |device, cmd| record_empty_chain(device, cmd, empty, chain, flavor.as_ref()))?
                    / chain,
            );
        }
        times.sort();
        Ok(Some(times[times.len() / 2]))
    }

    /// Records `body` between two timestamps into the sorter's command buffer (with the
    /// binding's descriptor set bound if `bound`; the empty probe reads no buffer), submits it,
    /// waits, and returns the GPU time between the timestamps.
    fn timed(&mut self, bound: bool, body: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<Duration> {
        self.begin()?;
        let device = &self.ctx.shared.device;
        let cmd = self.cmd;
        record::reset_queries(device, cmd, self.queries, 2);
        if bound {
            record::bind_set(device, cmd, self.recorder.layouts().pipeline_layout, self.binding().set);
        }
        record::timestamp(device, cmd, vk::PipelineStageFlags::TOP_OF_PIPE, self.queries, 0);
        body(device, cmd);
        record::timestamp(device, cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.queries, 1);
        self.finish()?;
        let ticks = self.read_ticks(2)?;
        Ok(ticks_to_duration(ticks[0], ticks[1], &self.ctx.shared.info.limits))
    }

    /// Times `reps` sorts of the same input back to back, for benchmarks: the input is uploaded
    /// once and kept in two more device buffers; each sort copies it into place on the GPU, then
    /// runs every pass between two timestamps, all in one command buffer, so the GPU never idles
    /// between sorts and its clocks stay up (with the host busy checking results between
    /// separate sorts, the H100 dropped to its idle clock mid-benchmark). Returns each sort's GPU
    /// time; `keys` (and `values`) receive the result, which is that of every sort. At most 240
    /// reps; `Ok(vec![])` where the queue has no timestamps or n < 2.
    pub fn time_repeated<K: SortKey>(
        &mut self,
        keys: &mut [K],
        values: Option<&mut [u32]>,
        order: Order,
        reps: u32,
    ) -> Result<Vec<Duration>> {
        self.sort_totals(keys, values, order, reps, false)
    }

    /// Times `reps` sorts of the same input as [`Sorter::time_repeated`] does, but each sort (its
    /// copy into place and its passes) in a submission of its own, waited for before the next is
    /// recorded: what one sort a frame costs a renderer, with the GPU idle between sorts while the
    /// host waits and records. Returns each sort's GPU time; `keys` (and `values`) receive the
    /// result. At most 240 reps; `Ok(vec![])` where the queue has no timestamps or n < 2.
    pub fn time_separately<K: SortKey>(
        &mut self,
        keys: &mut [K],
        values: Option<&mut [u32]>,
        order: Order,
        reps: u32,
    ) -> Result<Vec<Duration>> {
        self.sort_totals(keys, values, order, reps, true)
    }

    /// Each sort's GPU time of `repeated` without per-pass timestamps (`separate`: a submission
    /// per sort).
    fn sort_totals<K: SortKey>(
        &mut self,
        keys: &mut [K],
        values: Option<&mut [u32]>,
        order: Order,
        reps: u32,
        separate: bool,
    ) -> Result<Vec<Duration>> {
        let keys: &mut [u32] = bytemuck::cast_slice_mut(keys);
        let run = self.repeated(keys, values, K::KIND, order, reps, false, BarrierFlavor::Memory, separate)?;
        Ok(run.map(|r| r.totals).unwrap_or_default())
    }

    /// Sorts the same input `reps` times with a timestamp after every pass, the passes separated
    /// as `sync` says, for the study of what a pass and a barrier cost (`bitonic-vk passes`). Every
    /// mode keeps every dependency between passes, so each result is a correct sort; `keys` (and
    /// `values`) receive it. At most 240 reps. Fails with [`Error::Unsupported`] where the queue
    /// has no timestamps, or for [`BarrierFlavor::Memory2`] where the device lacks
    /// `VK_KHR_synchronization2`.
    pub fn study<K: SortKey>(
        &mut self,
        keys: &mut [K],
        values: Option<&mut [u32]>,
        order: Order,
        sync: PassSync,
        reps: u32,
    ) -> Result<PassStudy> {
        if self.queries == vk::QueryPool::null() {
            return Err(Error::Unsupported {
                what: "time passes",
                fix: "its compute queue has no timestamps; choose another device with --device",
            });
        }
        if let PassSync::Barrier(flavor) = sync {
            pass_barrier(flavor, &self.ctx.shared, &[])?;
        }
        let keys: &mut [u32] = bytemuck::cast_slice_mut(keys);
        let n = keys.len();
        let pairs = values.is_some();
        let run = match sync {
            PassSync::Barrier(flavor) => self.repeated(keys, values, K::KIND, order, reps, true, flavor, false)?,
            PassSync::SubmitPerSort => {
                self.repeated(keys, values, K::KIND, order, reps, true, BarrierFlavor::Memory, true)?
            }
            PassSync::SubmitPerPass => self.submit_per_pass(keys, values, K::KIND, order, reps)?,
        };
        match run {
            Some(study) => Ok(study),
            // n < 2: nothing ran.
            None => Ok(PassStudy {
                plan: self.plan(n, pairs, K::KIND, order)?,
                pass_times: Vec::new(),
                totals: Vec::new(),
                wall: Vec::new(),
            }),
        }
    }

    /// What `repeated` and `submit_per_pass` share: checks, plan, kernels, and the input staged
    /// and bound, with two more device buffers for a pristine copy of it. `None` when there is
    /// nothing to time (n < 2 or no timestamps).
    fn prepare_repeated(
        &mut self,
        keys: &[u32],
        values: Option<&[u32]>,
        kind: KeyKind,
        order: Order,
        reps: u32,
    ) -> Result<Option<Plan>> {
        let n = keys.len() / words_per_key(kind.width());
        if let Some(v) = &values {
            if v.len() != n {
                return Err(Error::LengthMismatch { keys: n, values: v.len() });
            }
        }
        if !(1..=MAX_TIMED_REPS).contains(&reps) {
            return Err(Error::InvalidOption { name: "reps", value: reps.to_string(), reason: "must be 1 to 240" });
        }
        if n < 2 || self.queries == vk::QueryPool::null() {
            return Ok(None);
        }
        self.check_size(n, kind.width())?;
        self.settle()?;
        let pairs = values.is_some();
        self.stage_input(keys, values, kind.width())?;
        let plan = self.recorder.plan(self.binding(), n as u32, 1, kind, order)?;
        let shared = self.ctx.shared.clone();
        Self::ensure(
            &shared,
            &mut self.pristine_keys,
            "benchmark input keys",
            keys.len() as u64 * 4,
            STORAGE,
            MemoryLocation::GpuOnly,
        )?;
        if pairs {
            Self::ensure(
                &shared,
                &mut self.pristine_values,
                "benchmark input values",
                n as u64 * 4,
                STORAGE,
                MemoryLocation::GpuOnly,
            )?;
        }
        Ok(Some(plan))
    }

    /// The copies of a repeated run: staging to pristine (upload), pristine to the sorted buffers
    /// (restore, before each sort), sorted buffers to staging (download).
    fn repeated_copies(&self, plan: &Plan, pairs: bool, width: KeyWidth) -> [Vec<(vk::Buffer, vk::Buffer, u64)>; 3] {
        let bytes = (u64::from(plan.n) * u64::from(width.bytes()), u64::from(plan.n) * 4);
        let (k, pk, sk) = (raw(&self.keys), raw(&self.pristine_keys), raw(&self.staging_keys));
        let (v, pv, sv) = (raw(&self.values), raw(&self.pristine_values), raw(&self.staging_values));
        [
            copies(pairs, bytes, (sk, pk), (sv, pv)),
            copies(pairs, bytes, (pk, k), (pv, v)),
            copies(pairs, bytes, (k, sk), (v, sv)),
        ]
    }

    /// Makes the query pool hold at least `count` queries (replacing it when it is smaller).
    fn ensure_queries(&mut self, count: u32) -> Result<()> {
        if count <= self.query_capacity || self.queries == vk::QueryPool::null() {
            return Ok(());
        }
        let device = &self.ctx.shared.device;
        let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(count);
        // SAFETY: `device` is live and the info complete.
        let pool = unsafe { device.create_query_pool(&info, None) }.map_err(Error::vk("vkCreateQueryPool"))?;
        // SAFETY: no submission is pending (callers settle first), so nothing uses the old pool.
        unsafe { device.destroy_query_pool(self.queries, None) };
        self.queries = pool;
        self.query_capacity = count;
        Ok(())
    }

    /// Sorts the staged input `reps` times back to back in one command buffer, each sort restoring
    /// the pristine input first; with `per_pass`, a timestamp after every pass; with `separate`,
    /// each sort in a submission of its own, waited for before the next is recorded.
    #[allow(clippy::too_many_arguments)]
    fn repeated(
        &mut self,
        keys: &mut [u32],
        values: Option<&mut [u32]>,
        kind: KeyKind,
        order: Order,
        reps: u32,
        per_pass: bool,
        flavor: BarrierFlavor,
        separate: bool,
    ) -> Result<Option<PassStudy>> {
        let Some(plan) = self.prepare_repeated(keys, values.as_deref(), kind, order, reps)? else {
            return Ok(None);
        };
        let pairs = values.is_some();
        let per_sort = if per_pass { 1 + plan.passes.len() as u32 } else { 2 };
        self.ensure_queries(per_sort * reps)?;
        let [upload, restore, download] = self.repeated_copies(&plan, pairs, kind.width());
        let buffers: Vec<vk::Buffer> =
            if pairs { vec![raw(&self.keys), raw(&self.values)] } else { vec![raw(&self.keys)] };
        let shared = self.ctx.shared.clone();
        let barrier = pass_barrier(flavor, &shared, &buffers)?;
        // The stand-in for the pass that wrote the keys (see `SorterDesc::time_from_transfer`).
        let producer = if self.desc.time_from_transfer { None } else { Some(self.probes()?.empty) };

        self.begin()?;
        let device = &shared.device;
        let cmd = self.cmd;
        // Reset once for every sort: a reset in an earlier submission serves the later ones.
        record::reset_queries(device, cmd, self.queries, per_sort * reps);
        record::copy(device, cmd, &upload);
        // The upload before the first copy into place reads the device copies.
        record::barrier(
            device,
            cmd,
            (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
            (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_READ),
        );
        let mut walls = Vec::new();
        for rep in 0..reps {
            if separate && rep > 0 {
                // The previous sort's submission, waited for; the barrier below still orders its
                // memory accesses before this one's (submission order orders execution alone).
                let start = Instant::now();
                self.finish()?;
                walls.push(start.elapsed());
                self.begin()?;
            }
            if rep > 0 {
                // The previous sort's passes before this copy overwrites what they read and wrote.
                record::barrier(
                    device,
                    cmd,
                    (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE),
                    (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
                );
            }
            let first = per_sort * rep;
            record::copy(device, cmd, &restore);
            if let Some(empty) = producer {
                // The copy before any compute work after it; the empty dispatch, then the time
                // starts, then the barrier that every pass has before it orders the sort after it.
                record::input_barrier(device, cmd);
                record::bind_pipeline(device, cmd, empty);
                record::dispatch(device, cmd, 1);
                record::timestamp(device, cmd, vk::PipelineStageFlags::COMPUTE_SHADER, self.queries, first);
                record::compute_barrier(device, cmd);
            } else {
                record::timestamp(device, cmd, vk::PipelineStageFlags::TRANSFER, self.queries, first);
                record::input_barrier(device, cmd);
            }
            let extras = Extras {
                pass_timestamps: per_pass.then_some((self.queries, first + 1)),
                barrier,
                max_groups: Some(self.max_groups),
                drop_barrier_before_pass: self.desc.drop_barrier_before_pass,
            };
            // SAFETY: `cmd` is recording (begun above), outside a render pass, on the compute
            // queue; the binding, its buffers and the recorder outlive the submission, which
            // `finish` waits for.
            unsafe { self.recorder.record_plan(cmd, self.binding(), &plan, 1, &extras) };
            if !per_pass {
                record::timestamp(device, cmd, vk::PipelineStageFlags::COMPUTE_SHADER, self.queries, first + 1);
            }
        }
        record::download(device, cmd, &download);
        let start = Instant::now();
        self.finish()?;
        if separate {
            walls.push(start.elapsed());
        } else {
            walls = vec![start.elapsed() / reps; reps as usize];
        }
        let ticks = self.read_ticks((per_sort * reps) as usize)?;
        self.read_back(keys, values)?;
        Ok(Some(self.study_from_ticks(plan, &ticks, per_sort as usize, per_pass, walls)))
    }

    /// Sorts the staged input `reps` times, each pass in a command buffer of its own, submitted
    /// and waited for before the next is recorded. Each command buffer starts with the barrier
    /// that orders it after the pass before (submission order alone orders execution, not memory).
    fn submit_per_pass(
        &mut self,
        keys: &mut [u32],
        values: Option<&mut [u32]>,
        kind: KeyKind,
        order: Order,
        reps: u32,
    ) -> Result<Option<PassStudy>> {
        let Some(plan) = self.prepare_repeated(keys, values.as_deref(), kind, order, reps)? else {
            return Ok(None);
        };
        let pairs = values.is_some();
        let per_sort = 1 + plan.passes.len() as u32;
        self.ensure_queries(per_sort * reps)?;
        let [upload, restore, download] = self.repeated_copies(&plan, pairs, kind.width());
        let shared = self.ctx.shared.clone();
        let device = &shared.device;
        let layout = self.recorder.layouts().pipeline_layout;

        self.begin()?;
        record::reset_queries(device, self.cmd, self.queries, per_sort * reps);
        record::copy(device, self.cmd, &upload);
        self.finish()?;
        let mut walls = Vec::new();
        for rep in 0..reps {
            let first = per_sort * rep;
            self.begin()?;
            // Orders the upload (or the previous sort's last pass) before this copy.
            record::barrier(
                device,
                self.cmd,
                (
                    vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE,
                ),
                (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE),
            );
            record::copy(device, self.cmd, &restore);
            record::timestamp(device, self.cmd, vk::PipelineStageFlags::TRANSFER, self.queries, first);
            self.finish()?;
            let start = Instant::now();
            for (index, pass) in plan.passes.iter().enumerate() {
                self.begin()?;
                let cmd = self.cmd;
                if index == 0 {
                    record::input_barrier(device, cmd);
                } else {
                    record::compute_barrier(device, cmd);
                }
                record::bind_set(device, cmd, layout, self.binding().set);
                let extras = Extras {
                    pass_timestamps: Some((self.queries, first + 1)),
                    barrier: PassBarrier::Memory,
                    ..Extras::default()
                };
                let mut encoder = self.recorder.encoder(cmd, self.binding(), 1, &extras);
                encoder.bind_pass(pass);
                record::dispatch_pass(&mut encoder, pass, self.max_groups);
                encoder.pass_done(index);
                self.finish()?;
            }
            walls.push(start.elapsed());
        }
        self.begin()?;
        record::download(device, self.cmd, &download);
        self.finish()?;
        let ticks = self.read_ticks((per_sort * reps) as usize)?;
        self.read_back(keys, values)?;
        Ok(Some(self.study_from_ticks(plan, &ticks, per_sort as usize, true, walls)))
    }

    /// Splits the timestamps of repeated sorts (`per_sort` each) into totals and pass times.
    fn study_from_ticks(
        &self,
        plan: Plan,
        ticks: &[u64],
        per_sort: usize,
        per_pass: bool,
        wall: Vec<Duration>,
    ) -> PassStudy {
        let limits = &self.ctx.shared.info.limits;
        let sorts = ticks.chunks_exact(per_sort);
        let totals = sorts.clone().map(|t| ticks_to_duration(t[0], t[t.len() - 1], limits)).collect();
        let pass_times = if per_pass {
            sorts.map(|t| t.windows(2).map(|w| ticks_to_duration(w[0], w[1], limits)).collect()).collect()
        } else {
            Vec::new()
        };
        PassStudy { plan, pass_times, totals, wall }
    }

    /// Records one sort: upload, every pass of `plan`, download, with timestamps where the queue
    /// has them.
    fn record(&self, plan: &Plan, width: KeyWidth) -> Result<()> {
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
        if timed {
            record::timestamp(device, cmd, vk::PipelineStageFlags::TRANSFER, self.queries, 0);
        }
        record::input_barrier(device, cmd);
        let per_pass = timed && self.desc.pass_timestamps;
        let extras = Extras {
            pass_timestamps: per_pass.then_some((self.queries, 1)),
            barrier: PassBarrier::Memory,
            max_groups: Some(self.max_groups),
            drop_barrier_before_pass: self.desc.drop_barrier_before_pass,
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

    fn submit(&mut self) -> Result<()> {
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
        let limits = &self.ctx.shared.info.limits;
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

/// The barrier of `flavor` over `buffers`, or `Unsupported` for synchronization2 on a device
/// without VK_KHR_synchronization2.
fn pass_barrier<'a>(flavor: BarrierFlavor, shared: &'a Shared, buffers: &'a [vk::Buffer]) -> Result<PassBarrier<'a>> {
    match flavor {
        BarrierFlavor::Memory => Ok(PassBarrier::Memory),
        BarrierFlavor::Buffer => Ok(PassBarrier::Buffer(buffers)),
        BarrierFlavor::Memory2 => shared.sync2.as_ref().map(PassBarrier::Memory2).ok_or(Error::Unsupported {
            what: "record synchronization2 barriers",
            fix: "it lacks VK_KHR_synchronization2; use the memory or buffer barrier flavour",
        }),
    }
}

/// The most keys of a width one buffer binding of this device holds (and the shaders can index).
pub(crate) fn max_elements(l: &crate::context::DeviceLimits, width: KeyWidth) -> u64 {
    (u64::from(l.max_storage_buffer_range).min(l.max_memory_allocation_size) / u64::from(width.bytes()))
        .min(MAX_ELEMENTS)
}

/// 4-byte words per key of this width.
fn words_per_key(width: KeyWidth) -> usize {
    width.bytes() as usize / 4
}

/// `TooLarge`, naming the first limit n keys of `width` exceed, if any.
pub(crate) fn check_size(l: &crate::context::DeviceLimits, n: usize, width: KeyWidth) -> Result<()> {
    let bytes = n as u64 * u64::from(width.bytes());
    let exceeded = [
        ("maxStorageBufferRange", u64::from(l.max_storage_buffer_range)),
        ("maxMemoryAllocationSize", l.max_memory_allocation_size),
        ("the shaders' 32-bit indexing (2^31 elements)", MAX_ELEMENTS * u64::from(width.bytes())),
    ]
    .into_iter()
    .find(|(_, value)| bytes > *value);
    match exceeded {
        Some((limit, value)) => Err(Error::TooLarge { n, bytes, limit, value, max: max_elements(l, width) }),
        None => Ok(()),
    }
}

/// The local chunk of a sort of n elements, where it is not the default of
/// [`crate::pipelines::local_chunk`]: 3 substages (never more than `max_fused`) for sorts of up
/// to 2^15 elements, the small sorts, whose kernels also take the SMALL tile sort in tiles of 2048
/// ([`crate::pipelines::small_tile_sort`]). The standalone sorter and the recorder both take it.
pub fn chunk_for(n: usize, max_fused: Option<u32>) -> Option<u32> {
    (n <= SMALL_CHUNK_SORT).then(|| small_sort_chunk(max_fused))
}

/// [`SMALL_SORT_CHUNK`], never more than `max_fused`.
fn small_sort_chunk(max_fused: Option<u32>) -> u32 {
    SMALL_SORT_CHUNK.min(max_fused.unwrap_or(SMALL_SORT_CHUNK))
}

/// The tile in which sorts of 4-byte keys alone on segment passes take chunks of 3
/// ([`segment_chunk_for`]).
const WIDE_SEGMENT_CHUNK_TILE: u32 = 2048;

/// The local chunk of a sort of n 4-byte keys alone whose segment passes run in `segment_tile`
/// (`plan::segment_tile`, one coset per workgroup), where [`chunk_for`] gives none: 3 substages
/// (never more than `max_fused`) in tiles of 2048, whose kernels then take the SMALL tile sort
/// too; on the H100 (132 multiprocessors) the sorts of 32769 to 270336 keys. Every chain of
/// chunks of 3 that their segment passes meet has a module of its own (build.rs
/// `CHAINS_ON_CHUNKS_OF_3_BEYOND_2_15`). With those modules, against the build before them (which
/// took chunks of 4 up to 32 tiles and ran the plain segment build at 16 to 19 levels), two
/// processes each alternating (`docs/figures/h100-ab-chunk-3-chain-modules-beyond-2e15.txt`):
/// 65537 keys 42.3 / 42.7 -> 41.3 / 40.9 us, 100000 43.0 / 42.9 -> 41.3 / 40.7 us, 2^17 42.4 /
/// 43.3 -> 40.8 / 41.0 us, 200000 51.9 / 52.6 -> 49.6 / 49.0 us, 2^18 53.3 / 53.5 -> 50.1 / 50.4
/// us, 270000 78.3 / 77.7 -> 76.8 / 77.5 us; and `--local-chunk 3` against the default in that
/// build, 2^16 keys (32 tiles) 34.8 / 34.7 -> 34.0 / 33.8 us and 40000 (20 tiles) 33.6 / 34.6 ->
/// 33.4 / 33.7 us (`docs/figures/h100-chunk-3-keys-2e16-and-pairs-with-modules.txt`). Pairs lost
/// on chunks of 3 even with modules for every chain (2^16 45.9 / 45.2 -> 46.4 / 47.0 us, 2^18
/// 66.8 / 66.8 -> 70.1 / 70.0 us), as did keys in tiles of 4096 without (2^19 67.3 / 67.5 ->
/// 71.2 / 71.2 us, `docs/figures/h100-chunk-3-keys-tiles-of-2048.txt`).
pub fn segment_chunk_for(
    n: usize,
    payload: Payload,
    width: KeyWidth,
    segment_tile: Option<u32>,
    max_fused: Option<u32>,
) -> Option<u32> {
    let wide = chunk_for(n, max_fused).is_none()
        && payload == Payload::Keys
        && width == KeyWidth::Bits32
        && segment_tile == Some(WIDE_SEGMENT_CHUNK_TILE);
    wide.then(|| small_sort_chunk(max_fused))
}

/// The local chunk the sorter and the recorder take for a sort of n elements whose segment passes
/// (if any) run in `segment_tile`, where it is not [`crate::pipelines::local_chunk`]'s default:
/// [`chunk_for`], else [`segment_chunk_for`]. None leaves the default.
pub fn sized_chunk_for(
    n: usize,
    payload: Payload,
    width: KeyWidth,
    segment_tile: Option<u32>,
    max_fused: Option<u32>,
) -> Option<u32> {
    chunk_for(n, max_fused).or_else(|| segment_chunk_for(n, payload, width, segment_tile, max_fused))
}

/// The tile cap for a sort of n elements: as large as shared memory allows (the cap may be above
/// it), but small enough that there are at least [`TILES_WANTED`] tiles, down to
/// [`SMALLEST_SIZED_TILE`]; sorts of at most [`SMALL_SORT_TILE`] elements get that tile instead.
pub(crate) fn tile_for(n: usize) -> u32 {
    let per_tile = (n / TILES_WANTED).max(1);
    let floor = if n <= SMALL_SORT_TILE as usize { SMALL_SORT_TILE } else { SMALLEST_SIZED_TILE } as usize;
    let by_size = (1usize << (usize::BITS - 1 - per_tile.leading_zeros())).max(floor);
    u32::try_from(by_size).unwrap_or(u32::MAX)
}

/// `chain` dispatches of the empty probe `empty`, with `barrier` before every one after the first.
fn record_empty_chain(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    empty: vk::Pipeline,
    chain: u32,
    barrier: Option<&PassBarrier>,
) {
    record::bind_pipeline(device, cmd, empty);
    for i in 0..chain {
        if let (Some(b), true) = (barrier, i > 0) {
            b.record(device, cmd);
        }
        record::dispatch(device, cmd, 1);
    }
}

/// The raw handle of a buffer slot (null when empty).
fn raw(slot: &Option<Buffer>) -> vk::Buffer {
    slot.as_ref().map_or(vk::Buffer::null(), |b| b.raw)
}

/// Copies from source to destination of the keys' bytes, and with `pairs` of the values' too.
fn copies(
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
fn ticks_to_duration(start: u64, end: u64, limits: &crate::context::DeviceLimits) -> Duration {
    let mask = if limits.timestamp_valid_bits >= 64 { u64::MAX } else { (1u64 << limits.timestamp_valid_bits) - 1 };
    Duration::from_nanos((((end.wrapping_sub(start)) & mask) as f64 * f64::from(limits.timestamp_period)) as u64)
}

impl Context {
    /// Test-only: makes and frees one device-local storage buffer of `bytes` by the path every
    /// buffer of the sorter takes, so that a test can ask for more memory than the device has.
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
            &mut self.pristine_keys,
            &mut self.pristine_values,
        ] {
            if let Some(mut b) = slot.take() {
                b.destroy(&shared);
            }
        }
        self.probes = None;
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

#[cfg(test)]
mod tests {
    use super::{chunk_for, segment_chunk_for, tile_for};
    use crate::keys::KeyWidth;
    use crate::shaders::Payload;

    #[test]
    fn keys_in_segment_tiles_of_2048_take_chunks_of_three() {
        let keys = |n: usize, tile: Option<u32>, fused: Option<u32>| {
            segment_chunk_for(n, Payload::Keys, KeyWidth::Bits32, tile, fused)
        };
        assert_eq!(keys((1 << 15) + 1, Some(2048), None), Some(3));
        assert_eq!(keys(40_000, Some(2048), None), Some(3));
        assert_eq!(keys(1 << 16, Some(2048), None), Some(3));
        assert_eq!(keys(1 << 18, Some(2048), None), Some(3));
        assert_eq!(keys(132 * 2048, Some(2048), Some(2)), Some(2));
        // Small sorts have theirs from chunk_for.
        assert_eq!(keys(1 << 15, Some(2048), None), None);
        assert_eq!(keys(1 << 19, Some(4096), None), None);
        assert_eq!(keys(1 << 18, None, None), None);
        assert_eq!(segment_chunk_for(1 << 16, Payload::Pairs, KeyWidth::Bits32, Some(2048), None), None);
        assert_eq!(segment_chunk_for(1 << 18, Payload::Pairs, KeyWidth::Bits32, Some(2048), None), None);
        assert_eq!(segment_chunk_for(1 << 18, Payload::Keys, KeyWidth::Bits64, Some(2048), None), None);
    }

    #[test]
    fn sorts_of_up_to_2e15_take_chunks_of_three_never_above_the_fusion_cap() {
        assert_eq!(chunk_for(2, None), Some(3));
        assert_eq!(chunk_for(1 << 13, None), Some(3));
        assert_eq!(chunk_for(20_000, None), Some(3));
        assert_eq!(chunk_for(1 << 15, None), Some(3));
        assert_eq!(chunk_for((1 << 15) + 1, None), None);
        assert_eq!(chunk_for(1 << 16, None), None);
        assert_eq!(chunk_for(1000, Some(2)), Some(2));
        assert_eq!(chunk_for(1000, Some(1)), Some(1));
        assert_eq!(chunk_for(1000, Some(6)), Some(3));
    }

    #[test]
    fn tiles_are_sized_to_the_sort() {
        // Sorts of up to 1024 elements share one tile of 1024, so a sort of 2^10 is one full tile
        // and small sizes add one set of pipelines, not one per power of two.
        assert_eq!(tile_for(0), 1024);
        assert_eq!(tile_for(3), 1024);
        assert_eq!(tile_for(1000), 1024);
        assert_eq!(tile_for(1024), 1024);
        assert_eq!(tile_for(1025), 2048);
        assert_eq!(tile_for(2048), 2048);
        // Larger sorts keep at least 32 tiles, down to 2048 elements.
        assert_eq!(tile_for(1 << 16), 2048);
        assert_eq!(tile_for(1 << 17), 4096);
        assert_eq!(tile_for((1 << 20) + 5), 1 << 15);
    }
}
