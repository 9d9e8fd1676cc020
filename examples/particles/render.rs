//! The Vulkan side of the particle example, as a game engine would hold it: its own instance,
//! device and queue (a family with graphics and compute), its own buffers, image, pipelines and
//! command buffer, and a [`SortRecorder`] that records the sort into that command buffer.
//!
//! One frame is one command buffer:
//!
//! 1. zero the GPU-side count (`vkCmdFillBuffer`); barrier `TRANSFER_WRITE -> COMPUTE read|write`;
//! 2. `depth.comp`: every particle in front of the camera whose sprite reaches the image appends
//!    its view-space depth (key) and index (value) at a slot taken from the count with an atomic
//!    add; barrier `COMPUTE write -> COMPUTE read|write` (the recorder's contract);
//! 3. the sort, `record::<f32>(.., Order::Descending)`: back to front, min(count, N) elements;
//! 4. barrier `COMPUTE write -> VERTEX_SHADER read | DRAW_INDIRECT | TRANSFER read`;
//! 5. a render pass drawing `vkCmdDrawIndirect` instanced quads: the count the depth pass wrote
//!    is the instance count (it sits inside the indirect command), the vertex shader reads particle
//!    `indices[gl_InstanceIndex]`; premultiplied "over" blending into a float colour image;
//! 6. copies of the image and the sorted keys and indices to host-visible memory when asked.
//!
//! Timestamps after the count is zeroed and after steps 2, 3 and 5 give each part's GPU time, and
//! with `RenderDesc::pass_times` one after each of the sort's passes.

use std::ffi::{c_void, CStr};
use std::fmt;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context as _, Result};
use ash::vk;
use bitonic_vk::{BindDesc, BufferRegion, KeyKind, Order, RecorderDesc, SortBinding, SortRecorder};

use crate::scene::{self, FrameConstants, Particle, Precision};

const DEPTH_SPV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/particles/depth.comp.spv"));
const SPRITE_VERT_SPV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/particles/sprite.vert.spv"));
const SPRITE_FRAG_SPV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/particles/sprite.frag.spv"));

/// Invocations per workgroup of the depth pass (`depth.comp`, and `particles.wgsl` through an
/// override).
pub const DEPTH_GROUP: u32 = 256;
/// The frame's timestamps: after the count is zeroed, after the depth pass, after the sort, after
/// the draw.
const FRAME_QUERIES: u32 = 4;
/// Environment variable choosing the device, as for `bitonic-vk`: an index or part of a name.
pub const DEVICE_ENV: &str = "BITONIC_VK_DEVICE";

/// A request the device cannot honour (too many particles, too large an image) or no device
/// matches: a bad argument rather than a failure.
#[derive(Debug)]
pub struct BadRequest(pub String);

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadRequest {}

/// Error-severity messages of the validation layer, shared with whoever checks them after the
/// device and instance are gone (leaks are reported when the device is destroyed).
pub type ValidationLog = Arc<Mutex<Vec<String>>>;

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data for the duration of the call.
    let message = unsafe { data.as_ref() }
        .filter(|d| !d.p_message.is_null())
        // SAFETY: checked non-null; a NUL-terminated string the layer keeps alive for the call.
        .map(|d| unsafe { CStr::from_ptr(d.p_message) }.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprintln!("[validation {severity:?}] {message}");
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        // SAFETY: `user` is `Arc::as_ptr` of the Gpu's log, which the Gpu keeps alive until after
        // the messengers (the chained one included) are gone with the instance.
        let log = unsafe { &*(user as *const Mutex<Vec<String>>) };
        log.lock().unwrap_or_else(|e| e.into_inner()).push(message);
    }
    vk::FALSE
}

/// How to open the device.
#[derive(Clone, Debug, Default)]
pub struct GpuDesc {
    /// `VK_LAYER_KHRONOS_validation` with synchronization validation.
    pub validation: bool,
    /// An index (enumeration order, as `bitonic-vk devices`) or part of a name; `None` reads
    /// [`DEVICE_ENV`], and without it prefers a discrete GPU, then integrated, virtual, CPU.
    pub device: Option<String>,
}

/// Instance, device and the one queue, of a family with graphics and compute.
pub struct Gpu {
    _entry: ash::Entry,
    instance: ash::Instance,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    log: ValidationLog,
    physical: vk::PhysicalDevice,
    device: ash::Device,
    family: u32,
    queue: vk::Queue,
    memory: vk::PhysicalDeviceMemoryProperties,
    limits: vk::PhysicalDeviceLimits,
    timestamp_bits: u32,
    /// Whether the device was created with `shaderInt16` (enabled wherever it is offered, so that
    /// the sorter may hold u32 pairs in tiles of 16-bit origins: `RecorderDesc::shader_int16`).
    pub shader_int16: bool,
    /// The device's name and type, for the report.
    pub name: String,
}

fn rank(t: vk::PhysicalDeviceType) -> u8 {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    }
}

