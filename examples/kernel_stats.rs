//! What the driver made of each sorting kernel: the statistics a device reports through
//! VK_KHR_pipeline_executable_properties (on NVIDIA: registers per invocation, shared memory,
//! instruction count and the like), for every key width and payload, with the specialization
//! constants the sorter would use on that device.
//!
//!     cargo run --release --example kernel_stats -- [--local-wg N] [--max-fused F] [--max-tile T]
//!         [--local-chunk C] [--shaped-n N]
//!
//! With `--shaped-n`, the SHAPED segment_merge of every segment pass of a sort of N elements in
//! the tiles of these options (`Plan::segmented`) is listed too, one row per shape: the module
//! built for the shape's chain of chunks where there is one (build.rs `SHAPED_CHAIN_BUILDS`), as the
//! sorter takes it; every kernel then takes the local chunk the sorter gives a sort of N elements
//! (3 for small sorts and for 4-byte keys alone in segment tiles of 2048), unless `--local-chunk`
//! says otherwise.
//!
//! Registers decide occupancy: a workgroup of 1024 invocations at more than 32 registers each
//! leaves room for one workgroup per streaming multiprocessor on the H100 (65536 registers), so a
//! local kernel's loads, shared-memory work and stores run one after the other there.

use std::ffi::CStr;

use anyhow::{bail, Context as _, Result};
use ash::vk;
use bitonic_vk::context::DeviceLimits;
use bitonic_vk::pipelines::{geometry_for, local_chunk, shape_chain, shaped_constants, KernelOptions};
use bitonic_vk::plan::{PassKind, Plan};
use bitonic_vk::push::PushConstants;
use bitonic_vk::shaders::{spirv, spirv_persistent, spirv_shaped, spirv_shaped_chain, Payload, Variant};
use bitonic_vk::sorter::sized_chunk_for;
use bitonic_vk::ContextDesc;
use bitonic_vk::KeyWidth;
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
    /// List the SHAPED segment_merge of each segment pass of a sort of this many elements; every
    /// kernel then takes the local chunk the sorter gives such a sort (`sorter::sized_chunk_for`,
    /// with this tile as its segment tile) unless --local-chunk is given.
    #[arg(long)]
    shaped_n: Option<u32>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let options = KernelOptions {
        max_tile: args.max_tile,
        max_fused: args.max_fused,
        local_workgroup_size: args.local_wg,
        local_chunk: args.local_chunk,
    };
    // SAFETY: loads the system's Vulkan loader; `entry` outlives every object made from it.
    let entry = unsafe { ash::Entry::load() }.context("no Vulkan loader")?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
    // SAFETY: `app` outlives the call.
    let instance = unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None) }?;
    let result = run(&instance, options, args.shaped_n);
    // SAFETY: every child object was destroyed by `run`.
    unsafe { instance.destroy_instance(None) };
    result
}

fn run(instance: &ash::Instance, options: KernelOptions, shaped_n: Option<u32>) -> Result<()> {
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
    let limits = info.limits;
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
    let result = report(instance, &device, &limits, options, shaped_n);
    // SAFETY: `report` destroyed what it created; nothing runs on the device.
    unsafe { device.destroy_device(None) };
    result
}

