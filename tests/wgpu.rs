//! The wgpu front on wgpu's Vulkan backend, as a wgpu renderer uses it: a wgpu compute pass
//! writes the keys, values and count into regions at non-zero offsets of wgpu buffers, the sort's
//! command buffer follows it, and wgpu copies the buffers to mappable ones, all in one
//! submission (or in several). Every result is checked against the standard library's sort, and
//! every byte outside what the sort may write against the input. wgpu's validation and the
//! Khronos layer are on: an error-severity message fails the test.
//!
//! `BITONIC_VK_TEST_DROP_BARRIER=wgpu-before` or `wgpu-after` records every sort without that
//! barrier of the front's contract, for a GPU that overlaps work across command buffers, where
//! `back_to_back` (with `BITONIC_VK_TEST_SCALE=full`) would then fail. lavapipe runs one command
//! after another, and the H200 (driver 580) also passed it either way.
#![cfg(feature = "wgpu")]

mod common;
use common::*;

use std::borrow::Cow;
use std::sync::Mutex;

use bitonic_vk::wgpu::{FrontBarrier, WgpuBindDesc, WgpuSorter, WgpuSorterDesc};
use bitonic_vk::{Error, KeyKind, KeyWidth, Order, PipelineCacheDir};
use rand::{Rng, SeedableRng};
use wgpu::util::DeviceExt;

/// Where the sorted regions start in their buffers: wgpu's default storage offset alignment.
const OFFSET: u64 = 256;

static ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Keeps the error-severity messages wgpu logs (the validation layer's among them).
struct Errors;

impl log::Log for Errors {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }
    fn log(&self, record: &log::Record<'_>) {
        if record.level() <= log::Level::Warn {
            eprintln!("[{} {}] {}", record.level(), record.target(), record.args());
        }
        // Debian 12's layer (1.3.239) predates SPIR-V's WGSL source language (10), which naga
        // writes into the test's own fill shader; nothing else of the module is refused.
        let message = record.args().to_string();
        if message.contains("Invalid source language operand: 10") || message.starts_with("\tobjects:") {
            return;
        }
        if record.level() == log::Level::Error {
            ERRORS.lock().unwrap_or_else(|e| e.into_inner()).push(message);
        }
    }
    fn flush(&self) {}
}

fn assert_no_errors() {
    let errors = std::mem::take(&mut *ERRORS.lock().unwrap_or_else(|e| e.into_inner()));
    assert!(errors.is_empty(), "wgpu or the validation layer reported errors: {errors:#?}");
}

/// A wgpu device on the Vulkan backend with validation, and the compute pass that fills buffers.
struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    fill: wgpu::ComputePipeline,
}

const FILL: &str = r"
struct Params { words: u32, count: u32 }
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read_write> count: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.y * 2097152u + id.x;
    if (i < params.words) { dst[i] = src[i]; }
    if (i == 0u) { count[0] = params.count; }
}
";

