//! Embedding as a renderer would: the test makes its own instance (with the validation layer and
//! synchronization validation), device, queue, buffers and command buffer, and records its own
//! fill -> barrier -> sort -> sort -> barrier -> copy-out, with the sorted regions at non-zero
//! offsets of one buffer. Results are checked against the standard library's sort; any
//! error-severity validation message fails the test, including the leak report at device
//! destruction.

mod common;
use common::*;
use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use ash::vk;
use bitonic_vk::hooks::DeviceProfile;
use bitonic_vk::{BindDesc, BufferRegion, Error, KeyKind, KeyWidth, Order, RecorderDesc, SortRecorder};
use rand::{Rng, SeedableRng};

static ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data whose message is NUL-terminated, for the call.
    let message = unsafe { data.as_ref() }
        .filter(|d| !d.p_message.is_null())
        // SAFETY: checked non-null above.
        .map(|d| unsafe { CStr::from_ptr(d.p_message) }.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprintln!("[validation {severity:?}] {message}");
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        ERRORS.lock().unwrap_or_else(|e| e.into_inner()).push(message);
    }
    vk::FALSE
}

/// A renderer's own Vulkan objects.
struct Renderer {
    _entry: ash::Entry,
    instance: ash::Instance,
    debug: ash::ext::debug_utils::Instance,
    messenger: vk::DebugUtilsMessengerEXT,
    physical: vk::PhysicalDevice,
    device: ash::Device,
    family: u32,
    queue: vk::Queue,
    memory_props: vk::PhysicalDeviceMemoryProperties,
}