fn report(
    instance: &ash::Instance,
    device: &ash::Device,
    limits: &DeviceLimits,
    options: KernelOptions,
    shaped_n: Option<u32>,
) -> Result<()> {
    let stats = ash::khr::pipeline_executable_properties::Device::new(instance, device);
    let bindings = [0, 1, 2].map(|b| {
        vk::DescriptorSetLayoutBinding::default()
            .binding(b)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
    });
    // SAFETY: `device` is live and the info is complete.
    let set_layout = unsafe {
        device.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
    }?;
    let ranges = [vk::PushConstantRange {
        stage_flags: vk::ShaderStageFlags::COMPUTE,
        offset: 0,
        size: std::mem::size_of::<PushConstants>() as u32,
    }];
    let set_layouts = [set_layout];
    let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&ranges);
    // SAFETY: as above.
    let layout = unsafe { device.create_pipeline_layout(&info, None) }?;
    let mut result = Ok(());
    'builds: for width in [KeyWidth::Bits32, KeyWidth::Bits64] {
        for payload in [Payload::Keys, Payload::Pairs] {
            let (geometry, local_wg) = geometry_for(limits, payload, width, options)?;
            let sized = shaped_n
                .map(|n| n as usize)
                .and_then(|n| sized_chunk_for(n, payload, width, Some(geometry.tile()), options.max_fused));
            let chunk = local_chunk(payload, width, &geometry, options.local_chunk.or(sized));
            let local = vec![local_wg, geometry.tile(), chunk, 0];
            let merge = spirv(PassKind::LocalMerge, payload, width, Variant::Lean);
            let mut kernels = vec![
                (spirv(PassKind::TileSort, payload, width, Variant::Lean), local.clone(), "tile_sort".to_string()),
                (merge, local.clone(), "local_merge".to_string()),
                (merge, vec![local_wg, geometry.tile(), chunk, 1], "local_merge window".to_string()),
                (merge, vec![local_wg, geometry.tile(), chunk, 2], "local_merge window 4".to_string()),
                (
                    spirv(PassKind::SegmentMerge, payload, width, Variant::Lean),
                    local.clone(),
                    "segment_merge".to_string(),
                ),
            ];
            for kind in [PassKind::TileSort, PassKind::SegmentMerge] {
                if let Some(code) = spirv_persistent(kind, payload, width, Variant::Lean) {
                    kernels.push((code, local.clone(), format!("{} persistent", kind.name())));
                }
            }
            let shaped = spirv_shaped(PassKind::SegmentMerge, payload, width, Variant::Lean);
            if let (Some(n), Some(code)) = (shaped_n, shaped) {
                for pass in Plan::segmented(n, geometry, 0)?.passes.iter().filter(|p| p.kind == PassKind::SegmentMerge)
                {
                    let (dir, log_block) = (pass.push.dir, pass.push.log_block);
                    if let Some(constants) = shaped_constants([local_wg, geometry.tile(), chunk], dir, log_block) {
                        // The module of the shape's chain where there is one, as Kernels::make_shaped takes it.
                        let chain = shape_chain(chunk, dir, log_block);
                        let label = format!("segment shaped {dir} {log_block:#x}");
                        match spirv_shaped_chain(PassKind::SegmentMerge, payload, width, Variant::Lean, &chain) {
                            Some(module) => kernels.push((module, constants, format!("{label} chain {chain:?}"))),
                            None => kernels.push((code, constants, label)),
                        }
                    }
                }
            }
            for m in 1..=geometry.fused {
                kernels.push((
                    spirv(PassKind::GlobalMerge, payload, width, Variant::Lean),
                    vec![geometry.global_wg, geometry.tile(), m, 0],
                    format!("global_merge fused {m}"),
                ));
            }
            for (code, constants, label) in kernels {
                if let Err(e) = print_kernel(device, &stats, layout, code, &constants, &label, width, payload) {
                    result = Err(e);
                    break 'builds;
                }
            }
        }
    }
    // SAFETY: no pipeline made with them is alive.
    unsafe {
        device.destroy_pipeline_layout(layout, None);
        device.destroy_descriptor_set_layout(set_layout, None);
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn print_kernel(
    device: &ash::Device,
    stats: &ash::khr::pipeline_executable_properties::Device,
    layout: vk::PipelineLayout,
    code: &[u32],
    constants: &[u32],
    label: &str,
    width: KeyWidth,
    payload: Payload,
) -> Result<()> {
    // SAFETY: `code` is the crate's SPIR-V.
    let module = unsafe { device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(code), None) }?;
    let entries: Vec<vk::SpecializationMapEntry> = (0..constants.len() as u32)
        .map(|id| vk::SpecializationMapEntry { constant_id: id, offset: id * 4, size: 4 })
        .collect();
    let specialization = vk::SpecializationInfo::default().map_entries(&entries).data(bytemuck::cast_slice(constants));
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(c"main")
        .specialization_info(&specialization);
    let info = [vk::ComputePipelineCreateInfo::default()
        .stage(stage)
        .layout(layout)
        .flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR)];
    // SAFETY: live module and layout; the specialization data matches its map.
    let created = unsafe { device.create_compute_pipelines(vk::PipelineCache::null(), &info, None) };
    // SAFETY: a pipeline does not refer to its module after creation.
    unsafe { device.destroy_shader_module(module, None) };
    let pipeline = created.map_err(|(_, e)| e)?[0];
    // SAFETY: `pipeline` was created with CAPTURE_STATISTICS on a device with the feature on.
    let executables =
        unsafe { stats.get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline)) };
    let mut line = format!(
        "{:>3}-byte {:<5} {:<30} wg {:>4} tile {:>5} fused {}:",
        width.bytes(),
        match payload {
            Payload::Keys => "keys",
            Payload::Pairs => "pairs",
            Payload::PairsOrigins => "origins",
        },
        label,
        constants[0],
        constants[1],
        constants[2]
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
    // SAFETY: never used by a command buffer.
    unsafe { device.destroy_pipeline(pipeline, None) };
    executables?;
    Ok(())
}

fn short(name: &CStr) -> String {
    name.to_string_lossy().replace(' ', "_")
}
