//! Sorting a wgpu buffer on the GPU, headless: a wgpu device on the Vulkan backend, a compute pass
//! that fills a storage buffer with keys and their indices, the sort, and a read-back.
//!
//! ```sh
//! cargo run --release --example wgpu_sort -- [N]
//! ```
//!
//! A crate using it takes `bitonic-vk = { version = "0.1", default-features = false, features =
//! ["wgpu"] }` beside its own `wgpu`.

use std::borrow::Cow;

use bitonic_vk::wgpu::{WgpuBindDesc, WgpuSorter, WgpuSorterDesc};
use bitonic_vk::Order;

/// Pseudo-random keys and each key's index as its value.
const FILL: &str = r"
@group(0) @binding(0) var<storage, read_write> keys: array<f32>;
@group(0) @binding(1) var<storage, read_write> values: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.y * 2097152u + id.x;
    if (i >= arrayLength(&keys)) { return; }
    var h = i * 747796405u + 2891336453u;
    h = ((h >> ((h >> 28u) + 4u)) ^ h) * 277803737u;
    keys[i] = f32((h >> 22u) ^ h) / 4294967296.0 * 1000.0;
    values[i] = i;
}
";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u32 = std::env::args().nth(1).map_or(Ok(100_000), |a| a.parse())?;
    if n == 0 || n > 1 << 24 {
        return Err("N must be 1 to 2^24 (16777216)".into());
    }
    let mut instance = wgpu::InstanceDescriptor::new_without_display_handle();
    instance.backends = wgpu::Backends::VULKAN;
    let instance = wgpu::Instance::new(instance);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))?;
    let (device, queue) = pollster::block_on(
        adapter.request_device(&wgpu::DeviceDescriptor { required_limits: adapter.limits(), ..Default::default() }),
    )?;
    println!("device: {}", adapter.get_info().name);

    let bytes = u64::from(n) * 4;
    let storage = |label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    };
    let (keys, values) = (storage("keys"), storage("values"));
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: bytes * 2,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });

    // The renderer's own pass writes the keys and values.
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
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("fill"),
        layout: &fill.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: keys.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: values.as_entire_binding() },
        ],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&fill);
        pass.set_bind_group(0, &group, &[]);
        // Rows of 32 768 workgroups of 64: wgpu allows 65 535 workgroups a dimension.
        let groups = n.div_ceil(64);
        pass.dispatch_workgroups(groups.min(32_768), groups.div_ceil(32_768), 1);
    }
    let filled = encoder.finish();

    // SAFETY: the sort's command buffer is submitted below, before the sorter drops; the buffers
    // are this device's and are not destroyed while bound.
    let mut sorter = unsafe { WgpuSorter::new(&device, &WgpuSorterDesc::default())? };
    let binding =
        sorter.bind(&WgpuBindDesc { values: Some(values.slice(..)), ..WgpuBindDesc::new(keys.slice(..), n) })?;
    let sorted = sorter.record::<f32>(&binding, n, Order::Ascending)?;

    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(&keys, 0, &readback, 0, bytes);
    encoder.copy_buffer_to_buffer(&values, 0, &readback, bytes, bytes);
    // In submission order: the fill, the sort (its own command buffer), the copy.
    queue.submit([filled, sorted, encoder.finish()]);

    readback.slice(..).map_async(wgpu::MapMode::Read, |r| r.expect("map the read-back buffer"));
    device.poll(wgpu::PollType::wait_indefinitely())?;
    let view = readback.slice(..).get_mapped_range()?;
    let (k, v) = view.split_at(bytes as usize);
    let (k, v): (&[f32], &[u32]) = (bytemuck::cast_slice(k), bytemuck::cast_slice(v));
    let in_order = k.windows(2).all(|w| w[0] <= w[1]);
    let mut seen = vec![false; n as usize];
    let permutation = v.iter().all(|&i| (i as usize) < seen.len() && !std::mem::replace(&mut seen[i as usize], true));
    println!("sorted {n} f32 keys with their indices: in order {in_order}, values a permutation {permutation}");
    println!("first {:?} ... last {:?}", &k[..3.min(k.len())], &k[k.len().saturating_sub(3)..]);
    if !(in_order && permutation) {
        return Err("the sort's output is wrong".into());
    }
    Ok(())
}
