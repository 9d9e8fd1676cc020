//! The wgpu front (feature `wgpu`): [`WgpuSorter`] sorts regions of a renderer's `wgpu::Buffer`s
//! on its `wgpu::Device`, through the same [`SortRecorder`] as the `ash` front.
//!
//! Each sort is recorded into a `wgpu::CommandEncoder` of its own through wgpu's raw Vulkan
//! encoder (`CommandEncoder::as_hal_mut`) and handed back as a `wgpu::CommandBuffer` to submit
//! after the commands that write the keys: wgpu does not let one encoder mix its own commands with
//! raw ones.
//!
//! ```no_run
//! # fn demo(device: &wgpu::Device, queue: &wgpu::Queue, keys: &wgpu::Buffer, fill: wgpu::CommandBuffer) -> bitonic_vk::Result<()> {
//! use bitonic_vk::wgpu::{WgpuBindDesc, WgpuSorter, WgpuSorterDesc};
//! use bitonic_vk::Order;
//! // SAFETY: every command buffer the sorter returns is submitted below, before it is dropped;
//! // `keys` belongs to `device` and is never destroyed while bound.
//! let mut sorter = unsafe { WgpuSorter::new(device, &WgpuSorterDesc::default())? };
//! let binding = sorter.bind(&WgpuBindDesc::new(keys.slice(..), 1 << 16))?;
//! let sort = sorter.record::<f32>(&binding, 1 << 16, Order::Ascending)?;
//! queue.submit([fill, sort]);
//! # Ok(()) }
//! ```
//!
//! # Contract
//! - **Before**: the keys, values and count are written by earlier commands on the same queue
//!   (`Queue::write_buffer`, a copy, a compute pass) in an earlier command buffer of the same
//!   submission or an earlier one. The sort's command buffer starts with a memory barrier from
//!   every earlier command's writes to its compute reads and writes, so the caller adds none and
//!   need not call `transition_resources`. The regions must have been written through wgpu (or the
//!   buffer mapped at creation) before the first sort: wgpu clears a buffer's never-written bytes
//!   at their first use it sees, and it does not see the sort's.
//! - **After**: the sort's command buffer ends with a memory barrier from its compute writes to
//!   every later command's reads and writes (`ALL_COMMANDS`), so wgpu's next use of the buffers
//!   (a draw reading them as vertex or storage data, a copy, the next frame's compute pass) sees
//!   the sorted data. wgpu's own tracking does not see the sort: the buffers stay in the state
//!   their last wgpu use left them in, and its barriers before their next use still apply.
//! - **State**: the sort's command buffer is its own, so no wgpu state is disturbed.
//! - **Lifetimes**: the sorter holds a clone of the `wgpu::Device` and of every bound buffer until
//!   it is dropped (or the binding is rebound); dropping it waits for the device to go idle before
//!   its pipelines and descriptor sets are destroyed. [`WgpuSorter::new`]'s safety section gives
//!   the caller's part.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ::wgpu::hal::api::Vulkan;
use ash::vk;

use crate::device::describe;
use crate::error::{Error, Result};
use crate::keys::{KeyKind, KeyWidth, Order, SortKey};
use crate::network::Plan;
use crate::pipeline_cache::{DiskCache, PipelineCacheDir};
use crate::recorder::{BindDesc, BufferRegion, Extras, RecorderDesc, SortBinding, SortRecorder};
use crate::{DeviceInfo, Tuning};