impl Gpu {
    /// Opens the device `desc` chooses.
    pub fn new(desc: &GpuDesc) -> Result<Gpu> {
        // SAFETY: loads the system's Vulkan loader; the Entry is kept as long as the instance.
        let entry = unsafe { ash::Entry::load() }.context("cannot load the Vulkan loader (libvulkan1)")?;
        let validation_layer = c"VK_LAYER_KHRONOS_validation";
        if desc.validation {
            // SAFETY: a plain query of the loader.
            let layers = unsafe { entry.enumerate_instance_layer_properties() }?;
            if !layers.iter().any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == validation_layer)) {
                bail!("--validation: VK_LAYER_KHRONOS_validation is not installed (vulkan-validationlayers)");
            }
        }
        let log: ValidationLog = Arc::default();
        let user = Arc::as_ptr(&log) as *mut c_void;
        let messenger_info = || {
            vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                )
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::GENERAL | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION,
                )
                .pfn_user_callback(Some(on_message))
                .user_data(user)
        };
        let app =
            vk::ApplicationInfo::default().application_name(c"bitonic-vk particles").api_version(vk::API_VERSION_1_1);
        let layers = [validation_layer.as_ptr()];
        let extensions = [ash::ext::debug_utils::NAME.as_ptr()];
        let enabled = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enabled);
        let mut chained = messenger_info();
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        if desc.validation {
            info = info
                .enabled_layer_names(&layers)
                .enabled_extension_names(&extensions)
                .push_next(&mut features)
                .push_next(&mut chained);
        }
        // SAFETY: every pointer in `info` refers to locals that outlive the call; the layer was
        // found above and provides VK_EXT_debug_utils.
        let instance = unsafe { entry.create_instance(&info, None) }.context("vkCreateInstance")?;
        let mut messenger = None;
        if desc.validation {
            let loader = ash::ext::debug_utils::Instance::new(&entry, &instance);
            // SAFETY: the instance has VK_EXT_debug_utils; the user data outlives the messenger.
            match unsafe { loader.create_debug_utils_messenger(&messenger_info(), None) } {
                Ok(m) => messenger = Some((loader, m)),
                Err(e) => {
                    // SAFETY: nothing else was created from the instance.
                    unsafe { instance.destroy_instance(None) };
                    return Err(anyhow!("vkCreateDebugUtilsMessengerEXT: {e}"));
                }
            }
        }
        let chosen = choose(&instance, desc);
        let (physical, family, props, timestamp_bits) = match chosen {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: only the messenger was created from the instance; destroyed first.
                unsafe {
                    if let Some((loader, m)) = &messenger {
                        loader.destroy_debug_utils_messenger(*m, None);
                    }
                    instance.destroy_instance(None);
                }
                return Err(e);
            }
        };
        let priorities = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
        // SAFETY: `physical` belongs to the instance.
        let offered = unsafe { instance.get_physical_device_features(physical) };
        let shader_int16 = offered.shader_int16 == vk::TRUE;
        let features = vk::PhysicalDeviceFeatures::default().shader_int16(shader_int16);
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_features(&features);
        // SAFETY: `physical` and `family` come from this instance; the one feature enabled is
        // offered by it; no extensions.
        let device = match unsafe { instance.create_device(physical, &info, None) } {
            Ok(d) => d,
            Err(e) => {
                // SAFETY: as above.
                unsafe {
                    if let Some((loader, m)) = &messenger {
                        loader.destroy_debug_utils_messenger(*m, None);
                    }
                    instance.destroy_instance(None);
                }
                return Err(anyhow!("vkCreateDevice: {e}"));
            }
        };
        // SAFETY: queue 0 of `family` was requested.
        let queue = unsafe { device.get_device_queue(family, 0) };
        // SAFETY: `physical` belongs to the instance.
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        let name = format!(
            "{} ({:?})",
            props.device_name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default(),
            props.device_type
        );
        Ok(Gpu {
            _entry: entry,
            instance,
            messenger,
            log,
            physical,
            device,
            family,
            queue,
            memory,
            limits: props.limits,
            timestamp_bits,
            shader_int16,
            name,
        })
    }

    /// The validation messages of error severity so far (shared: still readable after drop).
    pub fn validation_log(&self) -> ValidationLog {
        self.log.clone()
    }

    fn memory_type(
        &self,
        bits: u32,
        wanted: vk::MemoryPropertyFlags,
        required: vk::MemoryPropertyFlags,
    ) -> Result<u32> {
        let types = &self.memory.memory_types[..self.memory.memory_type_count as usize];
        let fits = |flags: vk::MemoryPropertyFlags| {
            types.iter().enumerate().position(|(i, t)| bits & (1 << i) != 0 && t.property_flags.contains(flags))
        };
        fits(wanted | required)
            .or_else(|| fits(required))
            .map(|i| i as u32)
            .ok_or_else(|| anyhow!("no memory type with {required:?}"))
    }
}

