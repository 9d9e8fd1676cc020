//! The particle frame through wgpu (`--renderer wgpu`): the same scene, depth pass, sort and draw
//! as `render.rs`, on wgpu's Vulkan backend, the sort through `bitonic_vk::wgpu::WgpuSorter`.
//!
//! One frame is one submission of three command buffers, in this order:
//!
//! 1. wgpu's: clear the GPU-side count, then the depth pass (`depth` in `particles.wgsl`, a port
//!    of `depth.comp`) appending each visible particle's depth (key) and index (value);
//! 2. the sort's own, from `WgpuSorter::record_timed` (or `record`): f32 keys, descending (back to
//!    front), over min(count, N) elements; wgpu does not let one encoder mix its commands with raw
//!    ones, so the sort cannot share the depth pass's or the draw's;
//! 3. wgpu's: the render pass (`sprite_vertex` / `sprite_fragment`), one indirect draw whose
//!    instance count is the count, then the copies out and the timestamps' resolve.
//!
//! The sort's command buffer begins and ends with the barriers of `WgpuSorter`'s contract; wgpu
//! adds its own between the depth pass's storage writes and the draw's indirect and storage reads.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, Weak};

use anyhow::{anyhow, bail, Context as _, Result};
use bitonic_vk::wgpu::{TimedSort, WgpuBindDesc, WgpuBinding, WgpuSorter, WgpuSorterDesc};
use bitonic_vk::{KeyKind, Order, Tuning};
use wgpu::util::DeviceExt;

use crate::render::{
    texel_bytes, texels, BadRequest, Frame, FrameRenderer, Readback, RenderDesc, SortLayout, Timings, ValidationLog,
    DEPTH_GROUP,
};
use crate::scene::{self, FrameConstants, Particle, Precision};

const SHADERS: &str = include_str!("particles.wgsl");
/// The frame's timestamps: the depth pass's start and end, the render pass's start and end.
const FRAME_QUERIES: u32 = 4;
/// Timestamps for the sort's passes, a ring of `WgpuSorter`'s: far more than a sort of 2^31
/// elements takes.
const SORT_QUERIES: u32 = 1024;

/// The logs of the open devices with validation. wgpu reports the validation layer's messages
/// through the `log` crate, which has one logger per process.
static LOGS: Mutex<Vec<Weak<Mutex<Vec<String>>>>> = Mutex::new(Vec::new());

/// Prints wgpu's warnings and errors, and keeps the errors in every log of [`LOGS`].
struct Forward;

impl log::Log for Forward {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }
    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let message = record.args().to_string();
        eprintln!("[{} {}] {message}", record.level(), record.target());
        // wgpu-hal prints the objects a message names as messages of their own.
        if record.level() == log::Level::Error && !message.starts_with("\tobjects:") {
            for log in LOGS.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(Weak::upgrade) {
                log.lock().unwrap_or_else(|e| e.into_inner()).push(message.clone());
            }
        }
    }
    fn flush(&self) {}
}

/// wgpu's instance, adapter, device and queue on the Vulkan backend.
pub struct WgpuGpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    log: ValidationLog,
    /// The device's name and type, for the report.
    pub name: String,
    /// Whether the device has `Features::SHADER_I16` (requested wherever the adapter offers it,
    /// so that the sorter may hold u32 pairs in tiles of 16-bit origins).
    pub shader_int16: bool,
    /// Whether the device has `Features::TIMESTAMP_QUERY` (requested where offered).
    pub timestamps: bool,
    float32_blendable: bool,
}