impl Gpu {
    fn new() -> Gpu {
        static LOGGER: Errors = Errors;
        let _ = log::set_logger(&LOGGER).map(|()| log::set_max_level(log::LevelFilter::Warn));
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN;
        desc.flags = wgpu::InstanceFlags::VALIDATION | wgpu::InstanceFlags::DEBUG;
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
            .expect("a Vulkan adapter (lavapipe: apt-get install mesa-vulkan-drivers)");
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("bitonic-vk test"),
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .expect("a wgpu device");
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("fill"),
            source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(FILL)),
        });
        let fill = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("fill"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        Gpu { device, queue, fill }
    }

    fn sorter(&self, desc: &WgpuSorterDesc) -> WgpuSorter {
        // SAFETY: every command buffer the tests record is submitted before its binding is
        // rebound and before the sorter drops; the bound buffers are this device's and never
        // destroyed.
        unsafe { WgpuSorter::new(&self.device, desc) }.expect("a sorter")
    }

    /// A sorter of `desc` that keeps no pipeline cache file, without the barrier
    /// `BITONIC_VK_TEST_DROP_BARRIER` names (`wgpu-before` or `wgpu-after`), if it names one.
    fn sorter_without_cache(&self, desc: WgpuSorterDesc) -> WgpuSorter {
        let drop_barrier = match std::env::var("BITONIC_VK_TEST_DROP_BARRIER").as_deref() {
            Ok("wgpu-before") => Some(FrontBarrier::Before),
            Ok("wgpu-after") => Some(FrontBarrier::After),
            _ => None,
        };
        self.sorter(&WgpuSorterDesc { pipeline_cache: PipelineCacheDir::Off, drop_barrier, ..desc })
    }

    fn buffer(&self, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// A command buffer whose compute pass copies `words` into `dst` from its start (the whole
    /// buffer) and writes `count` into the first word of `count_buffer`.
    fn fill(&self, dst: &wgpu::Buffer, words: &[u32], count_buffer: &wgpu::Buffer, count: u32) -> wgpu::CommandBuffer {
        let src = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("source"),
            contents: bytemuck::cast_slice(words),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let params = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("params"),
            contents: bytemuck::cast_slice(&[words.len() as u32, count, 0, 0]),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let layout = self.fill.get_bind_group_layout(0);
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: src.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: dst.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: count_buffer.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 3, resource: params.as_entire_binding() },
            ],
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.fill);
            pass.set_bind_group(0, &group, &[]);
            let groups = (words.len() as u32).div_ceil(64);
            // Rows of 32 768 workgroups: wgpu allows 65 535 a dimension.
            pass.dispatch_workgroups(groups.min(32_768), groups.div_ceil(32_768), 1);
        }
        encoder.finish()
    }

    /// A command buffer that copies `buffer` into a new mappable one, which it returns.
    fn copy_out(&self, buffer: &wgpu::Buffer) -> (wgpu::CommandBuffer, wgpu::Buffer) {
        let out = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: buffer.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, 0, &out, 0, buffer.size());
        (encoder.finish(), out)
    }

    fn read(&self, buffer: &wgpu::Buffer) -> Vec<u32> {
        buffer.slice(..).map_async(wgpu::MapMode::Read, |r| r.expect("map"));
        self.device.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
        let words = bytemuck::cast_slice(&buffer.slice(..).get_mapped_range().expect("mapped")).to_vec();
        buffer.unmap();
        words
    }
}

/// Random words with many repeats: the low bits of a few values, spread over every bit pattern.
fn random_words(rng: &mut rand::rngs::StdRng, n: usize) -> Vec<u32> {
    let pool: Vec<u32> = (0..n / 3 + 1).map(|_| rng.random()).collect();
    (0..n).map(|_| pool[rng.random_range(0..pool.len())]).collect()
}

/// Checks `keys_after` (the sorted region's keys, as words) against the CPU's sort of `input`.
fn check_keys(what: &str, kind: KeyKind, order: Order, input: &[u32], sorted: &[u32], values: Option<&[u32]>) {
    macro_rules! by {
        ($t:ty, $cmp:expr) => {
            assert_sorted::<$t>(what, bytemuck::cast_slice(input), order, $cmp, bytemuck::cast_slice(sorted), values)
        };
    }
    match kind {
        KeyKind::U32 => by!(u32, |a: &u32, b: &u32| a.cmp(b)),
        KeyKind::I32 => by!(i32, |a: &i32, b: &i32| a.cmp(b)),
        KeyKind::F32 => by!(f32, |a: &f32, b: &f32| a.total_cmp(b)),
        KeyKind::U64 => by!(u64, |a: &u64, b: &u64| a.cmp(b)),
        KeyKind::I64 => by!(i64, |a: &i64, b: &i64| a.cmp(b)),
        KeyKind::F64 => by!(f64, |a: &f64, b: &f64| a.total_cmp(b)),
    }
}

/// One wgpu buffer holding a region of `capacity` elements of `word_per` words at [`OFFSET`],
/// with a tail, and the words it was last filled with.
struct Region {
    buffer: wgpu::Buffer,
    capacity: u32,
    words_per: usize,
    filled: Vec<u32>,
}