impl Renderer {
    fn new() -> Renderer {
        // SAFETY: loads the system's Vulkan loader; kept alive in the struct.
        let entry = unsafe { ash::Entry::load() }.expect("a Vulkan loader (libvulkan1)");
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
        let extensions = [ash::ext::debug_utils::NAME.as_ptr()];
        let enabled = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enabled);
        let info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions)
            .push_next(&mut features);
        // SAFETY: every pointer in `info` outlives the call.
        let instance =
            unsafe { entry.create_instance(&info, None) }.expect("an instance with VK_LAYER_KHRONOS_validation");
        let debug = ash::ext::debug_utils::Instance::new(&entry, &instance);
        let messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(vk::DebugUtilsMessageTypeFlagsEXT::GENERAL | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION)
            .pfn_user_callback(Some(on_message));
        // SAFETY: the instance has VK_EXT_debug_utils; the callback uses no user data.
        let messenger = unsafe { debug.create_debug_utils_messenger(&messenger_info, None) }.expect("messenger");
        // SAFETY: the instance is live.
        let physicals = unsafe { instance.enumerate_physical_devices() }.expect("devices");
        let (physical, family) = physicals
            .iter()
            .find_map(|&pd| {
                // SAFETY: `pd` was enumerated from the live instance.
                let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
                families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE)).map(|i| (pd, i as u32))
            })
            .expect("a device with a compute queue");
        let priorities = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        // SAFETY: `physical` and `family` come from this instance.
        let device = unsafe { instance.create_device(physical, &info, None) }.expect("device");
        // SAFETY: queue 0 of `family` was requested.
        let queue = unsafe { device.get_device_queue(family, 0) };
        // SAFETY: `physical` belongs to the instance.
        let memory_props = unsafe { instance.get_physical_device_memory_properties(physical) };
        Renderer { _entry: entry, instance, debug, messenger, physical, device, family, queue, memory_props }
    }

    fn alignment(&self) -> u64 {
        // SAFETY: `physical` belongs to the instance.
        let props = unsafe { self.instance.get_physical_device_properties(self.physical) };
        props.limits.min_storage_buffer_offset_alignment.max(1)
    }

    /// A buffer with memory of the given properties (host-visible memory is mapped).
    fn buffer(&self, size: u64, usage: vk::BufferUsageFlags, props: vk::MemoryPropertyFlags) -> Buffer {
        let info = vk::BufferCreateInfo::default().size(size).usage(usage);
        // SAFETY: a plain buffer of the live device.
        let buffer = unsafe { self.device.create_buffer(&info, None) }.expect("buffer");
        // SAFETY: `buffer` is live.
        let req = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        let types = &self.memory_props.memory_types[..self.memory_props.memory_type_count as usize];
        let type_index = types
            .iter()
            .enumerate()
            .position(|(i, t)| req.memory_type_bits & (1 << i) != 0 && t.property_flags.contains(props))
            .expect("a memory type") as u32;
        let alloc = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(type_index);
        // SAFETY: a plain allocation of a type the buffer accepts.
        let memory = unsafe { self.device.allocate_memory(&alloc, None) }.expect("memory");
        // SAFETY: the memory satisfies the buffer's requirements; bound once.
        unsafe { self.device.bind_buffer_memory(buffer, memory, 0) }.expect("bind");
        let mapped = if props.contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
            // SAFETY: host-visible memory, mapped once for its whole life.
            unsafe { self.device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }.expect("map")
                as *mut u8
        } else {
            std::ptr::null_mut()
        };
        Buffer { buffer, memory, mapped, size }
    }

    /// A storage buffer of `size` bytes (any memory) and a host-visible staging buffer as large.
    fn storage_and_staging(&self, size: u64) -> (Buffer, Buffer) {
        let storage = self.buffer(
            size,
            vk::BufferUsageFlags::STORAGE_BUFFER
                | vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST,
            vk::MemoryPropertyFlags::empty(),
        );
        let staging = self.buffer(
            size,
            vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        );
        (storage, staging)
    }

    /// A command pool and a command buffer from it, begun for one submission.
    fn begin_commands(&self) -> (vk::CommandPool, vk::CommandBuffer) {
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(self.family);
        // SAFETY: plain creation on the live device.
        let pool = unsafe { self.device.create_command_pool(&pool_info, None) }.expect("pool");
        let alloc = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(1);
        // SAFETY: the pool is live.
        let cmd = unsafe { self.device.allocate_command_buffers(&alloc) }.expect("cmd")[0];
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: a fresh command buffer.
        unsafe { self.device.begin_command_buffer(cmd, &begin) }.expect("begin");
        (pool, cmd)
    }

    /// Records the copy of `size` bytes from `from` into `to` and the barrier that makes them
    /// visible to the sort (the Contract's "before").
    fn upload(&self, cmd: vk::CommandBuffer, from: &Buffer, to: &Buffer, size: u64) {
        let whole = [vk::BufferCopy { src_offset: 0, dst_offset: 0, size }];
        // SAFETY: both buffers hold `size` bytes and have the transfer usages; `cmd` is recording.
        unsafe { self.device.cmd_copy_buffer(cmd, from.buffer, to.buffer, &whole) };
        barrier(
            self,
            cmd,
            (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
            (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE),
        );
    }

    /// The Contract's "after" barrier, the copy of `size` bytes from `from` into the host-visible
    /// `to`, then ends `cmd`, submits it and waits; returns the fence for the caller to destroy.
    fn download_and_wait(&self, cmd: vk::CommandBuffer, from: &Buffer, to: &Buffer, size: u64) -> vk::Fence {
        barrier(
            self,
            cmd,
            (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE),
            (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_READ),
        );
        let whole = [vk::BufferCopy { src_offset: 0, dst_offset: 0, size }];
        // SAFETY: as in `upload`.
        unsafe { self.device.cmd_copy_buffer(cmd, from.buffer, to.buffer, &whole) };
        barrier(
            self,
            cmd,
            (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
            (vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ),
        );
        // SAFETY: recording was begun by `begin_commands`.
        unsafe { self.device.end_command_buffer(cmd) }.expect("end");
        // SAFETY: plain creation.
        let fence = unsafe { self.device.create_fence(&vk::FenceCreateInfo::default(), None) }.expect("fence");
        let cmds = [cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: the command buffer is complete; the queue is used by this thread only.
        unsafe { self.device.queue_submit(self.queue, &submit, fence) }.expect("submit");
        // SAFETY: the fence is live.
        unsafe { self.device.wait_for_fences(&[fence], true, 120_000_000_000) }.expect("wait");
        fence
    }

    fn destroy(&self, b: Buffer) {
        // SAFETY: the GPU is done with the buffer (the queue was waited for).
        unsafe {
            self.device.destroy_buffer(b.buffer, None);
            self.device.free_memory(b.memory, None);
        }
    }
}

impl Drop for Renderer {
    fn drop(&mut self) {
        // SAFETY: every child object was destroyed by the test before this runs.
        unsafe {
            self.device.destroy_device(None);
            self.debug.destroy_debug_utils_messenger(self.messenger, None);
            self.instance.destroy_instance(None);
        }
    }
}

struct Buffer {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut u8,
    size: u64,
}

impl Buffer {
    fn write(&self, offset: u64, words: &[u32]) {
        assert!(offset + words.len() as u64 * 4 <= self.size);
        // SAFETY: mapped host-coherent memory of `size` bytes, not in use by the GPU now.
        unsafe {
            std::ptr::copy_nonoverlapping(
                words.as_ptr() as *const u8,
                self.mapped.add(offset as usize),
                words.len() * 4,
            )
        };
    }
    fn read(&self, offset: u64, n: usize) -> Vec<u32> {
        let mut out = vec![0u32; n];
        // SAFETY: as above; the GPU finished writing (fence waited, host-read barrier recorded).
        unsafe { std::ptr::copy_nonoverlapping(self.mapped.add(offset as usize), out.as_mut_ptr() as *mut u8, n * 4) };
        out
    }
}

fn barrier(
    r: &Renderer,
    cmd: vk::CommandBuffer,
    src: (vk::PipelineStageFlags, vk::AccessFlags),
    dst: (vk::PipelineStageFlags, vk::AccessFlags),
) {
    let m = [vk::MemoryBarrier::default().src_access_mask(src.1).dst_access_mask(dst.1)];
    // SAFETY: `cmd` is recording, outside a render pass.
    unsafe { r.device.cmd_pipeline_barrier(cmd, src.0, dst.0, vk::DependencyFlags::empty(), &m, &[], &[]) };
}

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Ends a test once its fence has been waited: destroys the fence, the command pool and the
/// buffers, then the device, which makes the layer report any object the recorder leaked, and
/// fails on any error-severity validation message seen so far (the list is the process's, shared
/// by the tests running beside this one).
fn finish(r: Renderer, fence: vk::Fence, pool: vk::CommandPool, buffers: [Buffer; 2]) {
    // SAFETY: the queue is idle (the caller waited the fence); nothing uses these any more.
    unsafe {
        r.device.destroy_fence(fence, None);
        r.device.destroy_command_pool(pool, None);
    }
    for b in buffers {
        r.destroy(b);
    }
    drop(r);
    let errors = ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(errors.is_empty(), "validation errors: {errors:#?}");
}

#[test]
fn a_renderer_records_two_sorts_into_its_own_command_buffer() {
    records_sorts(&RecorderDesc::default());
}

/// The same sorts in tiles of 4 elements: sorts 1, 3 (a GPU-side count) and 6 (8-byte keys) then
/// have hundreds of tiles and take windowed local merges in the embedded builds.
#[test]
fn the_embedded_builds_take_windowed_local_merges() {
    records_sorts(&recorder_desc(|d| d.tuning.max_tile = Some(4)));
}

/// Tiles of 2: sort 1 has 2500 tiles and takes windows of four tiles too.
#[test]
fn the_embedded_builds_take_windows_of_four_tiles() {
    records_sorts(&recorder_desc(|d| d.tuning.max_tile = Some(2)));
}

/// Tiles of 8 with the tile sort and the local merges on at most 3 workgroups, each looping over
/// tiles: a GPU-side count (sort 3), batches (sort 5) and 8-byte keys (sort 6) through the
/// looping builds of both kernels.
#[test]
fn the_embedded_builds_take_looping_tile_sorts_and_local_merges() {
    records_sorts(&recorder_desc(|d| {
        d.tuning.max_tile = Some(8);
        d.tuning.merge_workgroups = Some(3);
    }));
}

/// Tiles of 8 with every pass after the tile sort a segment pass: a GPU-side count (sort 3, whose
/// virtual elements lie among a segment's real ones), batches (sort 5) and 8-byte keys (sort 6)
/// through segment_merge's batched builds.
#[test]
fn the_embedded_builds_take_segment_passes() {
    records_sorts(&recorder_desc(|d| {
        d.tuning.max_tile = Some(8);
        d.tuning.segment_merges = Some(true);
    }));
}

/// Tiles of 256 with every pass after the tile sort a segment pass on a pipeline made for its shape
/// (RecorderDesc::shaped_segments): bind makes those of every length the binding may take, and a
/// GPU-side count (sort 3), batches (sort 5) and 8-byte keys (sort 6) run through them. (Smaller
/// tiles make more lengths, and lavapipe takes a second or more to compile each shape's pipeline.)
#[test]
fn the_embedded_builds_take_shaped_segment_passes() {
    records_sorts(&recorder_desc(|d| {
        d.tuning.max_tile = Some(256);
        d.tuning.segment_merges = Some(true);
        d.tuning.shaped_segments = Some(true);
    }));
}

/// Tiles of 8 with every pass after the tile sort a segment pass, on at most 3 workgroups each
/// looping over cosets: the looping builds of segment_merge, batched, with a GPU-side count and
/// for 8-byte keys too.
#[test]
fn the_embedded_builds_take_looping_segment_passes() {
    records_sorts(&recorder_desc(|d| {
        d.tuning.max_tile = Some(8);
        d.tuning.merge_workgroups = Some(3);
        d.tuning.segment_merges = Some(true);
    }));
}

/// The same sorts planned for smaller devices (`RecorderDesc::profile`): the spec's minimum
/// limits, a mobile GPU and Apple's, with their GPU-side count and batches.
#[test]
fn the_device_profiles_record_counted_and_batched_sorts() {
    for profile in DeviceProfile::ALL {
        records_sorts(&recorder_desc(|d| d.profile = Some(profile)));
    }
}

/// The same sorts where the driver refuses pipelines of more than 16 invocations (a test hook
/// that refuses them as a small GPU's driver would): every binding, with a GPU-side count and
/// batched ones included, is planned again with smaller local and global workgroups.
#[test]
fn bindings_whose_pipelines_the_driver_refuses_take_smaller_workgroups() {
    records_sorts(&recorder_desc(|d| d.refuse_workgroups_above = Some(16)));
}

fn records_sorts(desc: &RecorderDesc) {
    let r = Renderer::new();
    let a = r.alignment();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // Sort 1: 5000 u32 keys with values, ascending. Sort 2: 1000 f32 keys, descending, of which
    // 777 are sorted (n below the binding's capacity); the rest must stay untouched. Sort 3: i32
    // keys, capacity 2048, with a GPU-side count of 1234 written by the fill (a capacity of a power
    // of two whose count is not: the looping segment passes keep their bounds test). Sort 4: capacity
    // 300 with a GPU-side count of 99999, clamped to 300.
    let (n1, cap2, n2, cap3, count3, cap4, count4) = (5000u32, 1000u32, 777u32, 2048u32, 1234u32, 300u32, 99999u32);
    let keys1: Vec<u32> = (0..n1).map(|_| rng.random_range(0..500)).collect();
    let values1: Vec<u32> = (0..n1).collect();
    let keys2: Vec<f32> = (0..cap2).map(|_| rng.random_range(-1e3f32..1e3)).collect();
    let keys3: Vec<i32> = (0..cap3).map(|_| rng.random()).collect();
    let keys4: Vec<u32> = (0..cap4).map(|_| rng.random()).collect();
    let off_k1 = align(100, a);
    let off_v1 = align(off_k1 + u64::from(n1) * 4 + 1, a);
    let off_k2 = align(off_v1 + u64::from(n1) * 4 + 1, a);
    let off_k3 = align(off_k2 + u64::from(cap2) * 4, a);
    let off_c3 = align(off_k3 + u64::from(cap3) * 4, a);
    let off_k4 = align(off_c3 + 4, a);
    let off_c4 = align(off_k4 + u64::from(cap4) * 4, a);
    // Sort 5: a batch of 7 independent arrays of 500 (key, value) pairs, f32 ascending.
    let (len5, batches5) = (500u32, 7u32);
    let cap5 = len5 * batches5;
    let keys5: Vec<f32> = (0..cap5).map(|_| rng.random_range(-10f32..10.0)).collect();
    let values5: Vec<u32> = (0..cap5).collect();
    let off_k5 = align(off_c4 + 4, a);
    let off_v5 = align(off_k5 + u64::from(cap5) * 4, a);
    // Sort 6: 1500 i64 keys with values, descending, in 8-byte-key kernels.
    let n6 = 1500u32;
    let keys6: Vec<i64> = (0..n6).map(|_| rng.random_range(-3..3) * (1 << 40) + rng.random_range(-5..5)).collect();
    let values6: Vec<u32> = (0..n6).collect();
    let off_k6 = align(off_v5 + u64::from(cap5) * 4, a.max(8));
    let off_v6 = align(off_k6 + u64::from(n6) * 8, a);
    let total = off_v6 + u64::from(n6) * 4;
    let (storage, staging) = r.storage_and_staging(total);
    staging.write(off_k1, &keys1);
    staging.write(off_v1, &values1);
    staging.write(off_k2, bytemuck::cast_slice(&keys2));
    staging.write(off_k3, bytemuck::cast_slice(&keys3));
    staging.write(off_c3, &[count3]);
    staging.write(off_k4, &keys4);
    staging.write(off_c4, &[count4]);
    staging.write(off_k5, bytemuck::cast_slice(&keys5));
    staging.write(off_v5, &values5);
    staging.write(off_k6, bytemuck::cast_slice(&keys6));
    staging.write(off_v6, &values6);

    // SAFETY: the instance, physical device and device are live until the recorder is dropped.
    let mut sorter = unsafe { SortRecorder::new(&r.instance, r.physical, &r.device, desc) }.expect("recorder");
    let region = |offset: u64, n: u32| BufferRegion { buffer: storage.buffer, offset, size: u64::from(n) * 4 };
    let keys_only = |keys, capacity| BindDesc { keys, capacity, ..BindDesc::default() };
    let b1 = sorter
        .bind(&BindDesc { values: Some(region(off_v1, n1)), ..keys_only(region(off_k1, n1), n1) })
        .expect("bind 1");
    // Bound first to the wrong region, then moved: sort 2 must sort its own keys.
    let mut b2 = sorter.bind(&keys_only(region(off_k1, cap2), cap2)).expect("bind 2");
    // SAFETY: no command buffer uses b2 yet.
    unsafe { sorter.rebind(&mut b2, &keys_only(region(off_k2, cap2), cap2)) }.expect("rebind 2");
    let b3 = sorter
        .bind(&BindDesc { count: Some(region(off_c3, 1)), ..keys_only(region(off_k3, cap3), cap3) })
        .expect("bind 3");
    let b4 = sorter
        .bind(&BindDesc { count: Some(region(off_c4, 1)), ..keys_only(region(off_k4, cap4), cap4) })
        .expect("bind 4");
    let b5 = sorter
        .bind(&BindDesc { values: Some(region(off_v5, cap5)), batched: true, ..keys_only(region(off_k5, cap5), cap5) })
        .expect("bind 5");
    let b6 = sorter
        .bind(&BindDesc {
            keys: BufferRegion { buffer: storage.buffer, offset: off_k6, size: u64::from(n6) * 8 },
            values: Some(region(off_v6, n6)),
            key_width: KeyWidth::Bits64,
            capacity: n6,
            ..BindDesc::default()
        })
        .expect("bind 6");
    assert!(b1.pairs() && !b2.pairs() && b3.gpu_count() && !b2.gpu_count());
    assert_eq!(b6.key_width(), KeyWidth::Bits64);

    // Bad bindings are refused before anything is recorded.
    if a > 1 {
        let err = sorter.bind(&keys_only(region(off_k1 + 4, 10), 10)).expect_err("misaligned");
        assert!(matches!(err, Error::MisalignedOffset { .. }), "{err}");
    }
    let err = sorter.bind(&keys_only(region(off_k1, 10), 11)).expect_err("too small");
    assert!(matches!(err, Error::BufferTooSmall { needed: 44, .. }), "{err}");
    let err = sorter
        .bind(&BindDesc {
            count: Some(BufferRegion { size: 2, ..region(off_c3, 1) }),
            ..keys_only(region(off_k3, 8), 8)
        })
        .expect_err("count region too small");
    assert!(matches!(err, Error::BufferTooSmall { what: "count", .. }), "{err}");
    let err = sorter
        .bind(&BindDesc { count: Some(region(off_k3 + 4 * a, 1)), ..keys_only(region(off_k3, cap3), cap3) })
        .expect_err("count inside the keys");
    assert!(matches!(err, Error::OverlappingRegions { first: "keys", second: "count" }), "{err}");
    let err = sorter
        .bind(&BindDesc { values: Some(region(off_k1 + a, 100)), ..keys_only(region(off_k1, 100), 100) })
        .expect_err("values overlapping the keys");
    assert!(matches!(err, Error::OverlappingRegions { .. }), "{err}");
    let err = sorter.bind(&keys_only(region(off_k1, 10), 0)).expect_err("capacity 0");
    assert!(matches!(err, Error::InvalidOption { name: "capacity", .. }), "{err}");
    let err = sorter
        .bind(&BindDesc { key_width: KeyWidth::Bits64, ..keys_only(region(off_k1, 10), 10) })
        .expect_err("8-byte keys in a region for 4-byte ones");
    assert!(matches!(err, Error::BufferTooSmall { needed: 80, .. }), "{err}");

    let (pool, cmd) = r.begin_commands();
    r.upload(cmd, &staging, &storage, total);
    // Over capacity is refused, and records nothing.
    // SAFETY: `cmd` is recording; contract barriers are in place.
    let err = unsafe { sorter.record::<u32>(cmd, &b1, n1 + 1, Order::Ascending) }.expect_err("over capacity");
    assert!(matches!(err, Error::OverCapacity { .. }), "{err}");
    // SAFETY: as above; the recorder, bindings and buffers outlive the submission below.
    let p1 = unsafe { sorter.record::<u32>(cmd, &b1, n1, Order::Ascending) }.expect("record 1");
    // SAFETY: as above.
    let p2 = unsafe { sorter.record::<f32>(cmd, &b2, n2, Order::Descending) }.expect("record 2");
    // SAFETY: as above.
    let p3 = unsafe { sorter.record::<i32>(cmd, &b3, cap3, Order::Ascending) }.expect("record 3");
    // SAFETY: as above.
    let p4 = unsafe { sorter.record::<u32>(cmd, &b4, cap4, Order::Ascending) }.expect("record 4");
    // SAFETY: as above.
    let err = unsafe { sorter.record_batches::<f32>(cmd, &b5, len5, batches5 + 1, Order::Ascending) }
        .expect_err("batches over capacity");
    assert!(matches!(err, Error::OverCapacity { .. }), "{err}");
    // SAFETY: as above.
    let err = unsafe { sorter.record_batches::<f32>(cmd, &b5, len5, 0, Order::Ascending) }.expect_err("zero batches");
    assert!(matches!(err, Error::InvalidOption { name: "batches", .. }), "{err}");
    // SAFETY: as above.
    let p5 = unsafe { sorter.record_batches::<f32>(cmd, &b5, len5, batches5, Order::Ascending) }.expect("record 5");
    // SAFETY: as above.
    let err = unsafe { sorter.record_batches::<u32>(cmd, &b1, 100, 2, Order::Ascending) }.expect_err("not batched");
    assert!(matches!(err, Error::InvalidOption { name: "batches", .. }), "{err}");
    // SAFETY: as above.
    let err = unsafe { sorter.record::<u32>(cmd, &b6, n6, Order::Ascending) }.expect_err("4-byte keys, 8-byte binding");
    assert!(matches!(err, Error::KeyWidthMismatch { .. }), "{err}");
    // SAFETY: as above.
    let err = unsafe { sorter.record::<u64>(cmd, &b1, n1, Order::Ascending) }.expect_err("8-byte keys, 4-byte binding");
    assert!(matches!(err, Error::KeyWidthMismatch { .. }), "{err}");
    // SAFETY: as above.
    let p6 = unsafe { sorter.record::<i64>(cmd, &b6, n6, Order::Descending) }.expect("record 6");
    assert!([p1, p2, p3, p4, p5, p6].iter().all(|p| p.passes >= 1));
    let fence = r.download_and_wait(cmd, &storage, &staging, total);

    let (got_k1, got_v1) = (staging.read(off_k1, n1 as usize), staging.read(off_v1, n1 as usize));
    assert_sorted("sort 1", &keys1, Order::Ascending, u32::cmp, &got_k1, Some(&got_v1));
    let got2: Vec<f32> = bytemuck::cast_slice(&staging.read(off_k2, cap2 as usize)).to_vec();
    let n2 = n2 as usize;
    assert_sorted("sort 2", &keys2[..n2], Order::Descending, f32::total_cmp, &got2[..n2], None);
    assert_eq!(
        bytemuck::cast_slice::<f32, u32>(&got2[n2..]),
        bytemuck::cast_slice::<f32, u32>(&keys2[n2..]),
        "elements past n were touched"
    );

    // GPU-side count: the first 1234 sorted, the rest untouched; a count over the capacity
    // clamped to it.
    let got3: Vec<i32> = bytemuck::cast_slice(&staging.read(off_k3, cap3 as usize)).to_vec();
    let count3 = count3 as usize;
    assert_sorted("sort 3", &keys3[..count3], Order::Ascending, i32::cmp, &got3[..count3], None);
    assert_eq!(&got3[count3..], &keys3[count3..], "elements past the GPU count were touched");
    let got4 = staging.read(off_k4, cap4 as usize);
    assert_sorted("sort 4", &keys4, Order::Ascending, u32::cmp, &got4, None);
    assert_eq!(staging.read(off_c3, 1), [count3 as u32], "the count was written");
    // Batches: each array of 500 sorted on its own, its values with it.
    let (got_k5, got_v5) = (staging.read(off_k5, cap5 as usize), staging.read(off_v5, cap5 as usize));
    for b in 0..batches5 as usize {
        // Each batch's values are its own indices 0..500 once its first index is taken off: one
        // from another array is out of range.
        let range = b * len5 as usize..(b + 1) * len5 as usize;
        let got: &[f32] = bytemuck::cast_slice(&got_k5[range.clone()]);
        let values: Vec<u32> = got_v5[range.clone()].iter().map(|v| v.wrapping_sub(range.start as u32)).collect();
        let what = format!("sort 5, batch {b}");
        assert_sorted(&what, &keys5[range], Order::Ascending, f32::total_cmp, got, Some(&values));
    }

    // 8-byte keys: descending i64, values with them.
    let got_k6: Vec<i64> = staging
        .read(off_k6, 2 * n6 as usize)
        .chunks_exact(2)
        .map(|w| (u64::from(w[1]) << 32 | u64::from(w[0])) as i64)
        .collect();
    let got_v6 = staging.read(off_v6, n6 as usize);
    assert_sorted("sort 6", &keys6, Order::Descending, i64::cmp, &got_k6, Some(&got_v6));

    drop(sorter);
    finish(r, fence, pool, [storage, staging]);
}

/// A GPU-side count trims every dispatch: for counts 0, 1, 2, either side of a tile, either side
/// of the capacity and above it, 4- and 8-byte keys, keys alone and pairs, both orders and a
/// batch, the first min(count, n) elements of each array sorted (values with their keys) and
/// every byte past them unchanged. One binding is recorded twice in the command buffer, so its
/// arguments are rewritten after the first sort's indirect dispatches read them.
fn counts_trim_every_dispatch(desc: &RecorderDesc, tile: u32) {
    let r = Renderer::new();
    let a = r.alignment().max(8);
    let mut rng = rand::rngs::StdRng::seed_from_u64(54);
    let capacity = 3 * tile + tile / 2 + 5;
    let counts = [0, 1, 2, tile - 1, tile, tile + 1, capacity - 1, capacity, capacity + 100];
    // (key bytes, pairs, order, batches): each sorts through a binding of its own.
    let kinds = [
        (4u32, false, Order::Ascending, 1u32),
        (4, true, Order::Descending, 1),
        (8, false, Order::Descending, 1),
        (8, true, Order::Ascending, 1),
        (4, true, Order::Ascending, 3),
    ];
    struct Case {
        bytes: u32,
        pairs: bool,
        order: Order,
        batches: u32,
        count: u32,
        keys: u64,
        values: u64,
        count_at: u64,
        input: Vec<u32>,
    }
    let mut cases = Vec::new();
    let mut end = 0u64;
    for &(bytes, pairs, order, batches) in &kinds {
        for &count in &counts {
            let words = (capacity * bytes / 4) as usize;
            let keys = align(end, a);
            let values = align(keys + u64::from(capacity * bytes), a);
            let count_at = align(values + u64::from(capacity) * 4, a);
            end = count_at + 4;
            let input: Vec<u32> = (0..words).map(|_| rng.random()).collect();
            cases.push(Case { bytes, pairs, order, batches, count, keys, values, count_at, input });
        }
    }
    let (storage, staging) = r.storage_and_staging(end);
    for c in &cases {
        staging.write(c.keys, &c.input);
        staging.write(c.values, &(0..capacity).collect::<Vec<u32>>());
        staging.write(c.count_at, &[c.count]);
    }
    let desc = RecorderDesc { max_bindings: cases.len() as u32, ..desc.clone() };
    // SAFETY: the instance, physical device and device are live until the recorder is dropped.
    let mut sorter = unsafe { SortRecorder::new(&r.instance, r.physical, &r.device, &desc) }.expect("recorder");
    let region = |offset: u64, bytes: u64| BufferRegion { buffer: storage.buffer, offset, size: bytes };
    let bindings: Vec<_> = cases
        .iter()
        .map(|c| {
            sorter
                .bind(&BindDesc {
                    keys: region(c.keys, u64::from(capacity * c.bytes)),
                    values: c.pairs.then(|| region(c.values, u64::from(capacity) * 4)),
                    count: Some(region(c.count_at, 4)),
                    capacity,
                    key_width: if c.bytes == 8 { KeyWidth::Bits64 } else { KeyWidth::Bits32 },
                    ..BindDesc::default()
                })
                .expect("bind")
        })
        .collect();
    let (pool, cmd) = r.begin_commands();
    r.upload(cmd, &staging, &storage, end);
    for (i, (c, b)) in cases.iter().zip(&bindings).enumerate() {
        let kind = if c.bytes == 8 { KeyKind::U64 } else { KeyKind::U32 };
        let n = capacity / c.batches;
        if i == 0 {
            // The same binding twice: the second sort overwrites the arguments the first read.
            let first = if c.order == Order::Ascending { Order::Descending } else { Order::Ascending };
            // SAFETY: `cmd` is recording; the contract barriers are in place (a sort's own writes
            // are ordered by its passes' barriers, the next sort's by the first pass's).
            unsafe { sorter.record_kind(cmd, b, n, kind, first) }.expect("record");
            barrier(
                &r,
                cmd,
                (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE),
                (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE),
            );
        }
        let recorded = if c.batches > 1 {
            // SAFETY: as above.
            unsafe { sorter.record_batches::<u32>(cmd, b, n, c.batches, c.order) }
        } else {
            // SAFETY: as above.
            unsafe { sorter.record_kind(cmd, b, n, kind, c.order) }
        };
        recorded.expect("record");
    }
    let fence = r.download_and_wait(cmd, &storage, &staging, end);
    for c in &cases {
        let n = capacity / c.batches;
        let sorted = c.count.min(n) as usize;
        let what = format!(
            "{}-byte keys, pairs {}, {:?}, {} batches, count {}",
            c.bytes, c.pairs, c.order, c.batches, c.count
        );
        let got = staging.read(c.keys, c.input.len());
        let got_values = staging.read(c.values, capacity as usize);
        for batch in 0..c.batches as usize {
            let start = batch * n as usize;
            let (words, range) = ((c.bytes / 4) as usize, start..start + sorted);
            let keys_of = |w: &[u32]| -> Vec<u64> {
                w[range.start * words..range.end * words]
                    .chunks_exact(words)
                    .map(|k| if words == 2 { u64::from(k[1]) << 32 | u64::from(k[0]) } else { u64::from(k[0]) })
                    .collect()
            };
            let values: Vec<u32> = got_values[range.clone()].iter().map(|v| v.wrapping_sub(start as u32)).collect();
            let values = c.pairs.then_some(&values[..]);
            assert_sorted(
                &format!("{what}, batch {batch}"),
                &keys_of(&c.input),
                c.order,
                u64::cmp,
                &keys_of(&got),
                values,
            );
            let past = (start + sorted) * words..(start + n as usize) * words;
            assert_eq!(&got[past.clone()], &c.input[past], "{what}, batch {batch}: keys past the count changed");
            if c.pairs {
                let past = start + sorted..start + n as usize;
                assert_eq!(
                    got_values[past.clone()],
                    past.map(|v| v as u32).collect::<Vec<u32>>(),
                    "{what}: values past the count"
                );
            }
        }
        assert_eq!(staging.read(c.count_at, 1), [c.count], "{what}: the count changed");
    }
    drop(bindings);
    drop(sorter);
    finish(r, fence, pool, [storage, staging]);
}

#[test]
fn gpu_side_counts_trim_every_dispatch_in_tiles_of_16() {
    // Three merge workgroups: the tile sort and the local merges loop, and trimmed to the count.
    counts_trim_every_dispatch(
        &recorder_desc(|d| {
            d.tuning.max_tile = Some(16);
            d.tuning.merge_workgroups = Some(3);
        }),
        16,
    );
}

#[test]
fn gpu_side_counts_trim_every_dispatch_in_segment_passes() {
    counts_trim_every_dispatch(
        &recorder_desc(|d| {
            d.tuning.max_tile = Some(64);
            d.tuning.segment_merges = Some(true);
        }),
        64,
    );
}

/// `record_timed`: as many timestamps as `passes` says, at the queries asked for, each no earlier
/// than the one before (the caller's own just before the sort), and the sort unchanged by them.
#[test]
fn a_renderer_times_its_sort_pass_by_pass() {
    let r = Renderer::new();
    // SAFETY: `physical` belongs to the instance.
    let families = unsafe { r.instance.get_physical_device_queue_family_properties(r.physical) };
    let bits = families[r.family as usize].timestamp_valid_bits;
    if bits == 0 {
        eprintln!("skipped: this queue family has no timestamps");
        return;
    }
    let n = 5000u32;
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let keys: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    let values: Vec<u32> = (0..n).collect();
    let a = r.alignment();
    let off_v = align(u64::from(n) * 4, a);
    let total = off_v + u64::from(n) * 4;
    let (storage, staging) = r.storage_and_staging(total);
    staging.write(0, &keys);
    staging.write(off_v, &values);
    let desc = recorder_desc(|d| d.tuning.max_tile = Some(256));
    // SAFETY: the instance, physical device and device are live until the recorder is dropped.
    let mut sorter = unsafe { SortRecorder::new(&r.instance, r.physical, &r.device, &desc) }.expect("recorder");
    let region = |offset: u64| BufferRegion { buffer: storage.buffer, offset, size: u64::from(n) * 4 };
    let binding = sorter
        .bind(&BindDesc { keys: region(0), values: Some(region(off_v)), capacity: n, ..BindDesc::default() })
        .expect("bind");
    let passes = sorter.passes(&binding, n, KeyKind::U32, Order::Descending).expect("passes");
    assert!(passes > 2, "{passes} passes");
    assert_eq!(sorter.passes(&binding, 1, KeyKind::U32, Order::Descending).expect("one element"), 0);
    let err = sorter.passes(&binding, n + 1, KeyKind::U32, Order::Descending).expect_err("over capacity");
    assert!(matches!(err, Error::OverCapacity { .. }), "{err}");

    // Queries 0 and 1 stay unused; the caller's own timestamp is query 2, the passes' 3 on.
    let first = 3u32;
    let info =
        vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(first + passes as u32);
    // SAFETY: plain creation; the queue family has timestamps (checked above).
    let queries = unsafe { r.device.create_query_pool(&info, None) }.expect("query pool");
    let (pool, cmd) = r.begin_commands();
    // SAFETY: recording, outside a render pass; the pool holds these queries.
    unsafe { r.device.cmd_reset_query_pool(cmd, queries, 0, first + passes as u32) };
    r.upload(cmd, &staging, &storage, total);
    // SAFETY: `cmd` is recording; the call fails before recording anything.
    let err = unsafe { sorter.record_timed(cmd, &binding, n, KeyKind::U32, Order::Descending, queries, u32::MAX) }
        .expect_err("query indices past u32::MAX");
    assert!(matches!(err, Error::InvalidOption { name: "first", .. }), "{err}");
    // SAFETY: query 2 was reset above.
    unsafe { r.device.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, queries, first - 1) };
    // SAFETY: `cmd` is recording; the contract barriers are in place; the pool is a timestamp pool
    // of this device with `first + passes` queries, reset above and read after the fence.
    let recorded = unsafe { sorter.record_timed(cmd, &binding, n, KeyKind::U32, Order::Descending, queries, first) }
        .expect("record_timed");
    assert_eq!(recorded.passes, passes);
    let fence = r.download_and_wait(cmd, &storage, &staging, total);

    // Every query from the caller's to the last pass's was written (NOT_READY otherwise).
    let mut ticks = vec![0u64; passes + 1];
    // SAFETY: the queries were reset and written by the finished submission.
    unsafe { r.device.get_query_pool_results(queries, first - 1, &mut ticks, vk::QueryResultFlags::TYPE_64) }
        .expect("every timestamp written");
    let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    for (i, w) in ticks.windows(2).enumerate() {
        assert!((w[1].wrapping_sub(w[0]) & mask) < mask / 2, "pass {i} ends before it starts: {ticks:?}");
    }
    let (got_k, got_v) = (staging.read(0, n as usize), staging.read(off_v, n as usize));
    assert_sorted("timed sort", &keys, Order::Descending, u32::cmp, &got_k, Some(&got_v));

    drop(sorter);
    // SAFETY: the queue is idle (fence waited); nothing uses the pool any more.
    unsafe { r.device.destroy_query_pool(queries, None) };
    finish(r, fence, pool, [storage, staging]);
}