/// How to create a [`WgpuSorter`].
#[derive(Clone, Debug)]
pub struct WgpuSorterDesc {
    /// The most bindings (one descriptor set each). Default 16.
    pub max_bindings: u32,
    /// Timestamp queries for [`WgpuSorter::record_timed`], used as a ring: each timed sort takes
    /// its passes plus one. Default 0: no timed sorts.
    pub timestamp_queries: u32,
    /// The knobs; the defaults are where they measured fastest.
    pub tuning: Tuning,
    /// Test hook: records the sort without one of the two barriers of the Contract, so that a
    /// test on a GPU can show it fails without it.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub drop_barrier: Option<FrontBarrier>,
    /// Where the sort's pipelines are kept between runs, as [`crate::ContextDesc::pipeline_cache`]:
    /// loaded at [`WgpuSorter::new`], written back when the sorter drops, so that a later run
    /// binds without compiling. Default [`PipelineCacheDir::Default`].
    pub pipeline_cache: PipelineCacheDir,
}

impl Default for WgpuSorterDesc {
    fn default() -> WgpuSorterDesc {
        WgpuSorterDesc {
            max_bindings: 16,
            timestamp_queries: 0,
            tuning: Tuning::default(),
            pipeline_cache: PipelineCacheDir::Default,
            #[cfg(feature = "test-hooks")]
            drop_barrier: None,
        }
    }
}

/// One of the two barriers a sort's command buffer opens and closes with (test hook; the field
/// that takes it exists with `test-hooks` alone).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontBarrier {
    /// From every earlier write to the sort's reads and writes.
    Before,
    /// From the sort's writes to every later access.
    After,
}

/// What [`WgpuSorter::bind`] binds: regions of `wgpu::Buffer`s made with `STORAGE` usage (as
/// [`BindDesc`] for the `ash` front).
#[derive(Clone, Copy, Debug)]
pub struct WgpuBindDesc<'a> {
    /// The keys: 4 bytes each, or 8 with [`KeyWidth::Bits64`].
    pub keys: ::wgpu::BufferSlice<'a>,
    /// For key+value sorts, the values (u32, one per key).
    pub values: Option<::wgpu::BufferSlice<'a>>,
    /// A u32 element count written on the GPU before the sort (see [`BindDesc::count`]).
    pub count: Option<::wgpu::BufferSlice<'a>>,
    /// The most elements a sort through the binding takes.
    pub capacity: u32,
    /// The width of the keys. Default 32 bits.
    pub key_width: KeyWidth,
    /// Whether sorts may be batched ([`WgpuSorter::record_batches`] with more than one array).
    pub batched: bool,
}

impl<'a> WgpuBindDesc<'a> {
    /// Up to `capacity` 32-bit keys alone in `keys`: set the other fields with struct update
    /// syntax.
    pub fn new(keys: ::wgpu::BufferSlice<'a>, capacity: u32) -> WgpuBindDesc<'a> {
        WgpuBindDesc { keys, values: None, count: None, capacity, key_width: KeyWidth::Bits32, batched: false }
    }
}

/// A binding made by [`WgpuSorter::bind`]. The sorter keeps its buffers alive.
#[derive(Debug)]
pub struct WgpuBinding {
    inner: SortBinding,
    /// Its place in the sorter's `held`.
    slot: usize,
    sorter: u32,
}

impl WgpuBinding {
    /// What the `ash` front sees of it: capacity, key width, payload.
    pub fn binding(&self) -> &SortBinding {
        &self.inner
    }
}

/// Where a timed sort's timestamps are: read them with [`WgpuSorter::pass_times`] once the GPU
/// has run its command buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedSort {
    first: u32,
    passes: u32,
    sorter: u32,
    lap: u64,
}

impl TimedSort {
    /// The sort's passes.
    pub fn passes(&self) -> usize {
        self.passes as usize
    }
}

struct Timestamps {
    pool: vk::QueryPool,
    queries: u32,
    next: u32,
    /// How many times the ring wrapped: a [`TimedSort`] of an earlier lap may be overwritten.
    lap: u64,
    period_ns: f64,
    /// The queue family's valid timestamp bits: a counter that wraps between two timestamps.
    mask: u64,
}

static NEXT_SORTER: AtomicU32 = AtomicU32::new(1);