impl WgpuGpu {
    /// wgpu's default Vulkan adapter, with the Khronos validation layer (synchronization
    /// validation included) and wgpu's own validation where `validation`.
    pub fn new(validation: bool) -> Result<WgpuGpu> {
        static LOGGER: Forward = Forward;
        let _ = log::set_logger(&LOGGER).map(|()| log::set_max_level(log::LevelFilter::Warn));
        let log = ValidationLog::default();
        if validation {
            let mut logs = LOGS.lock().unwrap_or_else(|e| e.into_inner());
            logs.retain(|l| l.strong_count() > 0);
            logs.push(Arc::downgrade(&log));
        }
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN;
        desc.flags = if validation { wgpu::InstanceFlags::VALIDATION } else { wgpu::InstanceFlags::empty() };
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
            .context("no wgpu adapter on the Vulkan backend (is libvulkan1 with a driver installed?)")?;
        let info = adapter.get_info();
        let offered = adapter.features();
        let wanted = wgpu::Features::SHADER_I16 | wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::FLOAT32_BLENDABLE;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("particles"),
            required_features: offered & wanted,
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .context("wgpu::Adapter::request_device")?;
        // Errors outside the frame's error scopes (none are expected) are logged, not panics.
        let uncaptured = log.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            eprintln!("[wgpu uncaptured] {e}");
            uncaptured.lock().unwrap_or_else(|e| e.into_inner()).push(e.to_string());
        }));
        let features = device.features();
        Ok(WgpuGpu {
            name: format!("{} ({:?}, wgpu {:?})", info.name, info.device_type, info.backend),
            shader_int16: features.contains(wgpu::Features::SHADER_I16),
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            float32_blendable: features.contains(wgpu::Features::FLOAT32_BLENDABLE),
            device,
            queue,
            log,
        })
    }

    /// The validation messages of error severity so far (shared: still readable after drop).
    pub fn validation_log(&self) -> ValidationLog {
        self.log.clone()
    }
}

/// The frame's timestamps: 4 queries, resolved into `resolve` and copied to `read`.
struct Queries {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
}

/// Every object of the wgpu renderer.
pub struct WgpuRenderer<'g> {
    gpu: &'g WgpuGpu,
    desc: RenderDesc,
    particles: Vec<Particle>,
    precision: Precision,
    format: wgpu::TextureFormat,
    layout: SortLayout,
    /// The indirect draw command (its instance count the GPU-side count), keys and indices.
    sort_buffer: wgpu::Buffer,
    /// [`FrameConstants`], written before each frame's submission.
    constants: wgpu::Buffer,
    depth_pipeline: wgpu::ComputePipeline,
    depth_group: wgpu::BindGroup,
    sprite_pipeline: wgpu::RenderPipeline,
    sprite_group: wgpu::BindGroup,
    target: wgpu::Texture,
    target_view: wgpu::TextureView,
    /// The image, rows padded to `row_bytes`.
    image_out: wgpu::Buffer,
    row_bytes: u32,
    /// The sort buffer's bytes.
    sorted_out: wgpu::Buffer,
    queries: Option<Queries>,
    sorter: WgpuSorter,
    binding: WgpuBinding,
}

fn storage(buffer: &wgpu::Buffer, offset: u64, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer, offset, size: NonZeroU64::new(size) })
}