impl Region {
    fn new(gpu: &Gpu, capacity: u32, words_per: usize) -> Region {
        let bytes = OFFSET * 2 + u64::from(capacity) * 4 * words_per as u64;
        Region { buffer: gpu.buffer(bytes), capacity, words_per, filled: Vec::new() }
    }
    fn slice(&self) -> wgpu::BufferSlice<'_> {
        self.buffer.slice(OFFSET..OFFSET + u64::from(self.capacity) * 4 * self.words_per as u64)
    }
    /// Fills the whole buffer with random words, `region` (the elements' words) at [`OFFSET`].
    fn fill(
        &mut self,
        gpu: &Gpu,
        rng: &mut rand::rngs::StdRng,
        region: &[u32],
        count: (&wgpu::Buffer, u32),
    ) -> wgpu::CommandBuffer {
        let mut words: Vec<u32> = (0..self.buffer.size() / 4).map(|_| rng.random()).collect();
        let at = (OFFSET / 4) as usize;
        words[at..at + region.len()].copy_from_slice(region);
        self.filled = words;
        gpu.fill(&self.buffer, &self.filled, count.0, count.1)
    }
    /// The sorted elements' words (the first `sorted` elements), after checking that every other
    /// word of the buffer is as filled.
    fn sorted(&self, what: &str, words: &[u32], sorted: usize) -> Vec<u32> {
        let at = (OFFSET / 4) as usize;
        let end = at + sorted * self.words_per;
        assert_eq!(words.len(), self.filled.len(), "{what}: buffer length");
        if let Some(i) = (0..words.len()).find(|&i| (i < at || i >= end) && words[i] != self.filled[i]) {
            panic!("{what}: word {i} outside the sorted elements changed: {:#x} -> {:#x}", self.filled[i], words[i]);
        }
        words[at..end].to_vec()
    }
}

#[test]
fn every_key_type_keys_and_pairs_both_orders_in_one_submission() {
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(61);
    let scratch = gpu.buffer(16);
    let n = scaled(3001u32, 300_001);
    for width in [KeyWidth::Bits32, KeyWidth::Bits64] {
        let words_per = (width.bytes() / 4) as usize;
        let mut keys = Region::new(&gpu, n, words_per);
        let mut values = Region::new(&gpu, n, 1);
        for pairs in [false, true] {
            let binding = sorter
                .bind(&WgpuBindDesc {
                    values: pairs.then(|| values.slice()),
                    key_width: width,
                    ..WgpuBindDesc::new(keys.slice(), n)
                })
                .expect("bind");
            let kinds = KeyKind::ALL.iter().filter(|k| k.width() == width);
            for (&kind, order) in kinds.flat_map(|k| [(k, Order::Ascending), (k, Order::Descending)]) {
                let what = format!("{kind:?} {} {order:?}", if pairs { "pairs" } else { "keys" });
                let input = random_words(&mut rng, n as usize * words_per);
                let index: Vec<u32> = (0..n).collect();
                let mut submit = vec![keys.fill(&gpu, &mut rng, &input, (&scratch, 0))];
                if pairs {
                    submit.push(values.fill(&gpu, &mut rng, &index, (&scratch, 0)));
                }
                submit.push(sorter.record_kind(&binding, n, kind, order).expect("record"));
                let (copy_keys, keys_out) = gpu.copy_out(&keys.buffer);
                let (copy_values, values_out) = gpu.copy_out(&values.buffer);
                submit.extend([copy_keys, copy_values]);
                gpu.queue.submit(submit);
                let sorted = keys.sorted(&what, &gpu.read(&keys_out), n as usize);
                let sorted_values = pairs.then(|| values.sorted(&what, &gpu.read(&values_out), n as usize));
                check_keys(&what, kind, order, &input, &sorted, sorted_values.as_deref());
            }
        }
    }
    drop(sorter);
    assert_no_errors();
}