/// Sorts regions of a wgpu renderer's buffers on its device. See the [module docs](self).
pub struct WgpuSorter {
    // Field order is drop order: the recorder's Vulkan objects go before the device and buffers,
    // and `Drop` waits for the device to go idle first.
    recorder: SortRecorder,
    timestamps: Option<Timestamps>,
    cache: DiskCache,
    raw: ash::Device,
    /// The buffers of each binding, by slot.
    held: Vec<Vec<::wgpu::Buffer>>,
    #[cfg(feature = "test-hooks")]
    drop_barrier: Option<FrontBarrier>,
    id: u32,
    device: ::wgpu::Device,
}

impl WgpuSorter {
    /// Makes a sorter on `device`, which must run on wgpu's Vulkan backend. Pipelines are made by
    /// [`WgpuSorter::bind`], as with [`SortRecorder::bind`].
    ///
    /// # Errors
    /// [`Error::Unsupported`] where the device's backend is not Vulkan or the device cannot run
    /// the sort (Vulkan 1.0, no compute); as [`SortRecorder::new`] otherwise.
    ///
    /// # Safety
    /// - Every command buffer this sorter returns is submitted to `device`'s queue, or dropped,
    ///   before the binding it was recorded with is rebound and before the sorter is dropped; one
    ///   from [`WgpuSorter::record_timed`] is submitted before its [`TimedSort`] is read (its
    ///   queries are reset by that command buffer alone).
    /// - Every buffer bound belongs to `device`, and is not destroyed (`Buffer::destroy`) while
    ///   it is bound.
    pub unsafe fn new(device: &::wgpu::Device, desc: &WgpuSorterDesc) -> Result<WgpuSorter> {
        // SAFETY: the hal device is only read here, and the raw handles taken from it stay valid
        // while `device` lives: the sorter keeps a clone of it.
        let hal = unsafe { device.as_hal::<Vulkan>() }.ok_or(Error::Unsupported {
            what: "be sorted on by bitonic-vk: its wgpu backend is not Vulkan",
            fix: "create the wgpu instance with Backends::VULKAN (the sort's kernels are Vulkan compute)",
        })?;
        let raw = hal.raw_device().clone();
        let instance = hal.shared_instance().raw_instance();
        let physical = hal.raw_physical_device();
        let family = hal.queue_family_index();
        // SAFETY: `physical` is wgpu's physical device of this live instance.
        let info = unsafe { describe(instance, 0, physical) };
        let cache = DiskCache::open(&raw, desc.pipeline_cache.folder(), &info.cache_id)?;
        let recorder_desc = RecorderDesc {
            max_bindings: desc.max_bindings,
            pipeline_cache: cache.cache,
            shader_int16: device.features().contains(::wgpu::Features::SHADER_I16),
            tuning: desc.tuning,
            ..RecorderDesc::default()
        };
        // The sorter owns the cache from here (its Drop destroys it); on an error, drop it here.
        let made = SortRecorder::with_info(&raw, info, &recorder_desc).and_then(|recorder| {
            let timestamps = Self::timestamps(instance, physical, family, &raw, &recorder, desc.timestamp_queries)?;
            Ok((recorder, timestamps))
        });
        let (recorder, timestamps) = match made {
            Ok(made) => made,
            Err(e) => {
                // SAFETY: the cache is `raw`'s, and no pipeline creation uses it any more.
                unsafe { cache.destroy(&raw) };
                return Err(e);
            }
        };
        Ok(WgpuSorter {
            recorder,
            timestamps,
            cache,
            raw,
            held: Vec::new(),
            #[cfg(feature = "test-hooks")]
            drop_barrier: desc.drop_barrier,
            id: NEXT_SORTER.fetch_add(1, Ordering::Relaxed),
            device: device.clone(),
        })
    }

