//! The barrier study's machinery (feature `study`): the pass model's calibration (a vec4 copy and
//! chains of empty dispatches), per-pass timestamps under each way of separating passes, and sorts
//! timed back to back. `bitonic-vk passes` and `bench` are built on it; docs/BARRIERS.md has the
//! study.

mod repeated;
mod startup;
mod warm_up;

use std::time::Duration;

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::abi::{KeyWidth, PushConstants};
use crate::context::Shared;
use crate::device::DeviceType;
use crate::error::{Error, Result};
use crate::gpu::pipelines::Probes;
use crate::gpu::record::{self, PassBarrier};
use crate::keys::{KeyKind, Order};
use crate::network::Plan;
use crate::sorter::{raw, ticks_to_duration, Sorter, STORAGE};

pub use crate::gpu::record::BarrierFlavor;
pub use startup::Startup;
pub use warm_up::WarmUp;

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
    /// ([`WarmUp`], counted from the end of the first batch of copies; the lead in
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

/// One pass of a sort, as [`Sorter::study`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassInfo {
    /// The kernel it runs (`tile_sort`, `global_merge`, `local_merge`, `segment_merge`).
    pub kernel: &'static str,
    /// log2 of the block size of the stage it belongs to.
    pub stage: u32,
    /// Its comparator stride (push constant `inc`).
    pub inc: u32,
    /// Whether it opens with a stage's flip (push constant `dir`).
    pub dir: u32,
    /// Substages a global pass fuses; windows of a local merge; whether a tile sort or segment
    /// pass loops.
    pub substages: u32,
    /// Workgroups it dispatches.
    pub workgroups: u32,
}

impl PassInfo {
    fn of(plan: &Plan) -> Vec<PassInfo> {
        plan.passes
            .iter()
            .map(|p| PassInfo {
                kernel: p.kind.name(),
                stage: p.stage,
                inc: p.push.inc,
                dir: p.push.dir,
                substages: p.substages,
                workgroups: p.workgroups,
            })
            .collect()
    }
}

/// What [`Sorter::study`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PassStudy {
    /// Elements per sort.
    pub n: u32,
    /// The passes each sort ran.
    pub passes: Vec<PassInfo>,
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

impl Sorter {
    /// Sorts through a binding with a GPU-side count from now on (`None`: without): each later
    /// sort, timed or not, takes min(count, n) elements, the count written into a buffer of the
    /// sorter's on the GPU before its passes, which are recorded for n, every one after the first
    /// trimmed to the count by an indirect dispatch, as a renderer's are (`bitonic-vk bench --count`). The elements past
    /// the count come back as they went in.
    pub fn set_gpu_count(&mut self, count: Option<u32>) {
        self.gpu_count = count;
    }

    /// Writes the GPU-side count into its buffer (where there is one), before the input barrier
    /// that orders the sort's passes after every transfer.
    pub(crate) fn write_count(&self, cmd: vk::CommandBuffer) {
        if let (Some(count), true) = (self.gpu_count, self.count_buffer.is_some()) {
            record::fill(&self.ctx.shared.device, cmd, raw(&self.count_buffer), count);
        }
    }
}

impl Sorter {
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
        // On a GPU the copies first warm up as the sorts do, in command buffers of their own until
        // a copy's time settles, and then every probe runs in one command buffer after PROBE_LEAD
        // of untimed copies, so that no host round trip sits between the probes and the work
        // ahead of them: a fresh GPU otherwise read the probes at about half speed
        // (docs/LEVERS.md). A CPU device gets neither, which would only add to its time.
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

    /// The passes a sort of `n` elements (pairs with `pairs`) records.
    pub fn passes(&self, n: usize, pairs: bool, kind: KeyKind, order: Order) -> Result<Vec<PassInfo>> {
        Ok(PassInfo::of(&self.plan(n, pairs, kind, order)?))
    }
}

/// without VK_KHR_synchronization2.
pub(crate) fn pass_barrier<'a>(
    flavor: BarrierFlavor,
    shared: &'a Shared,
    buffers: &'a [vk::Buffer],
) -> Result<PassBarrier<'a>> {
    match flavor {
        BarrierFlavor::Memory => Ok(PassBarrier::Memory),
        BarrierFlavor::Buffer => Ok(PassBarrier::Buffer(buffers)),
        BarrierFlavor::Memory2 => shared.sync2.as_ref().map(PassBarrier::Memory2).ok_or(Error::Unsupported {
            what: "record synchronization2 barriers",
            fix: "it lacks VK_KHR_synchronization2; use the memory or buffer barrier flavour",
        }),
    }
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