#[test]
fn a_gpu_side_count_below_and_above_capacity_two_frames_through_one_binding() {
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(62);
    let capacity = 4096u32;
    let mut keys = Region::new(&gpu, capacity, 1);
    let mut values = Region::new(&gpu, capacity, 1);
    let count = gpu.buffer(256);
    let binding = sorter
        .bind(&WgpuBindDesc {
            values: Some(values.slice()),
            count: Some(count.slice(..4)),
            ..WgpuBindDesc::new(keys.slice(), capacity)
        })
        .expect("bind");
    // Frame by frame, each in its own submissions: fill, then sort, then copy out.
    for (frame, written) in [(1, 1234u32), (2, capacity + 100), (3, 0), (4, 1)] {
        let what = format!("frame {frame}, count {written}");
        let input = random_words(&mut rng, capacity as usize);
        let index: Vec<u32> = (0..capacity).collect();
        gpu.queue.submit([keys.fill(&gpu, &mut rng, &input, (&count, written))]);
        gpu.queue.submit([values.fill(&gpu, &mut rng, &index, (&count, written))]);
        gpu.queue.submit([sorter.record::<f32>(&binding, capacity, Order::Descending).expect("record")]);
        let (copy_keys, keys_out) = gpu.copy_out(&keys.buffer);
        let (copy_values, values_out) = gpu.copy_out(&values.buffer);
        gpu.queue.submit([copy_keys, copy_values]);
        let m = written.min(capacity) as usize;
        let sorted = keys.sorted(&what, &gpu.read(&keys_out), m);
        let sorted_values = values.sorted(&what, &gpu.read(&values_out), m);
        check_keys(&what, KeyKind::F32, Order::Descending, &input[..m], &sorted, Some(&sorted_values));
    }
    drop(sorter);
    assert_no_errors();
}

#[test]
fn batches_sort_each_array_on_its_own() {
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(63);
    let (n, batches) = (700u32, 5u32);
    let scratch = gpu.buffer(16);
    let mut keys = Region::new(&gpu, n * batches, 1);
    let binding =
        sorter.bind(&WgpuBindDesc { batched: true, ..WgpuBindDesc::new(keys.slice(), n * batches) }).expect("bind");
    let input = random_words(&mut rng, (n * batches) as usize);
    let fill = keys.fill(&gpu, &mut rng, &input, (&scratch, 0));
    let sort = sorter.record_batches::<i32>(&binding, n, batches, Order::Ascending).expect("record");
    let (copy, out) = gpu.copy_out(&keys.buffer);
    gpu.queue.submit([fill, sort, copy]);
    let sorted = keys.sorted("batches", &gpu.read(&out), (n * batches) as usize);
    for b in 0..batches as usize {
        let (lo, hi) = (b * n as usize, (b + 1) * n as usize);
        check_keys(&format!("array {b}"), KeyKind::I32, Order::Ascending, &input[lo..hi], &sorted[lo..hi], None);
    }
    drop(sorter);
    assert_no_errors();
}

#[test]
fn a_stable_sort_packs_key_and_index_into_8_byte_keys() {
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(64);
    let n = 2500u32;
    let scratch = gpu.buffer(16);
    let mut keys = Region::new(&gpu, n, 2);
    let binding =
        sorter.bind(&WgpuBindDesc { key_width: KeyWidth::Bits64, ..WgpuBindDesc::new(keys.slice(), n) }).expect("bind");
    for order in [Order::Ascending, Order::Descending] {
        let input: Vec<u32> = (0..n).map(|_| rng.random_range(0..40)).collect();
        // A descending sort puts larger indices first: complement them to keep input order.
        let tie = |i: u32| if order == Order::Descending { !i } else { i };
        let packed: Vec<u64> =
            input.iter().enumerate().map(|(i, &k)| u64::from(k) << 32 | u64::from(tie(i as u32))).collect();
        let fill = keys.fill(&gpu, &mut rng, bytemuck::cast_slice(&packed), (&scratch, 0));
        let sort = sorter.record::<u64>(&binding, n, order).expect("record");
        let (copy, out) = gpu.copy_out(&keys.buffer);
        gpu.queue.submit([fill, sort, copy]);
        let sorted: Vec<u64> = bytemuck::cast_slice(&keys.sorted("stable", &gpu.read(&out), n as usize)).to_vec();
        let sorted_keys: Vec<u32> = sorted.iter().map(|p| (p >> 32) as u32).collect();
        let origins: Vec<u32> = sorted.iter().map(|&p| tie(p as u32)).collect();
        if let Err(e) = Reference::new(&input, order, |a: &u32, b: &u32| a.cmp(b)).check_stable(&sorted_keys, &origins)
        {
            panic!("stable {order:?}: {e}");
        }
    }
    drop(sorter);
    assert_no_errors();
}