    /// The timestamp ring of `queries` queries (none for 0).
    fn timestamps(
        instance: &ash::Instance,
        physical: vk::PhysicalDevice,
        family: u32,
        raw: &ash::Device,
        recorder: &SortRecorder,
        queries: u32,
    ) -> Result<Option<Timestamps>> {
        Ok(match queries {
            0 => None,
            queries => {
                // SAFETY: `physical` is wgpu's physical device of this live instance.
                let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
                let bits = families.get(family as usize).map_or(0, |f| f.timestamp_valid_bits);
                if bits == 0 {
                    return Err(Error::Unsupported {
                        what: "time a sort: its queue family has no timestamps",
                        fix: "set WgpuSorterDesc::timestamp_queries to 0",
                    });
                }
                let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(queries);
                // SAFETY: `raw` is the live device; the pool is destroyed in Drop.
                let pool = unsafe { raw.create_query_pool(&info, None) }.map_err(Error::vk("vkCreateQueryPool"))?;
                let period_ns = f64::from(recorder.device_info().limits.timestamp_period);
                let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
                Some(Timestamps { pool, queries, next: 0, lap: 0, period_ns, mask })
            }
        })
    }

    /// The file the pipeline cache was loaded from and is written back to when the sorter
    /// drops ([`WgpuSorterDesc::pipeline_cache`]), if any.
    pub fn pipeline_cache_file(&self) -> Option<&std::path::Path> {
        self.cache.file.as_deref()
    }

    /// Why the pipeline cache file was ignored (truncated, corrupt, another device's), if it was.
    pub fn pipeline_cache_note(&self) -> Option<&str> {
        self.cache.note.as_deref()
    }

    /// Writes the pipeline cache to its file now (it is also written when the sorter drops),
    /// where it grew since it was loaded: after binding at load time, say.
    pub fn save_pipeline_cache(&self) -> Result<()> {
        self.cache.save(&self.raw)
    }

    /// The device as the sort sees it (limits included).
    pub fn device_info(&self) -> &DeviceInfo {
        self.recorder.device_info()
    }

    /// Binds keys (and values, and a GPU-side count) as [`SortRecorder::bind`] does, after
    /// checking each buffer's usage (`STORAGE`, not mappable): the checks, errors and pipelines
    /// are the same. A binding keeps its descriptor set and its buffers until the sorter drops,
    /// whether or not the `WgpuBinding` is dropped: to point it at other buffers (a resize),
    /// [`WgpuSorter::rebind`] it rather than bind again.
    pub fn bind(&mut self, desc: &WgpuBindDesc<'_>) -> Result<WgpuBinding> {
        let (raw_desc, buffers) = self.raw_desc(desc)?;
        let inner = self.recorder.bind(&raw_desc)?;
        self.held.push(buffers);
        Ok(WgpuBinding { inner, slot: self.held.len() - 1, sorter: self.id })
    }

    /// Points `binding` at new regions, as [`SortRecorder::rebind`] does, after waiting for the
    /// device to go idle (so no submitted sort still reads the old ones); the old buffers are
    /// released. On an error `binding` is left as it was.
    pub fn rebind(&mut self, binding: &mut WgpuBinding, desc: &WgpuBindDesc<'_>) -> Result<()> {
        self.check_own(binding)?;
        let (raw_desc, buffers) = self.raw_desc(desc)?;
        self.wait_idle()?;
        // SAFETY: every command buffer recorded with the binding was submitted (`new`'s contract)
        // and the device is idle, so none is pending or recording.
        unsafe { self.recorder.rebind(&mut binding.inner, &raw_desc)? };
        self.held[binding.slot] = buffers;
        Ok(())
    }

    /// A command buffer that sorts the first `n` elements of the binding (min(count, n) with a
    /// GPU-side count), keys of type `K`: submit it after the commands that write them.
    pub fn record<K: SortKey>(&self, binding: &WgpuBinding, n: u32, order: Order) -> Result<::wgpu::CommandBuffer> {
        self.record_batches::<K>(binding, n, 1, order)
    }

