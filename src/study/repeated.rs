//! Sorts of one input repeated back to back and timed, whole or pass by pass: `bench`'s and
//! `passes`' measurements.

use std::time::{Duration, Instant};

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::abi::KeyWidth;
use crate::error::{Error, Result};
use crate::gpu::record::{self, PassBarrier};
use crate::keys::{KeyKind, Order, SortKey};
use crate::network::commands::dispatch_pass;
use crate::network::{Encoder as _, Plan};
use crate::recorder::Extras;
use crate::sorter::{copies, raw, ticks_to_duration, words_per_key, Sorter, STORAGE};

use super::{pass_barrier, BarrierFlavor, PassInfo, PassStudy, PassSync, MAX_TIMED_REPS};

impl Sorter {
    /// Times `reps` sorts of the same input back to back, for benchmarks: the input is uploaded
    /// once and kept in two more device buffers; each sort copies it into place on the GPU, then
    /// runs every pass between two timestamps, all in one command buffer, so the GPU never idles
    /// between sorts and its clocks stay up (between separate sorts the host's checks let a GPU
    /// drop to its idle clock). Returns each sort's GPU
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
        let n = keys.len() / words_per_key(K::KIND.width());
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
                n: n as u32,
                passes: self.passes(n, pairs, K::KIND, order)?,
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
    pub(crate) fn ensure_queries(&mut self, count: u32) -> Result<()> {
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
        self.write_count(cmd);
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
                drop_barrier_before_pass: self.desc.hooks().drop_barrier_before_pass,
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
    /// and waited for (its fence polled) before the next is recorded. Each command buffer starts
    /// with the barrier that orders it after the pass before (submission order alone orders
    /// execution, not memory).
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
                dispatch_pass(&mut encoder, pass, self.max_groups);
                encoder.pass_done(index);
                self.finish_polling()?;
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
        PassStudy { n: plan.n, passes: PassInfo::of(&plan), pass_times, totals, wall }
    }
}