#[test]
fn a_timed_sort_reports_each_pass() {
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc { timestamp_queries: 64, ..WgpuSorterDesc::default() });
    let mut rng = rand::rngs::StdRng::seed_from_u64(65);
    let n = 3000u32;
    let scratch = gpu.buffer(16);
    let mut keys = Region::new(&gpu, n, 1);
    let binding = sorter.bind(&WgpuBindDesc::new(keys.slice(), n)).expect("bind");
    let input = random_words(&mut rng, n as usize);
    let fill = keys.fill(&gpu, &mut rng, &input, (&scratch, 0));
    let (sort, timed) = sorter.record_timed(&binding, n, KeyKind::U32, Order::Ascending).expect("record");
    assert_eq!(timed.passes(), sorter.passes(&binding, n, KeyKind::U32, Order::Ascending).expect("passes"));
    assert!(timed.passes() > 1, "a sort of {n} takes more than one pass");
    let (copy, out) = gpu.copy_out(&keys.buffer);
    gpu.queue.submit([fill, sort, copy]);
    let sorted = keys.sorted("timed", &gpu.read(&out), n as usize);
    check_keys("timed", KeyKind::U32, Order::Ascending, &input, &sorted, None);
    let times = sorter.pass_times(&timed).expect("pass times").expect("written once the device is idle");
    assert_eq!(times.len(), timed.passes());
    // Each pass's time is a difference of timestamps in order: a wrong order or reset wraps to
    // centuries.
    let total: std::time::Duration = times.iter().sum();
    assert!(total < std::time::Duration::from_secs(60), "{times:?}");
    // The ring of 64 queries comes round: the first sort's queries are taken again, and reading
    // them is an error, not another sort's times.
    let mut later = Vec::new();
    while later.len() * (timed.passes() + 1) < 64 {
        let (sort, again) = sorter.record_timed(&binding, n, KeyKind::U32, Order::Ascending).expect("record");
        gpu.queue.submit([sort]);
        later.push(again);
    }
    gpu.device.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
    let err = sorter.pass_times(&timed).expect_err("overwritten");
    assert!(err.to_string().contains("overwritten"), "{err}");
    let last = later.last().expect("a later sort");
    assert_eq!(sorter.pass_times(last).expect("the latest sort").map(|t| t.len()), Some(last.passes()));
    drop(sorter);
    assert_no_errors();
}

#[test]
fn bad_bindings_and_requests_are_errors_naming_the_fix() {
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let uniform = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4096,
        usage: wgpu::BufferUsages::UNIFORM,
        mapped_at_creation: false,
    });
    let err = sorter.bind(&WgpuBindDesc::new(uniform.slice(..), 1024)).expect_err("a uniform buffer");
    assert!(err.to_string().contains("STORAGE"), "{err}");
    let mappable = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4096,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let err = sorter.bind(&WgpuBindDesc::new(mappable.slice(..), 1024)).expect_err("a mappable buffer");
    assert!(err.to_string().contains("mappable"), "{err}");
    let keys = gpu.buffer(4096 + 256);
    let values = WgpuBindDesc { values: Some(uniform.slice(..)), ..WgpuBindDesc::new(keys.slice(..1024), 256) };
    let err = sorter.bind(&values).expect_err("uniform values");
    assert!(err.to_string().contains("values") && err.to_string().contains("STORAGE"), "{err}");
    let count = WgpuBindDesc { count: Some(uniform.slice(..4)), ..WgpuBindDesc::new(keys.slice(..1024), 256) };
    let err = sorter.bind(&count).expect_err("a uniform count");
    assert!(err.to_string().contains("count") && err.to_string().contains("STORAGE"), "{err}");
    let err = sorter.bind(&WgpuBindDesc::new(keys.slice(..), 2048)).expect_err("too small");
    assert!(matches!(err, Error::BufferTooSmall { .. }), "{err}");
    let alignment = sorter.device_info().limits.min_storage_buffer_offset_alignment;
    if alignment > 4 {
        let err = sorter.bind(&WgpuBindDesc::new(keys.slice(4..), 1024)).expect_err("misaligned");
        assert!(matches!(err, Error::MisalignedOffset { .. }), "{err}");
    }
    let binding = sorter.bind(&WgpuBindDesc::new(keys.slice(256..), 1024)).expect("bind");
    let err = sorter.record::<u32>(&binding, 1025, Order::Ascending).expect_err("over capacity");
    assert!(matches!(err, Error::OverCapacity { .. }), "{err}");
    let err = sorter.record::<u64>(&binding, 1000, Order::Ascending).expect_err("8-byte keys, 4-byte binding");
    assert!(matches!(err, Error::KeyWidthMismatch { .. }), "{err}");
    let err = sorter.record_batches::<u32>(&binding, 100, 2, Order::Ascending).expect_err("unbatched");
    assert!(err.to_string().contains("batched"), "{err}");
    let err = sorter.record_timed(&binding, 1000, KeyKind::U32, Order::Ascending).expect_err("no queries");
    assert!(err.to_string().contains("timestamp_queries"), "{err}");
    let other = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let err = other.record::<u32>(&binding, 1000, Order::Ascending).expect_err("another sorter's binding");
    assert!(err.to_string().contains("another sorter"), "{err}");
    drop((sorter, other));
    assert_no_errors();
}