    /// [`WgpuSorter::record`] with the key type as a value.
    pub fn record_kind(
        &self,
        binding: &WgpuBinding,
        n: u32,
        kind: KeyKind,
        order: Order,
    ) -> Result<::wgpu::CommandBuffer> {
        let plan = self.plan(binding, n, 1, kind, order)?;
        self.encode(binding, &plan, 1, &Extras::default(), |_| {})
    }

    /// `batches` arrays of `n` elements side by side, sorted each on its own, as
    /// [`SortRecorder::record_batches`].
    pub fn record_batches<K: SortKey>(
        &self,
        binding: &WgpuBinding,
        n: u32,
        batches: u32,
        order: Order,
    ) -> Result<::wgpu::CommandBuffer> {
        let plan = self.plan(binding, n, batches, K::KIND, order)?;
        self.encode(binding, &plan, batches, &Extras::default(), |_| {})
    }

    /// [`WgpuSorter::record_kind`] with a timestamp before the sort and after each pass (as
    /// [`SortRecorder::record_timed`]), from the sorter's ring of
    /// [`WgpuSorterDesc::timestamp_queries`]: read them with [`WgpuSorter::pass_times`].
    pub fn record_timed(
        &mut self,
        binding: &WgpuBinding,
        n: u32,
        kind: KeyKind,
        order: Order,
    ) -> Result<(::wgpu::CommandBuffer, TimedSort)> {
        let plan = self.plan(binding, n, 1, kind, order)?;
        let passes = plan.passes.len() as u32;
        let Some(ts) = self.timestamps.as_mut() else {
            return Err(Error::InvalidOption {
                name: "timestamp_queries",
                value: "0".into(),
                reason: "a timed sort needs WgpuSorterDesc::timestamp_queries",
            });
        };
        if passes + 1 > ts.queries {
            return Err(Error::InvalidOption {
                name: "timestamp_queries",
                value: ts.queries.to_string(),
                reason: "must be at least the timed sort's passes plus one",
            });
        }
        if ts.next + passes + 1 > ts.queries {
            ts.next = 0;
            ts.lap += 1;
        }
        let timed = TimedSort { first: ts.next, passes, sorter: self.id, lap: ts.lap };
        ts.next += passes + 1;
        let extras = Extras { pass_timestamps: Some((ts.pool, timed.first + 1)), ..Extras::default() };
        let pool = ts.pool;
        let before = |cmd: vk::CommandBuffer| {
            // SAFETY: `cmd` is recording outside a render pass; the queries are in the pool and
            // reset here before they are written, and the queue family has timestamps (checked
            // in `new`).
            unsafe {
                self.raw.cmd_reset_query_pool(cmd, pool, timed.first, passes + 1);
                // BOTTOM_OF_PIPE: written once every earlier command has finished, so the first
                // pass's time does not include waiting for the work before the sort.
                self.raw.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool, timed.first);
            }
        };
        let cmd = self.encode(binding, &plan, 1, &extras, before)?;
        Ok((cmd, timed))
    }

    /// Each pass's GPU time in a sort from [`WgpuSorter::record_timed`] (the barrier before it
    /// included), once the GPU has run it (after `Device::poll` has waited for its submission):
    /// `None` while its timestamps are not all written.
    pub fn pass_times(&self, timed: &TimedSort) -> Result<Option<Vec<Duration>>> {
        let ts = match &self.timestamps {
            // Its queries are its own until the ring comes round to them again: this lap, or the
            // last one where the ring has not yet reached them.
            Some(ts)
                if timed.sorter == self.id
                    && (timed.lap == ts.lap || (timed.lap + 1 == ts.lap && timed.first >= ts.next)) =>
            {
                ts
            }
            _ => {
                return Err(Error::InvalidOption {
                    name: "timed",
                    value: "from another sorter, or overwritten".into(),
                    reason: "read a timed sort's times on its own sorter before its queries are taken again",
                })
            }
        };
        let mut ticks = vec![0u64; timed.passes as usize + 1];
        // SAFETY: the queries are within the pool (checked at record_timed), and were reset by the
        // sort's command buffer, submitted by `new`'s contract; without WAIT the call returns
        // NOT_READY while the sort has not run rather than block.
        let got =
            unsafe { self.raw.get_query_pool_results(ts.pool, timed.first, &mut ticks, vk::QueryResultFlags::TYPE_64) };
        match got {
            Ok(()) => {}
            Err(vk::Result::NOT_READY) => return Ok(None),
            Err(e) => return Err(Error::vk("vkGetQueryPoolResults")(e)),
        }
        Ok(Some(
            ticks
                .windows(2)
                .map(|w| Duration::from_nanos(((w[1].wrapping_sub(w[0]) & ts.mask) as f64 * ts.period_ns) as u64))
                .collect(),
        ))
    }

    /// The passes a sort of `n` elements records (0 for n < 2); fails as `record_kind` would.
    pub fn passes(&self, binding: &WgpuBinding, n: u32, kind: KeyKind, order: Order) -> Result<usize> {
        Ok(self.plan(binding, n, 1, kind, order)?.passes.len())
    }

    /// Checks a sort against its binding and plans it, before anything is recorded.
    fn plan(&self, binding: &WgpuBinding, n: u32, batches: u32, kind: KeyKind, order: Order) -> Result<Plan> {
        self.check_own(binding)?;
        self.recorder.plan(&binding.inner, n, batches, kind, order)
    }

    /// Records `before` and the sort of `plan` (from [`WgpuSorter::plan`]) between the two
    /// barriers of the Contract into a new encoder.
    fn encode(
        &self,
        binding: &WgpuBinding,
        plan: &Plan,
        batches: u32,
        extras: &Extras<'_>,
        before: impl FnOnce(vk::CommandBuffer),
    ) -> Result<::wgpu::CommandBuffer> {
        let mut encoder =
            self.device.create_command_encoder(&::wgpu::CommandEncoderDescriptor { label: Some("bitonic-vk sort") });
        let record = |hal: Option<&mut <Vulkan as ::wgpu::hal::Api>::CommandEncoder>| -> Result<()> {
            // The backend was checked in `new`: wgpu gives no encoder for an invalid one, as after
            // the device was lost or destroyed.
            let hal = hal.ok_or(Error::DeviceLost { call: "wgpu::CommandEncoder::as_hal_mut" })?;
            // SAFETY: the encoder is open (wgpu began it for `as_hal_mut`); its command buffer is
            // only recorded into here, never ended.
            let cmd = unsafe { hal.raw_handle() };
            let barrier = |src: vk::PipelineStageFlags, src_access, dst, dst_access| {
                let memory = vk::MemoryBarrier::default().src_access_mask(src_access).dst_access_mask(dst_access);
                // SAFETY: `cmd` is recording outside a render pass on this device.
                unsafe {
                    self.raw.cmd_pipeline_barrier(cmd, src, dst, vk::DependencyFlags::empty(), &[memory], &[], &[])
                };
            };
            #[cfg(feature = "test-hooks")]
            let keep = |which| self.drop_barrier != Some(which);
            #[cfg(not(feature = "test-hooks"))]
            let keep = |_| true;
            before(cmd);
            keep(FrontBarrier::Before).then(|| {
                barrier(
                    vk::PipelineStageFlags::ALL_COMMANDS,
                    vk::AccessFlags::MEMORY_WRITE,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
                )
            });
            // SAFETY: `cmd` is a recording command buffer of the recorder's device outside a
            // render pass, on wgpu's queue family (which has compute: wgpu requires it). The
            // barriers around the sort are the Contract's Before and After; the binding's
            // buffers are held by the sorter, and its pipelines and sets live until the sorter
            // drops, after the device has gone idle (`new`'s contract covers submission).
            unsafe { self.recorder.record_plan(cmd, &binding.inner, plan, batches, extras) };
            keep(FrontBarrier::After).then(|| {
                barrier(
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::AccessFlags::SHADER_WRITE,
                    vk::PipelineStageFlags::ALL_COMMANDS,
                    vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
                )
            });
            Ok(())
        };
        // SAFETY: the closure neither ends nor destroys the command buffer, and the wgpu encoder
        // is not touched while it runs.
        unsafe { encoder.as_hal_mut::<Vulkan, _, _>(record) }?;
        Ok(encoder.finish())
    }

    /// The `ash` regions of `desc`'s slices, checked for `STORAGE` usage, and clones of their
    /// buffers to hold.
    fn raw_desc(&self, desc: &WgpuBindDesc<'_>) -> Result<(BindDesc, Vec<::wgpu::Buffer>)> {
        let mut held = Vec::new();
        let mut region = |what: &'static str, slice: ::wgpu::BufferSlice<'_>| -> Result<BufferRegion> {
            let buffer = slice.buffer();
            // wgpu maps a buffer once the work it tracked is done, and it never sees the sort.
            if buffer.usage().intersects(::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::MAP_WRITE) {
                return Err(Error::InvalidOption {
                    name: what,
                    value: format!("a buffer of usage {:?}", buffer.usage()),
                    reason: "a bound buffer may not be mappable (wgpu could map it while a sort writes it): \
                             copy to a MAP_READ buffer after the sort instead",
                });
            }
            if !buffer.usage().contains(::wgpu::BufferUsages::STORAGE) {
                return Err(Error::InvalidOption {
                    name: what,
                    value: format!("a buffer of usage {:?}", buffer.usage()),
                    reason: "a bound buffer needs BufferUsages::STORAGE: add it where the buffer is created",
                });
            }
            // SAFETY: the handle is only read; the buffer is kept alive by the clone held below
            // and, by `new`'s contract, not destroyed while bound.
            let raw = unsafe { buffer.as_hal::<Vulkan>() }
                .map(|b| {
                    // SAFETY: as above.
                    unsafe { b.raw_handle() }
                })
                .ok_or(Error::InvalidOption {
                    name: what,
                    value: "a destroyed buffer".into(),
                    reason: "bind a live buffer of the device the sorter was made on",
                })?;
            held.push(buffer.clone());
            Ok(BufferRegion { buffer: raw, offset: slice.offset(), size: slice.size() })
        };
        let keys = region("keys", desc.keys)?;
        let values = desc.values.map(|v| region("values", v)).transpose()?;
        let count = desc.count.map(|c| region("count", c)).transpose()?;
        let raw =
            BindDesc { keys, values, count, capacity: desc.capacity, key_width: desc.key_width, batched: desc.batched };
        Ok((raw, held))
    }

    fn check_own(&self, binding: &WgpuBinding) -> Result<()> {
        if binding.sorter != self.id {
            return Err(Error::InvalidOption {
                name: "binding",
                value: "from another sorter".into(),
                reason: "a binding records only through the sorter that made it",
            });
        }
        Ok(())
    }

    fn wait_idle(&self) -> Result<()> {
        self.device
            .poll(::wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|_| Error::DeviceLost { call: "wgpu::Device::poll" })
    }
}

impl Drop for WgpuSorter {
    fn drop(&mut self) {
        // Submitted sorts may still run: wait for them before their pipelines and sets go. A
        // lost device runs nothing more.
        let _ = self.wait_idle();
        // A cache that cannot be written costs the next run its compile time, nothing else.
        let _ = self.cache.save(&self.raw);
        // SAFETY: the cache is this device's, and pipelines are only made by `bind`, which
        // cannot run during drop.
        unsafe { self.cache.destroy(&self.raw) };
        if let Some(ts) = &self.timestamps {
            // SAFETY: the device is idle and the pool was made on it; nothing else uses it.
            unsafe { self.raw.destroy_query_pool(ts.pool, None) };
        }
    }
}