/// The device `desc` chooses, with a family that has graphics and compute (one with timestamps
/// preferred), its properties and that family's timestamp bits.
fn choose(
    instance: &ash::Instance,
    desc: &GpuDesc,
) -> Result<(vk::PhysicalDevice, u32, vk::PhysicalDeviceProperties, u32)> {
    // SAFETY: the instance is live.
    let physicals = unsafe { instance.enumerate_physical_devices() }.context("vkEnumeratePhysicalDevices")?;
    let mut usable = Vec::new();
    let mut names = Vec::new();
    for (index, &pd) in physicals.iter().enumerate() {
        // SAFETY: `pd` was enumerated from this live instance.
        let props = unsafe { instance.get_physical_device_properties(pd) };
        let name = props.device_name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        // SAFETY: as above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let both = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
        let candidates: Vec<(u32, u32)> = families
            .iter()
            .enumerate()
            .filter(|(_, f)| f.queue_flags.contains(both) && f.queue_count > 0)
            .map(|(i, f)| (i as u32, f.timestamp_valid_bits))
            .collect();
        let family = candidates.iter().find(|(_, bits)| *bits > 0).or(candidates.first()).copied();
        names.push(format!("{index}: {name}"));
        if let (Some((family, bits)), true) = (family, props.api_version >= vk::API_VERSION_1_1) {
            usable.push((index, name, pd, family, props, bits));
        }
    }
    let selector = desc.device.clone().or_else(|| std::env::var(DEVICE_ENV).ok()).filter(|s| !s.trim().is_empty());
    let found = match &selector {
        Some(s) => {
            let s = s.trim();
            let hit = match s.parse::<usize>() {
                Ok(i) => usable.iter().position(|u| u.0 == i),
                Err(_) => usable.iter().position(|u| u.1.to_lowercase().contains(&s.to_lowercase())),
            };
            hit.ok_or_else(|| {
                BadRequest(format!(
                    "no usable device (Vulkan 1.1, a graphics+compute queue) matches {s:?}; devices: {}",
                    names.join(", ")
                ))
            })?
        }
        None => (0..usable.len()).min_by_key(|&i| rank(usable[i].4.device_type)).ok_or_else(|| {
            anyhow!("no Vulkan 1.1 device with a graphics+compute queue; devices: {}", names.join(", "))
        })?,
    };
    let (_, _, pd, family, props, bits) = usable.swap_remove(found);
    Ok((pd, family, props, bits))
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: every object made on the device (by a Renderer, which borrows this Gpu) is gone;
        // the messenger is destroyed before its instance; the log outlives both (dropped after).
        unsafe {
            self.device.destroy_device(None);
            if let Some((loader, m)) = &self.messenger {
                loader.destroy_debug_utils_messenger(*m, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

/// A buffer with its own memory; host-visible ones are mapped for their whole life.
struct Buffer {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut u8,
    size: u64,
}

impl Default for Buffer {
    fn default() -> Buffer {
        Buffer { buffer: vk::Buffer::null(), memory: vk::DeviceMemory::null(), mapped: std::ptr::null_mut(), size: 0 }
    }
}

/// What to render.
#[derive(Clone, Copy, Debug)]
pub struct RenderDesc {
    /// Particles (at least 1).
    pub count: u32,
    /// Image width, pixels.
    pub width: u32,
    /// Image height, pixels.
    pub height: u32,
    /// Seed of the particles.
    pub seed: u64,
    /// Render into RGBA16F even where the device blends into RGBA32F (the fallback's path).
    pub half: bool,
    /// Focal length over the default's (1 = a 60 degree vertical field of view): above 1 the view
    /// narrows and more particles are culled, so the sort takes a smaller GPU-side count.
    pub zoom: f32,
    /// `Tuning::tile_origins` for the sort: `None` lets the recorder choose (where the
    /// device has `shaderInt16`), `Some(true)` asks for tiles of 16-bit origins (an error where
    /// the device lacks it), `Some(false)` keeps the values in the tiles.
    pub tile_origins: Option<bool>,
    /// A timestamp after each of the sort's passes (`SortRecorder::record_timed`), for
    /// [`Timings::passes`].
    pub pass_times: bool,
}

/// The least alignment of the sort's regions in their buffer. `minStorageBufferOffsetAlignment`
/// is all that binding asks (16 bytes on NVIDIA's driver), but the sort reads and writes its keys
/// and values in aligned runs of consecutive elements, and a region that starts off a 256-byte
/// boundary spreads each run over one more cache line and sector.
const REGION_ALIGNMENT: u64 = 256;

/// Where things sit in the one buffer the depth pass, the sort and the draw share: the indirect
/// draw command (whose instance count is the GPU-side count), the keys and the indices, each at a
/// non-zero offset aligned to `minStorageBufferOffsetAlignment` and to [`REGION_ALIGNMENT`].
/// The wgpu renderer lays its buffer out the same way.
#[derive(Clone, Copy, Debug)]
pub struct SortLayout {
    /// The count: `instanceCount` of the indirect command at `count - 4`.
    pub count: u64,
    /// The keys (f32 depths).
    pub keys: u64,
    /// The values (u32 particle indices).
    pub values: u64,
    /// The buffer's size.
    pub total: u64,
}

impl SortLayout {
    /// The layout for `n` particles, each region aligned to `alignment` (the device's
    /// `minStorageBufferOffsetAlignment`) and to [`REGION_ALIGNMENT`].
    pub fn new(n: u32, alignment: u64) -> SortLayout {
        let alignment = alignment.max(REGION_ALIGNMENT);
        let align = |x: u64| x.div_ceil(alignment) * alignment;
        let count = align(16);
        let keys = align(count + 12);
        let values = align(keys + 4 * u64::from(n));
        SortLayout { count, keys, values, total: values + 4 * u64::from(n) }
    }
    /// The indirect draw command (4 u32s), whose `instanceCount` is the count.
    pub fn indirect(&self) -> u64 {
        self.count - 4
    }
}

/// What to copy back after a frame.
#[derive(Clone, Copy, Debug, Default)]
pub struct Readback {
    /// The image.
    pub image: bool,
    /// The sorted keys and indices.
    pub sorted: bool,
}

/// GPU time of each part of one frame, microseconds.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    /// The depth (and cull) pass.
    pub depth: f64,
    /// The sort.
    pub sort: f64,
    /// The render pass: clear and draw.
    pub draw: f64,
    /// With [`RenderDesc::pass_times`], each of the sort's passes, the barrier before it included
    /// (their sum is `sort` less the barrier after the last pass); else empty.
    pub passes: Vec<f64>,
}

/// One rendered frame.
pub struct Frame {
    /// Its push constants (camera).
    pub constants: FrameConstants,
    /// Sprites drawn: the GPU-side count.
    pub count: u32,
    /// GPU times, where the queue has timestamps.
    pub timings: Option<Timings>,
    /// The image, RGBA rows top first, if read back.
    pub image: Option<Vec<[f32; 4]>>,
    /// The first `count` sorted keys and indices, if read back.
    pub sorted: Option<(Vec<f32>, Vec<u32>)>,
}

/// What the frame loop (`cli.rs`) needs of a renderer, whichever API draws the frame.
pub trait FrameRenderer {
    /// Renders frame `index` (its camera), waits for it, and reads back what `readback` asks
    /// for, plus the count.
    fn render_frame(&mut self, index: u32, readback: Readback) -> Result<Frame>;
    /// The particles, as generated on the CPU and uploaded.
    fn particles(&self) -> &[Particle];
    /// How the colour attachment rounds a blend.
    fn precision(&self) -> Precision;
    /// Whether the sort holds its pairs in tiles of 16-bit origins.
    fn tile_origins(&self) -> bool;
    /// The colour attachment's format, for the report.
    fn format_name(&self) -> String;
}

impl FrameRenderer for Renderer<'_> {
    fn render_frame(&mut self, index: u32, readback: Readback) -> Result<Frame> {
        self.render(index, readback)
    }
    fn particles(&self) -> &[Particle] {
        &self.particles
    }
    fn precision(&self) -> Precision {
        self.precision
    }
    fn tile_origins(&self) -> bool {
        self.binding.as_ref().is_some_and(SortBinding::tile_origins)
    }
    fn format_name(&self) -> String {
        format!("{:?}", self.format)
    }
}

/// Every object of the renderer. Handles start null, so that a renderer whose construction fails
/// half-way is still destroyed whole by `Drop` (destroying a null handle does nothing).
pub struct Renderer<'g> {
    gpu: &'g Gpu,
    desc: RenderDesc,
    particles: Vec<Particle>,
    /// The colour attachment's format and how it rounds a blend.
    pub precision: Precision,
    format: vk::Format,
    layout: SortLayout,
    particle_buffer: Buffer,
    sort_buffer: Buffer,
    readback: Buffer,
    readback_sorted: u64,
    image: vk::Image,
    image_memory: vk::DeviceMemory,
    image_view: vk::ImageView,
    render_pass: vk::RenderPass,
    framebuffer: vk::Framebuffer,
    set_layout: vk::DescriptorSetLayout,
    pipeline_layout: vk::PipelineLayout,
    descriptor_pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    depth_pipeline: vk::Pipeline,
    sprite_pipeline: vk::Pipeline,
    command_pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    queries: vk::QueryPool,
    /// Queries in `queries`: the frame's 4, then one after each of the sort's passes with
    /// [`RenderDesc::pass_times`].
    query_count: u32,
    // Dropped after `Drop::drop` has waited for the device and before the Gpu (borrowed) goes.
    binding: Option<SortBinding>,
    recorder: Option<SortRecorder>,
}

fn vk_err(call: &'static str) -> impl Fn(vk::Result) -> anyhow::Error {
    move |e| anyhow!("{call}: {e}")
}

impl<'g> Renderer<'g> {
    /// Makes the particles, uploads them, and creates everything a frame needs.
    pub fn new(gpu: &'g Gpu, desc: RenderDesc) -> Result<Renderer<'g>> {
        let limits = &gpu.limits;
        let n = desc.count;
        if n == 0 {
            return Err(BadRequest("--count must be at least 1".into()).into());
        }
        if desc.tile_origins == Some(true) && !gpu.shader_int16 {
            return Err(BadRequest(format!(
                "--tile-origins on: {} does not offer the shaderInt16 feature that tiles of 16-bit origins need",
                gpu.name
            ))
            .into());
        }
        let particle_bytes = u64::from(n) * std::mem::size_of::<Particle>() as u64;
        if particle_bytes > u64::from(limits.max_storage_buffer_range) {
            return Err(BadRequest(format!(
                "--count {n}: {particle_bytes} bytes of particles exceed this device's maxStorageBufferRange ({})",
                limits.max_storage_buffer_range
            ))
            .into());
        }
        if n.div_ceil(DEPTH_GROUP) > limits.max_compute_work_group_count[0] {
            return Err(BadRequest(format!(
                "--count {n}: over {} workgroups of {DEPTH_GROUP} (maxComputeWorkGroupCount[0])",
                limits.max_compute_work_group_count[0]
            ))
            .into());
        }
        let max_side =
            limits.max_image_dimension2_d.min(limits.max_framebuffer_width).min(limits.max_framebuffer_height);
        if desc.width == 0 || desc.height == 0 || desc.width > max_side || desc.height > max_side {
            return Err(BadRequest(format!(
                "--size {}x{}: each side must be 1..={max_side} on this device",
                desc.width, desc.height
            ))
            .into());
        }
        let (format, precision) = pick_format(gpu, desc.half)?;
        let alignment = limits.min_storage_buffer_offset_alignment;
        let mut r = Renderer {
            gpu,
            desc,
            particles: scene::galaxy(n, desc.seed),
            precision,
            format,
            layout: SortLayout::new(n, alignment),
            particle_buffer: Buffer::default(),
            sort_buffer: Buffer::default(),
            readback: Buffer::default(),
            readback_sorted: 0,
            image: vk::Image::null(),
            image_memory: vk::DeviceMemory::null(),
            image_view: vk::ImageView::null(),
            render_pass: vk::RenderPass::null(),
            framebuffer: vk::Framebuffer::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            pipeline_layout: vk::PipelineLayout::null(),
            descriptor_pool: vk::DescriptorPool::null(),
            set: vk::DescriptorSet::null(),
            depth_pipeline: vk::Pipeline::null(),
            sprite_pipeline: vk::Pipeline::null(),
            command_pool: vk::CommandPool::null(),
            cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            queries: vk::QueryPool::null(),
            query_count: FRAME_QUERIES,
            binding: None,
            recorder: None,
        };
        r.create_buffers()?;
        r.create_target()?;
        r.create_pipelines()?;
        r.create_sorter()?;
        r.create_commands()?;
        r.upload()?;
        Ok(r)
    }

    fn buffer(&self, size: u64, usage: vk::BufferUsageFlags, host: bool) -> Result<Buffer> {
        let device = &self.gpu.device;
        let info = vk::BufferCreateInfo::default().size(size).usage(usage);
        let mut b = Buffer { size, ..Buffer::default() };
        // SAFETY: a plain buffer of the live device.
        b.buffer = unsafe { device.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        let result = (|| {
            // SAFETY: `b.buffer` is live.
            let req = unsafe { device.get_buffer_memory_requirements(b.buffer) };
            let (wanted, required) = if host {
                (
                    vk::MemoryPropertyFlags::HOST_CACHED,
                    vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
                )
            } else {
                (vk::MemoryPropertyFlags::DEVICE_LOCAL, vk::MemoryPropertyFlags::empty())
            };
            let type_index = self.gpu.memory_type(req.memory_type_bits, wanted, required)?;
            let alloc = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(type_index);
            // SAFETY: an allocation of a type the buffer accepts.
            b.memory = unsafe { device.allocate_memory(&alloc, None) }.map_err(vk_err("vkAllocateMemory"))?;
            // SAFETY: the memory satisfies the buffer's requirements and is bound once.
            unsafe { device.bind_buffer_memory(b.buffer, b.memory, 0) }.map_err(vk_err("vkBindBufferMemory"))?;
            if host {
                // SAFETY: host-visible memory, mapped once for its whole life.
                b.mapped = unsafe { device.map_memory(b.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                    .map_err(vk_err("vkMapMemory"))? as *mut u8;
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(b),
            Err(e) => {
                self.destroy_buffer(&b);
                Err(e)
            }
        }
    }

    fn destroy_buffer(&self, b: &Buffer) {
        // SAFETY: the device has finished with the buffer (callers wait for it first); null
        // handles are ignored; freeing mapped memory unmaps it.
        unsafe {
            self.gpu.device.destroy_buffer(b.buffer, None);
            self.gpu.device.free_memory(b.memory, None);
        }
    }

    fn create_buffers(&mut self) -> Result<()> {
        use vk::BufferUsageFlags as U;
        let n = u64::from(self.desc.count);
        self.particle_buffer =
            self.buffer(n * std::mem::size_of::<Particle>() as u64, U::STORAGE_BUFFER | U::TRANSFER_DST, false)?;
        self.sort_buffer = self.buffer(
            self.layout.total,
            U::STORAGE_BUFFER | U::INDIRECT_BUFFER | U::TRANSFER_SRC | U::TRANSFER_DST,
            false,
        )?;
        let image_bytes = u64::from(self.desc.width) * u64::from(self.desc.height) * texel_bytes(self.precision);
        self.readback_sorted = image_bytes.div_ceil(16) * 16;
        self.readback = self.buffer(self.readback_sorted + self.layout.total, U::TRANSFER_DST, true)?;
        Ok(())
    }

    /// The colour image, its view, the render pass and the framebuffer.
    fn create_target(&mut self) -> Result<()> {
        let device = &self.gpu.device;
        let extent = vk::Extent3D { width: self.desc.width, height: self.desc.height, depth: 1 };
        let info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(self.format)
            .extent(extent)
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC)
            .initial_layout(vk::ImageLayout::UNDEFINED);
        // SAFETY: the format supports these usages with optimal tiling (pick_format), the extent
        // is within the device's limits (checked in `new`).
        self.image = unsafe { device.create_image(&info, None) }.map_err(vk_err("vkCreateImage"))?;
        // SAFETY: the image is live.
        let req = unsafe { device.get_image_memory_requirements(self.image) };
        let type_index = self.gpu.memory_type(
            req.memory_type_bits,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
        )?;
        let alloc = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(type_index);
        // SAFETY: an allocation of a type the image accepts.
        self.image_memory = unsafe { device.allocate_memory(&alloc, None) }.map_err(vk_err("vkAllocateMemory"))?;
        // SAFETY: the memory satisfies the image's requirements and is bound once.
        unsafe { device.bind_image_memory(self.image, self.image_memory, 0) }.map_err(vk_err("vkBindImageMemory"))?;
        let range =
            vk::ImageSubresourceRange::default().aspect_mask(vk::ImageAspectFlags::COLOR).level_count(1).layer_count(1);
        let view_info = vk::ImageViewCreateInfo::default()
            .image(self.image)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(self.format)
            .subresource_range(range);
        // SAFETY: the image is live and bound.
        self.image_view = unsafe { device.create_image_view(&view_info, None) }.map_err(vk_err("vkCreateImageView"))?;

        let attachments = [vk::AttachmentDescription::default()
            .format(self.format)
            .samples(vk::SampleCountFlags::TYPE_1)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::STORE)
            .stencil_load_op(vk::AttachmentLoadOp::DONT_CARE)
            .stencil_store_op(vk::AttachmentStoreOp::DONT_CARE)
            .initial_layout(vk::ImageLayout::UNDEFINED)
            .final_layout(vk::ImageLayout::TRANSFER_SRC_OPTIMAL)];
        let color = [vk::AttachmentReference { attachment: 0, layout: vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL }];
        let subpasses = [vk::SubpassDescription::default()
            .pipeline_bind_point(vk::PipelineBindPoint::GRAPHICS)
            .color_attachments(&color)];
        let dependencies = [
            // The last frame's copy out (a read) and writes before this frame's clear.
            vk::SubpassDependency::default()
                .src_subpass(vk::SUBPASS_EXTERNAL)
                .dst_subpass(0)
                .src_stage_mask(vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COLOR_ATTACHMENT_OUTPUT)
                .src_access_mask(vk::AccessFlags::COLOR_ATTACHMENT_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags::COLOR_ATTACHMENT_OUTPUT)
                .dst_access_mask(vk::AccessFlags::COLOR_ATTACHMENT_READ | vk::AccessFlags::COLOR_ATTACHMENT_WRITE),
            // The blended image, then the copy out.
            vk::SubpassDependency::default()
                .src_subpass(0)
                .dst_subpass(vk::SUBPASS_EXTERNAL)
                .src_stage_mask(vk::PipelineStageFlags::COLOR_ATTACHMENT_OUTPUT)
                .src_access_mask(vk::AccessFlags::COLOR_ATTACHMENT_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags::TRANSFER)
                .dst_access_mask(vk::AccessFlags::TRANSFER_READ),
        ];
        let rp_info = vk::RenderPassCreateInfo::default()
            .attachments(&attachments)
            .subpasses(&subpasses)
            .dependencies(&dependencies);
        // SAFETY: a complete description; every pointer outlives the call.
        self.render_pass =
            unsafe { device.create_render_pass(&rp_info, None) }.map_err(vk_err("vkCreateRenderPass"))?;
        let views = [self.image_view];
        let fb_info = vk::FramebufferCreateInfo::default()
            .render_pass(self.render_pass)
            .attachments(&views)
            .width(self.desc.width)
            .height(self.desc.height)
            .layers(1);
        // SAFETY: the view matches the render pass's attachment and the extent.
        self.framebuffer =
            unsafe { device.create_framebuffer(&fb_info, None) }.map_err(vk_err("vkCreateFramebuffer"))?;
        Ok(())
    }

    fn shader(&self, spv: &[u8]) -> Result<vk::ShaderModule> {
        let words = ash::util::read_spv(&mut std::io::Cursor::new(spv)).context("SPIR-V from build.rs")?;
        let info = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: SPIR-V compiled by build.rs for Vulkan 1.1.
        unsafe { self.gpu.device.create_shader_module(&info, None) }.map_err(vk_err("vkCreateShaderModule"))
    }

    /// One descriptor set and pipeline layout for the depth pass and the sprites: binding 0 the
    /// particles, 1 the keys, 2 the indices, 3 the count; push constants [`FrameConstants`].
    fn create_pipelines(&mut self) -> Result<()> {
        let device = &self.gpu.device;
        let (compute, vertex) = (vk::ShaderStageFlags::COMPUTE, vk::ShaderStageFlags::VERTEX);
        // The vertex shader reads the particles and the indices (declared readonly there).
        let stages = [compute | vertex, compute, compute | vertex, compute];
        let set_bindings: Vec<_> = (0..4u32)
            .zip(stages)
            .map(|(b, stage)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(stage)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&set_bindings);
        // SAFETY: a complete description.
        self.set_layout = unsafe { device.create_descriptor_set_layout(&info, None) }
            .map_err(vk_err("vkCreateDescriptorSetLayout"))?;
        let set_layouts = [self.set_layout];
        let push = [vk::PushConstantRange {
            stage_flags: compute | vertex,
            offset: 0,
            size: std::mem::size_of::<FrameConstants>() as u32,
        }];
        let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&push);
        // SAFETY: the set layout is live; 96 bytes of push constants are within the 128 guaranteed.
        self.pipeline_layout =
            unsafe { device.create_pipeline_layout(&info, None) }.map_err(vk_err("vkCreatePipelineLayout"))?;

        let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 4 }];
        let info = vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes);
        // SAFETY: a complete description.
        self.descriptor_pool =
            unsafe { device.create_descriptor_pool(&info, None) }.map_err(vk_err("vkCreateDescriptorPool"))?;
        let info =
            vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.descriptor_pool).set_layouts(&set_layouts);
        // SAFETY: the pool has room for this one set.
        self.set = unsafe { device.allocate_descriptor_sets(&info) }.map_err(vk_err("vkAllocateDescriptorSets"))?[0];
        let n = u64::from(self.desc.count);
        let l = self.layout;
        let regions = [
            (self.particle_buffer.buffer, 0, self.particle_buffer.size),
            (self.sort_buffer.buffer, l.keys, 4 * n),
            (self.sort_buffer.buffer, l.values, 4 * n),
            (self.sort_buffer.buffer, l.count, 4),
        ]
        .map(|(buffer, offset, range)| [vk::DescriptorBufferInfo { buffer, offset, range }]);
        let writes: Vec<_> = regions
            .iter()
            .enumerate()
            .map(|(b, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(self.set)
                    .dst_binding(b as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        // SAFETY: the set is not in use; offsets are multiples of minStorageBufferOffsetAlignment
        // (SortLayout) and every range lies within its buffer.
        unsafe { device.update_descriptor_sets(&writes, &[]) };

        let depth = self.shader(DEPTH_SPV)?;
        let stage = vk::PipelineShaderStageCreateInfo::default().stage(compute).module(depth).name(c"main");
        let info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(self.pipeline_layout)];
        // SAFETY: the module and layout are live and match the shader's interface.
        let made = unsafe { device.create_compute_pipelines(vk::PipelineCache::null(), &info, None) };
        // SAFETY: a module may be destroyed once its pipelines are made.
        unsafe { device.destroy_shader_module(depth, None) };
        self.depth_pipeline = made.map_err(|(_, e)| anyhow!("vkCreateComputePipelines: {e}"))?[0];

        let vert = self.shader(SPRITE_VERT_SPV)?;
        let frag = match self.shader(SPRITE_FRAG_SPV) {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: unused module.
                unsafe { device.destroy_shader_module(vert, None) };
                return Err(e);
            }
        };
        let made = self.create_sprite_pipeline(vert, frag);
        // SAFETY: as above.
        unsafe {
            device.destroy_shader_module(vert, None);
            device.destroy_shader_module(frag, None);
        }
        self.sprite_pipeline = made?;
        Ok(())
    }

    fn create_sprite_pipeline(&self, vert: vk::ShaderModule, frag: vk::ShaderModule) -> Result<vk::Pipeline> {
        let stages = [
            vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::VERTEX).module(vert).name(c"main"),
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::FRAGMENT)
                .module(frag)
                .name(c"main"),
        ];
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default();
        let assembly =
            vk::PipelineInputAssemblyStateCreateInfo::default().topology(vk::PrimitiveTopology::TRIANGLE_STRIP);
        let (w, h) = (self.desc.width, self.desc.height);
        let viewports =
            [vk::Viewport { x: 0.0, y: 0.0, width: w as f32, height: h as f32, min_depth: 0.0, max_depth: 1.0 }];
        let scissors = [vk::Rect2D { offset: vk::Offset2D::default(), extent: vk::Extent2D { width: w, height: h } }];
        let viewport = vk::PipelineViewportStateCreateInfo::default().viewports(&viewports).scissors(&scissors);
        let raster = vk::PipelineRasterizationStateCreateInfo::default()
            .polygon_mode(vk::PolygonMode::FILL)
            .cull_mode(vk::CullModeFlags::NONE)
            .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
            .line_width(1.0);
        let multisample =
            vk::PipelineMultisampleStateCreateInfo::default().rasterization_samples(vk::SampleCountFlags::TYPE_1);
        // Premultiplied "over": dst = src + dst * (1 - src.a), alpha included.
        let blend = [vk::PipelineColorBlendAttachmentState::default()
            .blend_enable(true)
            .src_color_blend_factor(vk::BlendFactor::ONE)
            .dst_color_blend_factor(vk::BlendFactor::ONE_MINUS_SRC_ALPHA)
            .color_blend_op(vk::BlendOp::ADD)
            .src_alpha_blend_factor(vk::BlendFactor::ONE)
            .dst_alpha_blend_factor(vk::BlendFactor::ONE_MINUS_SRC_ALPHA)
            .alpha_blend_op(vk::BlendOp::ADD)
            .color_write_mask(vk::ColorComponentFlags::RGBA)];
        let blend_state = vk::PipelineColorBlendStateCreateInfo::default().attachments(&blend);
        let info = [vk::GraphicsPipelineCreateInfo::default()
            .stages(&stages)
            .vertex_input_state(&vertex_input)
            .input_assembly_state(&assembly)
            .viewport_state(&viewport)
            .rasterization_state(&raster)
            .multisample_state(&multisample)
            .color_blend_state(&blend_state)
            .layout(self.pipeline_layout)
            .render_pass(self.render_pass)
            .subpass(0)];
        // SAFETY: every state the pipeline needs is given and outlives the call; the format
        // supports blending (pick_format).
        let made = unsafe { self.gpu.device.create_graphics_pipelines(vk::PipelineCache::null(), &info, None) };
        Ok(made.map_err(|(_, e)| anyhow!("vkCreateGraphicsPipelines: {e}"))?[0])
    }

    /// The recorder on our device, and one binding: keys, indices and the GPU-side count.
    fn create_sorter(&mut self) -> Result<()> {
        let gpu = self.gpu;
        let mut desc = RecorderDesc { max_bindings: 1, shader_int16: gpu.shader_int16, ..RecorderDesc::default() };
        desc.tuning.tile_origins = self.desc.tile_origins;
        // SAFETY: the instance, physical device and device are the Gpu's, which outlives this
        // renderer (it is borrowed), and the recorder is dropped in `Drop` after the device idles.
        let mut recorder =
            unsafe { SortRecorder::new(&gpu.instance, gpu.physical, &gpu.device, &desc) }.map_err(|e| match e {
                // The device offers shaderInt16 (checked in `new`) but cannot hold the tile.
                bitonic_vk::Error::InvalidOption { .. } if self.desc.tile_origins == Some(true) => {
                    anyhow::Error::new(BadRequest(format!("--tile-origins on: {e}")))
                }
                e => anyhow!("SortRecorder::new: {e}"),
            })?;
        let n = self.desc.count;
        let buffer = self.sort_buffer.buffer;
        let l = self.layout;
        let binding = recorder
            .bind(&BindDesc {
                keys: BufferRegion { buffer, offset: l.keys, size: 4 * u64::from(n) },
                values: Some(BufferRegion { buffer, offset: l.values, size: 4 * u64::from(n) }),
                count: Some(BufferRegion { buffer, offset: l.count, size: 4 }),
                capacity: n,
                ..BindDesc::default()
            })
            .map_err(|e| match e {
                bitonic_vk::Error::TooLarge { .. } => anyhow::Error::new(BadRequest(format!("--count {n}: {e}"))),
                e => anyhow!("SortRecorder::bind: {e}"),
            });
        self.recorder = Some(recorder);
        self.binding = Some(binding?);
        Ok(())
    }

    fn create_commands(&mut self) -> Result<()> {
        let device = &self.gpu.device;
        let info = vk::CommandPoolCreateInfo::default().queue_family_index(self.gpu.family);
        // SAFETY: plain creation on the live device.
        self.command_pool =
            unsafe { device.create_command_pool(&info, None) }.map_err(vk_err("vkCreateCommandPool"))?;
        let info = vk::CommandBufferAllocateInfo::default().command_pool(self.command_pool).command_buffer_count(1);
        // SAFETY: the pool is live.
        self.cmd = unsafe { device.allocate_command_buffers(&info) }.map_err(vk_err("vkAllocateCommandBuffers"))?[0];
        // SAFETY: plain creation.
        self.fence =
            unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) }.map_err(vk_err("vkCreateFence"))?;
        if self.gpu.timestamp_bits > 0 {
            if self.desc.pass_times {
                let (recorder, binding) = match (&self.recorder, &self.binding) {
                    (Some(r), Some(b)) => (r, b),
                    _ => bail!("the sort was not created before the commands"),
                };
                let passes = recorder
                    .passes(binding, self.desc.count, KeyKind::F32, Order::Descending)
                    .context("SortRecorder::passes")?;
                self.query_count = FRAME_QUERIES + passes as u32;
            }
            let info =
                vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(self.query_count);
            // SAFETY: plain creation; the queue family has timestamps.
            self.queries = unsafe { device.create_query_pool(&info, None) }.map_err(vk_err("vkCreateQueryPool"))?;
        }
        Ok(())
    }

    fn begin(&self) -> Result<()> {
        let device = &self.gpu.device;
        // SAFETY: the command buffer's last submission finished (its fence was waited for).
        unsafe { device.reset_command_pool(self.command_pool, vk::CommandPoolResetFlags::empty()) }
            .map_err(vk_err("vkResetCommandPool"))?;
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the command buffer was just reset.
        unsafe { device.begin_command_buffer(self.cmd, &begin) }.map_err(vk_err("vkBeginCommandBuffer"))
    }

    fn submit_and_wait(&self) -> Result<()> {
        let device = &self.gpu.device;
        // SAFETY: recording began in `begin`.
        unsafe { device.end_command_buffer(self.cmd) }.map_err(vk_err("vkEndCommandBuffer"))?;
        let cmds = [self.cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: the fence is unsignalled and the command buffer complete; this thread alone uses
        // the queue.
        unsafe { device.queue_submit(self.gpu.queue, &submit, self.fence) }.map_err(vk_err("vkQueueSubmit"))?;
        // SAFETY: the fence is live.
        unsafe { device.wait_for_fences(&[self.fence], true, 60_000_000_000) }.map_err(vk_err("vkWaitForFences"))?;
        // SAFETY: signalled and no longer in use.
        unsafe { device.reset_fences(&[self.fence]) }.map_err(vk_err("vkResetFences"))
    }

    fn barrier(&self, src: (vk::PipelineStageFlags, vk::AccessFlags), dst: (vk::PipelineStageFlags, vk::AccessFlags)) {
        let m = [vk::MemoryBarrier::default().src_access_mask(src.1).dst_access_mask(dst.1)];
        // SAFETY: the command buffer is recording, outside the render pass.
        unsafe {
            self.gpu.device.cmd_pipeline_barrier(self.cmd, src.0, dst.0, vk::DependencyFlags::empty(), &m, &[], &[])
        };
    }

    /// Copies the particles in through a staging buffer, zeroes the keys and indices, and writes
    /// the indirect command's constant fields (4 vertices, first vertex and instance 0).
    fn upload(&self) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(&self.particles);
        let staging = self.buffer(bytes.len() as u64, vk::BufferUsageFlags::TRANSFER_SRC, true)?;
        // SAFETY: mapped host-coherent memory of `bytes.len()` bytes, not in use by the GPU.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), staging.mapped, bytes.len()) };
        let result = (|| {
            self.begin()?;
            let device = &self.gpu.device;
            let copy = [vk::BufferCopy { src_offset: 0, dst_offset: 0, size: bytes.len() as u64 }];
            let l = self.layout;
            let command = [4u32, 0, 0, 0];
            // SAFETY: the buffers have the transfer usages and hold these ranges; the update is 16
            // bytes at a multiple of 4; the fill covers keys and indices, which the update does not
            // touch.
            unsafe {
                device.cmd_copy_buffer(self.cmd, staging.buffer, self.particle_buffer.buffer, &copy);
                device.cmd_update_buffer(
                    self.cmd,
                    self.sort_buffer.buffer,
                    l.indirect(),
                    bytemuck::cast_slice(&command),
                );
                device.cmd_fill_buffer(self.cmd, self.sort_buffer.buffer, l.keys, l.total - l.keys, 0);
            }
            // Every later use, in later submissions too.
            self.barrier(
                (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
                (
                    vk::PipelineStageFlags::TRANSFER
                        | vk::PipelineStageFlags::COMPUTE_SHADER
                        | vk::PipelineStageFlags::VERTEX_SHADER
                        | vk::PipelineStageFlags::DRAW_INDIRECT,
                    vk::AccessFlags::TRANSFER_READ
                        | vk::AccessFlags::TRANSFER_WRITE
                        | vk::AccessFlags::SHADER_READ
                        | vk::AccessFlags::SHADER_WRITE
                        | vk::AccessFlags::INDIRECT_COMMAND_READ,
                ),
            );
            self.submit_and_wait()
        })();
        self.destroy_buffer(&staging);
        result
    }

    fn push_constants(&self, constants: &FrameConstants) {
        // SAFETY: the command buffer is recording; the range matches the layout's one range.
        unsafe {
            self.gpu.device.cmd_push_constants(
                self.cmd,
                self.pipeline_layout,
                vk::ShaderStageFlags::COMPUTE | vk::ShaderStageFlags::VERTEX,
                0,
                bytemuck::bytes_of(constants),
            )
        };
    }

    fn timestamp(&self, query: u32) {
        if self.queries != vk::QueryPool::null() {
            // SAFETY: `query` < 4 <= query_count, reset at the start of this command buffer; BOTTOM_OF_PIPE
            // waits for every earlier command to finish.
            unsafe {
                self.gpu.device.cmd_write_timestamp(
                    self.cmd,
                    vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                    self.queries,
                    query,
                )
            };
        }
    }

    /// Records, submits and waits for frame `index` (its camera), and reads back what `readback`
    /// asks for, plus the count.
    pub fn render(&self, index: u32, readback: Readback) -> Result<Frame> {
        use vk::AccessFlags as A;
        use vk::PipelineStageFlags as S;
        let (recorder, binding) = match (&self.recorder, &self.binding) {
            (Some(r), Some(b)) => (r, b),
            _ => bail!("the renderer was not fully created"),
        };
        let constants = scene::camera(index, self.desc.width, self.desc.height, self.desc.count, self.desc.zoom);
        let device = &self.gpu.device;
        let l = self.layout;
        let cmd = self.cmd;
        self.begin()?;
        if self.queries != vk::QueryPool::null() {
            // SAFETY: outside a render pass; the last use of the queries finished.
            unsafe { device.cmd_reset_query_pool(cmd, self.queries, 0, self.query_count) };
        }
        // The last frame's reads and writes of these buffers come before this frame's writes.
        self.barrier(
            (
                S::DRAW_INDIRECT | S::VERTEX_SHADER | S::COMPUTE_SHADER | S::TRANSFER,
                A::SHADER_WRITE | A::TRANSFER_WRITE,
            ),
            (S::TRANSFER | S::COMPUTE_SHADER, A::TRANSFER_WRITE | A::SHADER_READ | A::SHADER_WRITE),
        );
        // SAFETY: 4 bytes at a multiple of 4 inside the buffer, which has TRANSFER_DST usage.
        unsafe { device.cmd_fill_buffer(cmd, self.sort_buffer.buffer, l.count, 4, 0) };
        // The zeroed count before the depth pass's atomic adds on it.
        self.barrier((S::TRANSFER, A::TRANSFER_WRITE), (S::COMPUTE_SHADER, A::SHADER_READ | A::SHADER_WRITE));
        self.timestamp(0);

        // SAFETY: recording, outside a render pass; the pipeline, layout and set are live and the
        // set's buffers are alive until the frame's fence is waited for.
        unsafe {
            device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.depth_pipeline);
            device.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.pipeline_layout,
                0,
                &[self.set],
                &[],
            );
        }
        self.push_constants(&constants);
        // SAFETY: as above; the group count was checked against the device's limit in `new`.
        unsafe { device.cmd_dispatch(cmd, self.desc.count.div_ceil(DEPTH_GROUP), 1, 1) };
        // The recorder's contract: our writes visible to its compute reads and writes.
        self.barrier((S::COMPUTE_SHADER, A::SHADER_WRITE), (S::COMPUTE_SHADER, A::SHADER_READ | A::SHADER_WRITE));
        self.timestamp(1);

        // Back to front: the largest depth first. The sort takes min(count, N) elements, the count
        // the depth pass wrote.
        // SAFETY: `cmd` is recording outside a render pass on a queue with compute; the barrier
        // above makes the keys, indices and count visible; the recorder, binding and buffers live
        // until the fence is waited for (below), and the recorder is dropped before the device.
        if self.query_count > FRAME_QUERIES {
            // SAFETY: as above, and the pool is a timestamp pool of this device with a query for
            // each pass from FRAME_QUERIES on (counted by `passes` for this binding, count and
            // order), reset at the start of this command buffer and read after the fence.
            unsafe {
                recorder.record_timed(
                    cmd,
                    binding,
                    self.desc.count,
                    KeyKind::F32,
                    Order::Descending,
                    self.queries,
                    FRAME_QUERIES,
                )
            }
            .context("SortRecorder::record_timed")?;
        } else {
            // SAFETY: as above.
            unsafe { recorder.record::<f32>(cmd, binding, self.desc.count, Order::Descending) }
                .context("SortRecorder::record")?;
        }
        // The sort's last writes, then the vertex shader's reads of the indices, the indirect
        // command's read of the count, and the copies out.
        self.barrier(
            (S::COMPUTE_SHADER, A::SHADER_WRITE),
            (
                S::VERTEX_SHADER | S::DRAW_INDIRECT | S::TRANSFER,
                A::SHADER_READ | A::INDIRECT_COMMAND_READ | A::TRANSFER_READ,
            ),
        );
        self.timestamp(2);

        let clear = [vk::ClearValue { color: vk::ClearColorValue { float32: scene::CLEAR } }];
        let area = vk::Rect2D {
            offset: vk::Offset2D::default(),
            extent: vk::Extent2D { width: self.desc.width, height: self.desc.height },
        };
        let begin = vk::RenderPassBeginInfo::default()
            .render_pass(self.render_pass)
            .framebuffer(self.framebuffer)
            .render_area(area)
            .clear_values(&clear);
        // SAFETY: recording; the render pass, framebuffer and pipeline are compatible and live; the
        // `record` above bound compute state only, so the graphics state here is ours.
        unsafe {
            device.cmd_begin_render_pass(cmd, &begin, vk::SubpassContents::INLINE);
            device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::GRAPHICS, self.sprite_pipeline);
            device.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::GRAPHICS,
                self.pipeline_layout,
                0,
                &[self.set],
                &[],
            );
        }
        self.push_constants(&constants);
        // SAFETY: inside the render pass; the indirect command lies at a multiple of 4 in a buffer
        // with INDIRECT_BUFFER usage, its instance count at most N (the depth pass takes one slot
        // per particle at most), so every `indices[gl_InstanceIndex]` is in range.
        unsafe {
            device.cmd_draw_indirect(cmd, self.sort_buffer.buffer, l.indirect(), 1, 16);
            device.cmd_end_render_pass(cmd);
        }
        self.timestamp(3);

        // SAFETY: the image is in TRANSFER_SRC_OPTIMAL (the render pass's final layout, its
        // dependency orders the copy after the blend); the readback buffer holds the image at 0 and
        // the sort buffer's bytes at `readback_sorted`.
        unsafe {
            if readback.image {
                let region = [vk::BufferImageCopy::default()
                    .image_subresource(vk::ImageSubresourceLayers {
                        aspect_mask: vk::ImageAspectFlags::COLOR,
                        mip_level: 0,
                        base_array_layer: 0,
                        layer_count: 1,
                    })
                    .image_extent(vk::Extent3D { width: self.desc.width, height: self.desc.height, depth: 1 })];
                device.cmd_copy_image_to_buffer(
                    cmd,
                    self.image,
                    vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                    self.readback.buffer,
                    &region,
                );
            }
            let (from, size) = if readback.sorted { (0, l.total) } else { (l.indirect(), 16) };
            let region = [vk::BufferCopy { src_offset: from, dst_offset: self.readback_sorted + from, size }];
            device.cmd_copy_buffer(cmd, self.sort_buffer.buffer, self.readback.buffer, &region);
        }
        self.barrier((S::TRANSFER, A::TRANSFER_WRITE), (S::HOST, A::HOST_READ));
        self.submit_and_wait()?;

        let timings = if self.queries != vk::QueryPool::null() {
            let mut ticks = vec![0u64; self.query_count as usize];
            // SAFETY: every query of the pool was written by the finished submission.
            unsafe { device.get_query_pool_results(self.queries, 0, &mut ticks, vk::QueryResultFlags::TYPE_64) }
                .map_err(vk_err("vkGetQueryPoolResults"))?;
            let mask = if self.gpu.timestamp_bits >= 64 { u64::MAX } else { (1u64 << self.gpu.timestamp_bits) - 1 };
            let period = f64::from(self.gpu.limits.timestamp_period);
            let us = |a: usize, b: usize| (ticks[b].wrapping_sub(ticks[a]) & mask) as f64 * period / 1000.0;
            // Pass i ends at query FRAME_QUERIES + i; the first starts after the depth pass (1).
            let ends = FRAME_QUERIES as usize..self.query_count as usize;
            let passes = ends.map(|end| us(if end == FRAME_QUERIES as usize { 1 } else { end - 1 }, end)).collect();
            Some(Timings { depth: us(0, 1), sort: us(1, 2), draw: us(2, 3), passes })
        } else {
            None
        };
        let count = self.read_u32s(self.readback_sorted + l.count, 1)[0];
        let image = readback.image.then(|| self.read_image());
        let sorted = readback.sorted.then(|| {
            let c = count.min(self.desc.count) as usize;
            let keys = self.read_u32s(self.readback_sorted + l.keys, c).into_iter().map(f32::from_bits).collect();
            (keys, self.read_u32s(self.readback_sorted + l.values, c))
        });
        Ok(Frame { constants, count, timings, image, sorted })
    }

    fn read_u32s(&self, offset: u64, n: usize) -> Vec<u32> {
        assert!(offset + 4 * n as u64 <= self.readback.size);
        let mut out = vec![0u32; n];
        // SAFETY: in bounds of the mapped host-coherent buffer (asserted), written by a finished
        // submission whose writes a TRANSFER_WRITE -> HOST_READ barrier made visible.
        unsafe {
            std::ptr::copy_nonoverlapping(self.readback.mapped.add(offset as usize), out.as_mut_ptr() as *mut u8, n * 4)
        };
        out
    }

    fn read_image(&self) -> Vec<[f32; 4]> {
        let pixels = self.desc.width as usize * self.desc.height as usize;
        texels(&self.read_u32s(0, pixels * texel_bytes(self.precision) as usize / 4), self.precision)
    }
}