impl<'g> WgpuRenderer<'g> {
    /// Makes the particles, uploads them, and creates everything a frame needs.
    pub fn new(gpu: &'g WgpuGpu, desc: RenderDesc) -> Result<WgpuRenderer<'g>> {
        let device = &gpu.device;
        let limits = device.limits();
        let n = desc.count;
        if n == 0 {
            return Err(BadRequest("--count must be at least 1".into()).into());
        }
        if desc.tile_origins == Some(true) && !gpu.shader_int16 {
            return Err(BadRequest(format!(
                "--tile-origins on: {} does not offer wgpu's SHADER_I16 (shaderInt16 and 16-bit storage), which \
                 tiles of 16-bit origins need here",
                gpu.name
            ))
            .into());
        }
        let particle_bytes = u64::from(n) * std::mem::size_of::<Particle>() as u64;
        let layout = SortLayout::new(n, u64::from(limits.min_storage_buffer_offset_alignment));
        if particle_bytes > limits.max_storage_buffer_binding_size || layout.total > limits.max_buffer_size {
            return Err(BadRequest(format!(
                "--count {n}: {particle_bytes} bytes of particles and a {}-byte sort buffer exceed this device's \
                 max_storage_buffer_binding_size ({}) or max_buffer_size ({})",
                layout.total, limits.max_storage_buffer_binding_size, limits.max_buffer_size
            ))
            .into());
        }
        if n.div_ceil(DEPTH_GROUP) > limits.max_compute_workgroups_per_dimension {
            return Err(BadRequest(format!(
                "--count {n}: over {} workgroups of {DEPTH_GROUP} (max_compute_workgroups_per_dimension)",
                limits.max_compute_workgroups_per_dimension
            ))
            .into());
        }
        let max_side = limits.max_texture_dimension_2d;
        if desc.width == 0 || desc.height == 0 || desc.width > max_side || desc.height > max_side {
            return Err(BadRequest(format!(
                "--size {}x{}: each side must be 1..={max_side} on this device",
                desc.width, desc.height
            ))
            .into());
        }
        // RGBA32F where wgpu blends into it (FLOAT32_BLENDABLE), else RGBA16F, which it always does.
        let (format, precision) = if gpu.float32_blendable && !desc.half {
            (wgpu::TextureFormat::Rgba32Float, Precision::F32)
        } else {
            (wgpu::TextureFormat::Rgba16Float, Precision::F16)
        };

        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let particles = scene::galaxy(n, desc.seed);
        let particle_buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("particles"),
            contents: bytemuck::cast_slice(&particles),
            usage: wgpu::BufferUsages::STORAGE,
        });
        // Written whole at creation (zeros, and the indirect command's constant fields: 4 vertices,
        // first vertex and instance 0), so that wgpu never clears bytes the sort has written.
        let mut initial = vec![0u32; (layout.total / 4) as usize];
        initial[(layout.indirect() / 4) as usize] = 4;
        let sort_buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("indirect command, keys, indices"),
            contents: bytemuck::cast_slice(&initial),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::INDIRECT
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
        });
        let constants = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("frame constants"),
            size: std::mem::size_of::<FrameConstants>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });

        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("particles.wgsl"),
            source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(SHADERS)),
        });
        let depth_pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("depth"),
            layout: None,
            module: &module,
            entry_point: Some("depth"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[("group_size", f64::from(DEPTH_GROUP))],
                ..Default::default()
            },
            cache: None,
        });
        let sprite_pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("sprite"),
            layout: None,
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("sprite_vertex"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: wgpu::PrimitiveState {
                topology: wgpu::PrimitiveTopology::TriangleStrip,
                cull_mode: None,
                ..Default::default()
            },
            depth_stencil: None,
            multisample: wgpu::MultisampleState::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("sprite_fragment"),
                compilation_options: Default::default(),
                // Premultiplied "over": dst = src + dst * (1 - src.a), alpha included.
                targets: &[Some(wgpu::ColorTargetState {
                    format,
                    blend: Some(wgpu::BlendState::PREMULTIPLIED_ALPHA_BLENDING),
                    write_mask: wgpu::ColorWrites::ALL,
                })],
            }),
            multiview_mask: None,
            cache: None,
        });
        let four_n = 4 * u64::from(n);
        let depth_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("depth"),
            layout: &depth_pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: particle_buffer.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: storage(&sort_buffer, layout.keys, four_n) },
                wgpu::BindGroupEntry { binding: 2, resource: storage(&sort_buffer, layout.values, four_n) },
                wgpu::BindGroupEntry { binding: 3, resource: storage(&sort_buffer, layout.count, 4) },
                wgpu::BindGroupEntry { binding: 4, resource: constants.as_entire_binding() },
            ],
        });
        let sprite_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sprite"),
            layout: &sprite_pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: particle_buffer.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 4, resource: constants.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 5, resource: storage(&sort_buffer, layout.values, four_n) },
            ],
        });

        let target = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("image"),
            size: wgpu::Extent3d { width: desc.width, height: desc.height, depth_or_array_layers: 1 },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        let target_view = target.create_view(&Default::default());
        let row_bytes =
            (desc.width * texel_bytes(precision) as u32).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
        let readable = |label, size| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let image_out = readable("image out", u64::from(row_bytes) * u64::from(desc.height));
        let sorted_out = readable("sorted out", layout.total);
        let queries = gpu.timestamps.then(|| Queries {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("frame timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: FRAME_QUERIES,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps"),
                size: 8 * u64::from(FRAME_QUERIES),
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            read: readable("timestamps out", 8 * u64::from(FRAME_QUERIES)),
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            bail!("wgpu: {e}");
        }

        let mut tuning = Tuning::default();
        tuning.tile_origins = desc.tile_origins;
        let sorter_desc = WgpuSorterDesc {
            max_bindings: 1,
            timestamp_queries: if gpu.timestamps { SORT_QUERIES } else { 0 },
            tuning,
            ..WgpuSorterDesc::default()
        };
        // SAFETY: every command buffer the sorter returns is submitted in `render_frame` right after
        // it is recorded; the bound buffer is this device's and never destroyed (the renderer holds
        // it, and so does the sorter).
        let mut sorter = unsafe { WgpuSorter::new(device, &sorter_desc) }.map_err(|e| match e {
            // The device offers SHADER_I16 (checked above) but cannot hold the tile.
            bitonic_vk::Error::InvalidOption { .. } if desc.tile_origins == Some(true) => {
                anyhow::Error::new(BadRequest(format!("--tile-origins on: {e}")))
            }
            e => anyhow!("WgpuSorter::new: {e}"),
        })?;
        let binding = sorter
            .bind(&WgpuBindDesc {
                values: Some(sort_buffer.slice(layout.values..layout.values + four_n)),
                count: Some(sort_buffer.slice(layout.count..layout.count + 4)),
                ..WgpuBindDesc::new(sort_buffer.slice(layout.keys..layout.keys + four_n), n)
            })
            .map_err(|e| match e {
                bitonic_vk::Error::TooLarge { .. } => anyhow::Error::new(BadRequest(format!("--count {n}: {e}"))),
                e => anyhow!("WgpuSorter::bind: {e}"),
            })?;
        Ok(WgpuRenderer {
            gpu,
            desc,
            particles,
            precision,
            format,
            layout,
            sort_buffer,
            constants,
            depth_pipeline,
            depth_group,
            sprite_pipeline,
            sprite_group,
            target,
            target_view,
            image_out,
            row_bytes,
            sorted_out,
            queries,
            sorter,
            binding,
        })
    }

    /// The first command buffer: clear the count, then the depth pass.
    fn depth_pass(&self) -> wgpu::CommandBuffer {
        let mut encoder =
            self.gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("depth") });
        encoder.clear_buffer(&self.sort_buffer, self.layout.count, Some(4));
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("depth"),
                timestamp_writes: self.queries.as_ref().map(|q| wgpu::ComputePassTimestampWrites {
                    query_set: &q.set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            pass.set_pipeline(&self.depth_pipeline);
            pass.set_bind_group(0, &self.depth_group, &[]);
            pass.dispatch_workgroups(self.desc.count.div_ceil(DEPTH_GROUP), 1, 1);
        }
        encoder.finish()
    }

    /// The last command buffer: the draw, then the copies out and the timestamps.
    fn draw(&self, readback: Readback) -> wgpu::CommandBuffer {
        let mut encoder =
            self.gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("draw") });
        {
            let [r, g, b, a] = scene::CLEAR.map(f64::from);
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("sprites"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &self.target_view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color { r, g, b, a }),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: None,
                timestamp_writes: self.queries.as_ref().map(|q| wgpu::RenderPassTimestampWrites {
                    query_set: &q.set,
                    beginning_of_pass_write_index: Some(2),
                    end_of_pass_write_index: Some(3),
                }),
                occlusion_query_set: None,
                multiview_mask: None,
            });
            pass.set_pipeline(&self.sprite_pipeline);
            pass.set_bind_group(0, &self.sprite_group, &[]);
            // The instance count is the count the depth pass wrote: at most N, so every
            // `sorted[instance]` is in range.
            pass.draw_indirect(&self.sort_buffer, self.layout.indirect());
        }
        if readback.image {
            encoder.copy_texture_to_buffer(
                self.target.as_image_copy(),
                wgpu::TexelCopyBufferInfo {
                    buffer: &self.image_out,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(self.row_bytes),
                        rows_per_image: None,
                    },
                },
                self.target.size(),
            );
        }
        let l = self.layout;
        let (from, size) = if readback.sorted { (0, l.total) } else { (l.indirect(), 16) };
        encoder.copy_buffer_to_buffer(&self.sort_buffer, from, &self.sorted_out, from, size);
        if let Some(q) = &self.queries {
            encoder.resolve_query_set(&q.set, 0..FRAME_QUERIES, &q.resolve, 0);
            encoder.copy_buffer_to_buffer(&q.resolve, 0, &q.read, 0, q.resolve.size());
        }
        encoder.finish()
    }

    /// Maps `buffers` for reading and waits for the device.
    fn map(&self, buffers: &[&wgpu::Buffer]) -> Result<()> {
        let (sender, receiver) = std::sync::mpsc::channel();
        for buffer in buffers {
            let sender = sender.clone();
            buffer.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                let _ = sender.send(r);
            });
        }
        self.gpu.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| anyhow!("wgpu::Device::poll: {e}"))?;
        for _ in buffers {
            receiver
                .recv()
                .context("a mapping never completed")?
                .map_err(|e| anyhow!("wgpu::Buffer::map_async: {e}"))?;
        }
        Ok(())
    }

    /// `words` u32s of a mapped buffer from byte `offset`.
    fn read_u32s(buffer: &wgpu::Buffer, offset: u64, words: usize) -> Result<Vec<u32>> {
        let view = buffer
            .slice(offset..offset + 4 * words as u64)
            .get_mapped_range()
            .map_err(|e| anyhow!("wgpu::BufferSlice::get_mapped_range: {e}"))?;
        Ok(bytemuck::pod_collect_to_vec(&view))
    }

    fn read_image(&self) -> Result<Vec<[f32; 4]>> {
        let row_words = (self.desc.width * texel_bytes(self.precision) as u32 / 4) as usize;
        let mut pixels = Vec::with_capacity(self.desc.width as usize * self.desc.height as usize);
        for y in 0..u64::from(self.desc.height) {
            let row = Self::read_u32s(&self.image_out, y * u64::from(self.row_bytes), row_words)?;
            pixels.extend(texels(&row, self.precision));
        }
        Ok(pixels)
    }

    /// Each part's GPU time: the depth pass and the draw from the frame's timestamps, the sort
    /// from its passes' (`WgpuSorter::pass_times`, summed).
    fn timings(&self, queries: &Queries, timed: &TimedSort) -> Result<Timings> {
        let ticks: Vec<u64> =
            bytemuck::pod_collect_to_vec(&Self::read_u32s(&queries.read, 0, 2 * FRAME_QUERIES as usize)?);
        let period = f64::from(self.gpu.queue.get_timestamp_period());
        let us = |a: usize, b: usize| ticks[b].wrapping_sub(ticks[a]) as f64 * period / 1000.0;
        let passes: Vec<f64> = self
            .sorter
            .pass_times(timed)
            .context("WgpuSorter::pass_times")?
            .context("the sort's timestamps are not written after the device went idle")?
            .iter()
            .map(|d| d.as_secs_f64() * 1e6)
            .collect();
        Ok(Timings {
            depth: us(0, 1),
            sort: passes.iter().sum(),
            draw: us(2, 3),
            passes: if self.desc.pass_times { passes } else { Vec::new() },
        })
    }
}

