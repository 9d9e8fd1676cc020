//! What the driver made of each sorting kernel: the statistics a device reports through
//! VK_KHR_pipeline_executable_properties (on NVIDIA: registers per invocation, shared memory,
//! instruction count and the like), for every key width and payload, with the pipelines the
//! sorter would make for a binding of N elements on that device (every build that may loop, and
//! the shaped segment passes of N's segment plan, included).
//!
//!     cargo run --release --features test-hooks --example kernel_stats -- [--n N] [--local-wg N]
//!         [--max-fused F] [--max-tile T] [--local-chunk C]
//!
//! Registers decide occupancy: a workgroup of 1024 invocations at more than 32 registers each
//! leaves room for one workgroup per multiprocessor of 65536 registers, so a local kernel's loads,
//! shared-memory work and stores then run one after the other.

use std::ffi::CStr;

use anyhow::{bail, Context as _, Result};
use ash::vk;
use bitonic_vk::hooks::{each_kernel, Payload, Shape};
use bitonic_vk::{ContextDesc, KernelFamily, KeyWidth, Tuning};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Invocations per workgroup of the local kernels (default: the sorter's).
    #[arg(long)]
    local_wg: Option<u32>,
    /// Substages fused per group (1..=5; default: the sorter's).
    #[arg(long)]
    max_fused: Option<u32>,
    /// Cap of the elements per tile.
    #[arg(long)]
    max_tile: Option<u32>,
    /// Substages per local chunk (1..=5; default: the sorter's).
    #[arg(long)]
    local_chunk: Option<u32>,
    /// The binding's capacity: its tiles, chunks and segment shapes are those of a sort of this
    /// many elements.
    #[arg(long, default_value_t = 1 << 20)]
    n: u32,
    /// The build of the kernels: compact or unrolled (default: the sorter's for the device).
    #[arg(long, value_name = "compact|unrolled")]
    kernels: Option<KernelFamily>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut tuning = Tuning::default();
    tuning.max_tile = args.max_tile;
    tuning.max_fused_substages = args.max_fused;
    tuning.local_workgroup_size = args.local_wg;
    tuning.local_chunk_substages = args.local_chunk;
    tuning.kernels = args.kernels;
    // SAFETY: loads the system's Vulkan loader; `entry` outlives every object made from it.
    let entry = unsafe { ash::Entry::load() }.context("no Vulkan loader")?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
    // SAFETY: `app` outlives the call.
    let instance = unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None) }?;
    let result = run(&instance, tuning, args.n);
    // SAFETY: every child object was destroyed by `run`.
    unsafe { instance.destroy_instance(None) };
    result
}

fn run(instance: &ash::Instance, tuning: Tuning, n: u32) -> Result<()> {
    // The device the sorter would choose, with its limits as the sorter reads them; enumeration
    // order is the same in this instance.
    let list = bitonic_vk::list_devices(&ContextDesc::default())?;
    let info = &list.devices[list.chosen];
    // SAFETY: plain query of a live instance.
    let physicals = unsafe { instance.enumerate_physical_devices() }?;
    let physical = *physicals.get(info.index).context("the device list changed")?;
    // SAFETY: as above.
    let extensions = unsafe { instance.enumerate_device_extension_properties(physical) }?;
    let name = ash::khr::pipeline_executable_properties::NAME;
    if !extensions.iter().any(|e| e.extension_name_as_c_str() == Ok(name)) {
        bail!("{} does not offer {}", info.name, name.to_string_lossy());
    }
    println!("device: {}", info.name);

    let priorities = [1.0];
    let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(0).queue_priorities(&priorities)];
    let mut feature =
        vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default().pipeline_executable_info(true);
    let enabled = [name.as_ptr()];
    let info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&enabled)
        .push_next(&mut feature);
    // SAFETY: the extension was checked above; every pointer in `info` outlives the call.
    let device = unsafe { instance.create_device(physical, &info, None) }?;
    let result = report(instance, physical, &device, tuning, n);
    // SAFETY: `report` destroyed what it created; nothing runs on the device.
    unsafe { device.destroy_device(None) };
    result
}

fn report(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    device: &ash::Device,
    tuning: Tuning,
    n: u32,
) -> Result<()> {
    let stats = ash::khr::pipeline_executable_properties::Device::new(instance, device);
    let mut result = Ok(());
    for width in [KeyWidth::Bits32, KeyWidth::Bits64] {
        for pairs in [false, true] {
            let flags = vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR;
            // SAFETY: `physical` belongs to `instance` and `device` was made from it with the
            // pipeline executable properties feature on, which CAPTURE_STATISTICS needs.
            let made = unsafe {
                each_kernel(instance, physical, device, tuning, n, pairs, width, flags, |label, shape, pipeline| {
                    if result.is_ok() {
                        result = print_kernel(&stats, pipeline, label, shape, width);
                    }
                })
            };
            made?;
            result.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    result
}

fn print_kernel(
    stats: &ash::khr::pipeline_executable_properties::Device,
    pipeline: vk::Pipeline,
    label: &str,
    shape: &Shape,
    width: KeyWidth,
) -> Result<()> {
    // SAFETY: `pipeline` was created with CAPTURE_STATISTICS on a device with the feature on.
    let executables =
        unsafe { stats.get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline)) };
    let mut line = format!(
        "{:>3}-byte {:<7} {:<44} wg {:>4} tile {:>5} chunk {}:",
        width.bytes(),
        match shape.payload {
            Payload::Keys => "keys",
            Payload::Pairs => "pairs",
            Payload::PairsOrigins => "origins",
        },
        label,
        shape.local_wg,
        shape.tile,
        shape.chunk
    );
    for index in 0..executables.as_ref().map_or(0, |e| e.len() as u32) {
        let info = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(index);
        // SAFETY: as above; `index` is below the executable count.
        for s in unsafe { stats.get_pipeline_executable_statistics(&info) }? {
            let name = s.name_as_c_str().unwrap_or(c"?");
            // SAFETY: the union member read is the one `format` names.
            let value = unsafe {
                match s.format {
                    vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
                    vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                    vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                    _ => s.value.f64.to_string(),
                }
            };
            line.push_str(&format!(" {}={}", short(name), value));
        }
    }
    println!("{line}");
    executables?;
    Ok(())
}

fn short(name: &CStr) -> String {
    name.to_string_lossy().replace(' ', "_")
}