/// Bytes per texel of an attachment of this precision.
pub fn texel_bytes(precision: Precision) -> u64 {
    match precision {
        Precision::F32 => 16,
        Precision::F16 => 8,
    }
}

/// The RGBA texels of an image read back as u32 words (4 a texel in RGBA32F, 2 in RGBA16F).
pub fn texels(words: &[u32], precision: Precision) -> Vec<[f32; 4]> {
    match precision {
        Precision::F32 => words.chunks_exact(4).map(|p| [0, 1, 2, 3].map(|c| f32::from_bits(p[c]))).collect(),
        Precision::F16 => words
            .chunks_exact(2)
            .map(|p| [p[0] as u16, (p[0] >> 16) as u16, p[1] as u16, (p[1] >> 16) as u16].map(scene::f16_to_f32))
            .collect(),
    }
}

/// RGBA32F where the device blends into it (unless `half`), else RGBA16F (which every device must).
fn pick_format(gpu: &Gpu, half: bool) -> Result<(vk::Format, Precision)> {
    let needed = vk::FormatFeatureFlags::COLOR_ATTACHMENT
        | vk::FormatFeatureFlags::COLOR_ATTACHMENT_BLEND
        | vk::FormatFeatureFlags::TRANSFER_SRC;
    let candidates =
        [(vk::Format::R32G32B32A32_SFLOAT, Precision::F32), (vk::Format::R16G16B16A16_SFLOAT, Precision::F16)];
    for (format, precision) in candidates.into_iter().skip(usize::from(half)) {
        // SAFETY: `physical` belongs to the live instance.
        let props = unsafe { gpu.instance.get_physical_device_format_properties(gpu.physical, format) };
        if props.optimal_tiling_features.contains(needed) {
            return Ok((format, precision));
        }
    }
    bail!("the device blends into neither R32G32B32A32_SFLOAT nor R16G16B16A16_SFLOAT attachments")
}

impl Drop for Renderer<'_> {
    fn drop(&mut self) {
        let device = &self.gpu.device;
        // SAFETY: waiting makes every submission of ours finish, after which nothing is in use;
        // destroying null handles (a construction that failed half-way) does nothing.
        unsafe {
            // Nothing to do if the device is lost: destruction goes ahead either way.
            let _ = device.device_wait_idle();
            device.destroy_query_pool(self.queries, None);
            device.destroy_fence(self.fence, None);
            device.destroy_command_pool(self.command_pool, None);
            device.destroy_pipeline(self.sprite_pipeline, None);
            device.destroy_pipeline(self.depth_pipeline, None);
            device.destroy_descriptor_pool(self.descriptor_pool, None);
            device.destroy_pipeline_layout(self.pipeline_layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
            device.destroy_framebuffer(self.framebuffer, None);
            device.destroy_render_pass(self.render_pass, None);
            device.destroy_image_view(self.image_view, None);
            device.destroy_image(self.image, None);
            device.free_memory(self.image_memory, None);
        }
        for b in [&self.particle_buffer, &self.sort_buffer, &self.readback] {
            self.destroy_buffer(b);
        }
        self.binding = None;
        self.recorder = None;
    }
}
