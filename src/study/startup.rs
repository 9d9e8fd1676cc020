//! What binding a sort costs, as a renderer pays it at load time: a new recorder, its first
//! binding (which makes every pipeline the binding's sorts run), and the first sort, recorded,
//! submitted and waited for.

use std::time::{Duration, Instant};

use gpu_allocator::MemoryLocation;

use crate::error::{Error, Result};
use crate::gpu::record::{self, PassBarrier};
use crate::keys::{KeyKind, Order};
use crate::recorder::Extras;
use crate::sorter::{raw, Sorter, STORAGE};

/// The host time of each step of a first sort ([`Sorter::time_startup`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Startup {
    /// Making the recorder (layouts, descriptor pool; no pipeline).
    pub recorder: Duration,
    /// The first `bind`: the binding's checks, its pipelines and its descriptor set.
    pub bind: Duration,
    /// Planning, recording, submitting and waiting for the first sort.
    pub first_sort: Duration,
    /// How many pipelines the binding made.
    pub pipelines: usize,
}

impl Startup {
    /// The whole cost, from no recorder to a finished sort.
    pub fn total(&self) -> Duration {
        self.recorder + self.bind + self.first_sort
    }
}

impl Sorter {
    /// Times a renderer's first sort of `n` elements of `kind` (with values where `pairs`) on a
    /// recorder made for it, through the context's pipeline cache: the device buffers are made
    /// first and left out of the time, and the keys are zeros. The sorter's recorder is replaced
    /// by the new one.
    pub fn time_startup(&mut self, kind: KeyKind, pairs: bool, n: usize) -> Result<Startup> {
        if n < 2 {
            return Err(Error::InvalidOption { name: "n", value: n.to_string(), reason: "must be at least 2" });
        }
        let width = kind.width();
        self.check_size(n, width)?;
        self.settle()?;
        let shared = self.ctx.shared.clone();
        let key_bytes = n as u64 * u64::from(width.bytes());
        Self::ensure(&shared, &mut self.keys, "keys", key_bytes, STORAGE, MemoryLocation::GpuOnly)?;
        if pairs {
            Self::ensure(&shared, &mut self.values, "values", n as u64 * 4, STORAGE, MemoryLocation::GpuOnly)?;
        }
        let start = Instant::now();
        // The old binding's set goes with the old recorder's pool.
        self.binding = None;
        self.recorder = Self::new_recorder(&shared, &self.desc)?;
        let recorder = start.elapsed();

        let start = Instant::now();
        self.bind(pairs, width, n)?;
        let bind = start.elapsed();

        let start = Instant::now();
        let plan = self.recorder.plan(self.binding(), n as u32, 1, kind, Order::Ascending)?;
        self.begin()?;
        let device = &shared.device;
        for (buffer, bytes, used) in [(raw(&self.keys), key_bytes, true), (raw(&self.values), n as u64 * 4, pairs)] {
            if used {
                // SAFETY: `cmd` is recording (begun above) and the buffer, made with TRANSFER_DST,
                // holds at least `bytes`, a multiple of 4.
                unsafe { device.cmd_fill_buffer(self.cmd, buffer, 0, bytes, 0) };
            }
        }
        record::input_barrier(device, self.cmd);
        let extras = Extras { barrier: PassBarrier::Memory, max_groups: Some(self.max_groups), ..Extras::default() };
        // SAFETY: `cmd` is recording, outside a render pass, on the compute queue; the binding, its
        // buffers and the recorder outlive the submission, which `finish` waits for.
        unsafe { self.recorder.record_plan(self.cmd, self.binding(), &plan, 1, &extras) };
        self.finish()?;
        let first_sort = start.elapsed();
        Ok(Startup { recorder, bind, first_sort, pipelines: self.recorder.pipelines_made() })
    }
}