impl FrameRenderer for WgpuRenderer<'_> {
    fn render_frame(&mut self, index: u32, readback: Readback) -> Result<Frame> {
        let constants = scene::camera(index, self.desc.width, self.desc.height, self.desc.count, self.desc.zoom);
        let (device, queue) = (&self.gpu.device, &self.gpu.queue);
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        queue.write_buffer(&self.constants, 0, bytemuck::bytes_of(&constants));
        let depth = self.depth_pass();
        // Back to front: the largest depth first, over min(count, N) elements.
        let (sort, timed) = if self.queries.is_some() {
            let (sort, timed) = self
                .sorter
                .record_timed(&self.binding, self.desc.count, KeyKind::F32, Order::Descending)
                .context("WgpuSorter::record_timed")?;
            (sort, Some(timed))
        } else {
            let sort = self
                .sorter
                .record::<f32>(&self.binding, self.desc.count, Order::Descending)
                .context("WgpuSorter::record")?;
            (sort, None)
        };
        let draw = self.draw(readback);
        queue.submit([depth, sort, draw]);
        let mut mapped = vec![&self.sorted_out];
        if readback.image {
            mapped.push(&self.image_out);
        }
        if let Some(q) = &self.queries {
            mapped.push(&q.read);
        }
        let result = self.map(&mapped).and_then(|()| {
            let l = self.layout;
            let count = Self::read_u32s(&self.sorted_out, l.count, 1)?[0];
            let timings = match (&self.queries, &timed) {
                (Some(q), Some(t)) => Some(self.timings(q, t)?),
                _ => None,
            };
            let image = readback.image.then(|| self.read_image()).transpose()?;
            let sorted = if readback.sorted {
                let c = count.min(self.desc.count) as usize;
                let keys = Self::read_u32s(&self.sorted_out, l.keys, c)?.into_iter().map(f32::from_bits).collect();
                Some((keys, Self::read_u32s(&self.sorted_out, l.values, c)?))
            } else {
                None
            };
            Ok(Frame { constants, count, timings, image, sorted })
        });
        for buffer in mapped {
            buffer.unmap();
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            bail!("wgpu: {e}");
        }
        result
    }
    fn particles(&self) -> &[Particle] {
        &self.particles
    }
    fn precision(&self) -> Precision {
        self.precision
    }
    fn tile_origins(&self) -> bool {
        self.binding.binding().tile_origins()
    }
    fn format_name(&self) -> String {
        format!("{:?}", self.format)
    }
}