#[test]
fn sorts_back_to_back_in_one_submission_see_each_others_writes() {
    // Filled once, then sorted descending, copied, sorted ascending and copied, in one
    // submission: the second copy follows a copy of the same buffer, so wgpu records no barrier
    // before it and only the sort's own final barrier orders the second sort's writes.
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(66);
    let n = scaled(5000u32, 1 << 22);
    let scratch = gpu.buffer(16);
    let mut keys = Region::new(&gpu, n, 1);
    let binding = sorter.bind(&WgpuBindDesc::new(keys.slice(), n)).expect("bind");
    let input = random_words(&mut rng, n as usize);
    let fill = keys.fill(&gpu, &mut rng, &input, (&scratch, 0));
    let down = sorter.record::<f32>(&binding, n, Order::Descending).expect("record");
    let (copy_down, out_down) = gpu.copy_out(&keys.buffer);
    let up = sorter.record::<f32>(&binding, n, Order::Ascending).expect("record");
    let (copy_up, out_up) = gpu.copy_out(&keys.buffer);
    gpu.queue.submit([fill, down, copy_down, up, copy_up]);
    for (order, out) in [(Order::Descending, &out_down), (Order::Ascending, &out_up)] {
        let sorted = keys.sorted("back to back", &gpu.read(out), n as usize);
        check_keys(&format!("back to back {order:?}"), KeyKind::F32, order, &input, &sorted, None);
    }
    drop(sorter);
    assert_no_errors();
}

#[test]
fn a_rebound_binding_sorts_its_new_buffers_and_a_failed_rebind_keeps_the_old() {
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(67);
    let scratch = gpu.buffer(16);
    let mut small = Region::new(&gpu, 1000, 1);
    let mut binding = sorter.bind(&WgpuBindDesc::new(small.slice(), 1000)).expect("bind");
    let mut large = Region::new(&gpu, 6000, 1);
    sorter.rebind(&mut binding, &WgpuBindDesc::new(large.slice(), 6000)).expect("rebind");
    assert_eq!(binding.binding().capacity(), 6000);
    let too_small = WgpuBindDesc::new(small.slice(), 6000);
    assert!(matches!(sorter.rebind(&mut binding, &too_small), Err(Error::BufferTooSmall { .. })));
    assert_eq!(binding.binding().capacity(), 6000, "a failed rebind leaves the binding as it was");
    let input = random_words(&mut rng, 6000);
    let small_input = random_words(&mut rng, 1000);
    let fill = large.fill(&gpu, &mut rng, &input, (&scratch, 0));
    let fill_small = small.fill(&gpu, &mut rng, &small_input, (&scratch, 0));
    let sort = sorter.record::<u32>(&binding, 6000, Order::Ascending).expect("record");
    let (copy, out) = gpu.copy_out(&large.buffer);
    let (copy_small, out_small) = gpu.copy_out(&small.buffer);
    gpu.queue.submit([fill, fill_small, sort, copy, copy_small]);
    let sorted = large.sorted("rebound", &gpu.read(&out), 6000);
    check_keys("rebound", KeyKind::U32, Order::Ascending, &input, &sorted, None);
    // The old buffer is no longer the binding's: nothing of it moved.
    small.sorted("the old buffer", &gpu.read(&out_small), 0);
    drop(sorter);
    assert_no_errors();
}

#[test]
fn dropping_the_sorter_waits_for_its_submitted_sorts() {
    let gpu = Gpu::new();
    let mut sorter = gpu.sorter_without_cache(WgpuSorterDesc::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(68);
    let n = 20_000u32;
    let scratch = gpu.buffer(16);
    let mut keys = Region::new(&gpu, n, 1);
    let binding = sorter.bind(&WgpuBindDesc::new(keys.slice(), n)).expect("bind");
    let input = random_words(&mut rng, n as usize);
    let fill = keys.fill(&gpu, &mut rng, &input, (&scratch, 0));
    let sort = sorter.record::<i32>(&binding, n, Order::Descending).expect("record");
    let (copy, out) = gpu.copy_out(&keys.buffer);
    gpu.queue.submit([fill, sort, copy]);
    // Its pipelines and descriptor set go while the sort may still run: the validation layer
    // reports any destroyed in use.
    drop(sorter);
    let sorted = keys.sorted("dropped", &gpu.read(&out), n as usize);
    check_keys("dropped", KeyKind::I32, Order::Descending, &input, &sorted, None);
    assert_no_errors();
}

#[test]
fn the_pipeline_cache_is_written_when_the_sorter_drops_and_loaded_by_the_next() {
    let gpu = Gpu::new();
    let folder = tempfile::tempdir().expect("a temporary folder");
    let desc =
        WgpuSorterDesc { pipeline_cache: PipelineCacheDir::At(folder.path().into()), ..WgpuSorterDesc::default() };
    let keys = gpu.buffer(4096);
    let mut sorter = gpu.sorter(&desc);
    let file = sorter.pipeline_cache_file().expect("a cache file in the folder").to_path_buf();
    assert!(file.starts_with(folder.path()), "{}", file.display());
    assert!(!file.exists(), "nothing written before the sorter drops");
    sorter.bind(&WgpuBindDesc::new(keys.slice(..), 1024)).expect("bind");
    drop(sorter);
    let written = std::fs::metadata(&file).expect("written when the sorter dropped").len();
    assert!(written > 0);
    let again = gpu.sorter(&desc);
    assert_eq!(again.pipeline_cache_note(), None, "the file written is this device's");
    assert_eq!(again.pipeline_cache_file(), Some(file.as_path()));
    drop(again);
    std::fs::write(&file, b"truncated").expect("overwrite the cache file");
    let third = gpu.sorter(&desc);
    let note = third.pipeline_cache_note().expect("a note for a file that is not a cache");
    assert!(note.contains(&file.display().to_string()), "{note}");
    drop(third);
    assert_no_errors();
}

#[test]
fn a_device_on_another_backend_is_refused() {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::NOOP;
    desc.backend_options.noop.enable = true;
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&Default::default())).expect("the no-op adapter");
    let (device, _queue) = pollster::block_on(adapter.request_device(&Default::default())).expect("a no-op device");
    // SAFETY: nothing is recorded or bound: `new` fails.
    let err = unsafe { WgpuSorter::new(&device, &WgpuSorterDesc::default()) }.err().expect("not Vulkan");
    assert!(err.to_string().contains("Backends::VULKAN"), "{err}");
}

#[test]
fn a_sorter_and_its_bindings_may_live_in_a_renderers_shared_state() {
    fn shared<T: Send + Sync>() {}
    shared::<WgpuSorter>();
    shared::<bitonic_vk::wgpu::WgpuBinding>();
    shared::<bitonic_vk::wgpu::TimedSort>();
}
