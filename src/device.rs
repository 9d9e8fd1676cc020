//! What a Vulkan device is and offers, as the sort needs it: its kind, its limits and features,
//! read from a physical device once.

use std::fmt;

use ash::vk;

use crate::error::{Error, Result};
use crate::pipeline_cache::CacheId;

/// The Vulkan version the sort needs.
pub const API_VERSION: u32 = vk::API_VERSION_1_1;

/// The kind of a device, as Vulkan reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceType {
    /// A GPU on its own board.
    DiscreteGpu,
    /// A GPU sharing the host's memory.
    IntegratedGpu,
    /// A GPU in a virtual machine.
    VirtualGpu,
    /// Vulkan implemented on the CPU (lavapipe, SwiftShader).
    Cpu,
    /// Anything else.
    Other,
}

impl DeviceType {
    fn from_vk(t: vk::PhysicalDeviceType) -> DeviceType {
        match t {
            vk::PhysicalDeviceType::DISCRETE_GPU => DeviceType::DiscreteGpu,
            vk::PhysicalDeviceType::INTEGRATED_GPU => DeviceType::IntegratedGpu,
            vk::PhysicalDeviceType::VIRTUAL_GPU => DeviceType::VirtualGpu,
            vk::PhysicalDeviceType::CPU => DeviceType::Cpu,
            _ => DeviceType::Other,
        }
    }

    /// Rank in the default choice: lower is preferred.
    pub(crate) fn rank(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceType::DiscreteGpu => "discrete GPU",
            DeviceType::IntegratedGpu => "integrated GPU",
            DeviceType::VirtualGpu => "virtual GPU",
            DeviceType::Cpu => "CPU",
            DeviceType::Other => "other",
        })
    }
}

/// The limits of a device that matter to the sort.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceLimits {
    /// maxComputeSharedMemorySize, bytes: sizes the tile.
    pub max_compute_shared_memory_size: u32,
    /// `maxComputeWorkGroupCount[0]`: the most workgroups in one dispatch.
    pub max_compute_work_group_count_x: u32,
    /// `maxComputeWorkGroupCount[1]`: the most arrays one batched sort takes.
    pub max_compute_work_group_count_y: u32,
    /// maxComputeWorkGroupInvocations.
    pub max_compute_work_group_invocations: u32,
    /// `maxComputeWorkGroupSize[0]`.
    pub max_compute_work_group_size_x: u32,
    /// maxStorageBufferRange, bytes: the largest keys or values buffer.
    pub max_storage_buffer_range: u32,
    /// maxMemoryAllocationSize, bytes.
    pub max_memory_allocation_size: u64,
    /// The subgroup size.
    pub subgroup_size: u32,
    /// Whether compute shaders have the basic and shuffle subgroup operations (Vulkan 1.1's
    /// `VkPhysicalDeviceSubgroupProperties`): the tile sort of one small tile uses them.
    pub subgroup_shuffle: bool,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    /// Valid bits of timestamps on the compute queue family; 0 = no timestamps.
    pub timestamp_valid_bits: u32,
    /// minStorageBufferOffsetAlignment: where a bound buffer region may start.
    pub min_storage_buffer_offset_alignment: u64,
    /// Streaming multiprocessors, where the device reports them (`VK_NV_shader_sm_builtins`'
    /// shaderSMCount); 0 where it does not. Sizes the looping local merges.
    pub multiprocessors: u32,
}

#[cfg(test)]
impl DeviceLimits {
    /// Limits for the CPU tests: `shared_memory` bytes, `multiprocessors`, 1 024 invocations and
    /// 65 535 workgroups, shuffles and timestamps.
    pub(crate) fn for_tests(shared_memory: u32, multiprocessors: u32) -> DeviceLimits {
        DeviceLimits {
            max_compute_shared_memory_size: shared_memory,
            max_compute_work_group_count_x: 65_535,
            max_compute_work_group_count_y: 65_535,
            max_compute_work_group_invocations: 1024,
            max_compute_work_group_size_x: 1024,
            max_storage_buffer_range: 1 << 30,
            max_memory_allocation_size: 1 << 31,
            subgroup_size: 32,
            subgroup_shuffle: true,
            timestamp_period: 1.0,
            timestamp_valid_bits: 64,
            min_storage_buffer_offset_alignment: 16,
            multiprocessors,
        }
    }
}

/// A class of device whose limits a sort may be planned for on any device with larger ones: a
/// smaller limit than the device reports is always legal to plan for, so a test on lavapipe can
/// stand for a small GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
pub enum DeviceProfile {
    /// The Vulkan spec's minimums: 16 KiB of shared memory, 128 invocations (a workgroup of at
    /// most 128 x 128 x 64), 65 535 workgroups, 128 MiB storage ranges, no subgroup shuffles, no
    /// 16-bit integers, no timestamps.
    Minimum,
    /// A mobile GPU: 32 KiB, 256 invocations, 65 535 workgroups, no 16-bit integers.
    Mobile,
    /// Apple through MoltenVK: 32 KiB, 1 024 invocations, shuffles, 256 MiB storage ranges.
    Apple,
}

#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
impl DeviceProfile {
    /// Every profile.
    pub const ALL: [DeviceProfile; 3] = [DeviceProfile::Minimum, DeviceProfile::Mobile, DeviceProfile::Apple];

    /// Lowers `info`'s limits and features to this profile's where the device's are larger.
    pub(crate) fn apply(self, info: &mut DeviceInfo) {
        let (shared, invocations, storage, shuffle, int16, timestamps) = match self {
            DeviceProfile::Minimum => (16 << 10, 128, 128 << 20, false, false, false),
            DeviceProfile::Mobile => (32 << 10, 256, 128 << 20, true, false, true),
            DeviceProfile::Apple => (32 << 10, 1024, 256 << 20, true, true, true),
        };
        let l = &mut info.limits;
        l.max_compute_shared_memory_size = l.max_compute_shared_memory_size.min(shared);
        l.max_compute_work_group_invocations = l.max_compute_work_group_invocations.min(invocations);
        l.max_compute_work_group_size_x = l.max_compute_work_group_size_x.min(invocations);
        l.max_compute_work_group_count_x = l.max_compute_work_group_count_x.min(65_535);
        l.max_compute_work_group_count_y = l.max_compute_work_group_count_y.min(65_535);
        l.max_storage_buffer_range = l.max_storage_buffer_range.min(storage);
        l.subgroup_shuffle &= shuffle;
        if !timestamps {
            l.timestamp_valid_bits = 0;
        }
        info.shader_int16 &= int16;
    }
}

/// A Vulkan device as the loader reports it.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// Index in enumeration order (what [`crate::DeviceSelector::Index`] takes).
    pub index: usize,
    /// The device's name.
    pub name: String,
    /// Its kind.
    pub device_type: DeviceType,
    /// Vulkan version it supports, `major.minor.patch`.
    pub api_version: String,
    /// The driver's name and version where the device reports them.
    pub driver: String,
    /// The first queue family with compute (preferring one with timestamps), if any.
    pub compute_queue_family: Option<u32>,
    /// Its limits.
    pub limits: DeviceLimits,
    /// Whether it offers `VK_KHR_synchronization2` (the `barrier2` flavour of `passes`).
    pub synchronization2: bool,
    /// The size of its largest device-local memory heap, in bytes.
    pub device_local_memory: u64,
    /// Whether it offers the `shaderInt16` feature (16-bit integers in shaders, shared memory
    /// included), which [`crate::Context::new`] then enables: the tiles of u32 pairs with 16-bit origins
    /// ([`crate::Tuning::tile_origins`]) need it.
    pub shader_int16: bool,
    /// Whether it offers `VK_EXT_subgroup_size_control` with its `computeFullSubgroups` feature,
    /// which [`crate::Context::new`] then enables: the tile sort's subgroup form asks for full
    /// subgroups with it (`RecorderDesc::full_subgroups`).
    ///
    /// [`RecorderDesc::full_subgroups`]: crate::RecorderDesc::full_subgroups
    pub full_subgroups: bool,
    /// The widest subgroup it may run (`maxSubgroupSize`), where it offers
    /// `VK_EXT_subgroup_size_control`; else its one subgroup size.
    pub max_subgroup_size: u32,
    pub(crate) raw_api_version: u32,
    /// Whether it is a portability implementation (`VK_KHR_portability_subset`, MoltenVK), whose
    /// subset extension a device must then enable.
    pub(crate) portability_subset: bool,
    /// What its pipeline cache data starts with.
    pub(crate) cache_id: CacheId,
    /// Its memory types and heaps.
    pub(crate) memory: vk::PhysicalDeviceMemoryProperties,
}

impl DeviceInfo {
    /// Whether the sort can run on it: a compute queue and Vulkan 1.1.
    pub fn usable(&self) -> bool {
        self.check_usable().is_ok()
    }

    /// [`DeviceInfo::usable`], as an error naming what the device lacks.
    pub(crate) fn check_usable(&self) -> Result<()> {
        // The kernels are SPIR-V 1.3 with subgroup operations: Vulkan 1.1.
        if self.raw_api_version < API_VERSION {
            return Err(Error::Unsupported {
                what: "run the sort's kernels: it offers Vulkan 1.0 only",
                fix: "use a device and driver of Vulkan 1.1 or later (`bitonic-vk devices` lists each one's version)",
            });
        }
        if self.compute_queue_family.is_none() {
            return Err(Error::Unsupported {
                what: "run compute work: it has no queue family with compute",
                fix: "use a device with a compute queue (`bitonic-vk devices` lists them)",
            });
        }
        Ok(())
    }
}

/// What a physical device is and offers.
///
/// # Safety
/// `pd` must be a physical device of the live `instance`.
pub unsafe fn describe(instance: &ash::Instance, index: usize, pd: vk::PhysicalDevice) -> DeviceInfo {
    // SAFETY: the caller passes a physical device of this live instance.
    let props = unsafe { instance.get_physical_device_properties(pd) };
    let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
    let mut maintenance3 = vk::PhysicalDeviceMaintenance3Properties::default();
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut sm_builtins = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
    let mut size_control = vk::PhysicalDeviceSubgroupSizeControlPropertiesEXT::default();
    let mut size_control_features = vk::PhysicalDeviceSubgroupSizeControlFeaturesEXT::default();
    // SAFETY: `pd` was enumerated from this live instance.
    let extensions = unsafe { instance.enumerate_device_extension_properties(pd) }.unwrap_or_default();
    let has = |name: &std::ffi::CStr| extensions.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name));
    let (mut subgroup_size, mut max_alloc, mut driver_name) = (0, 1u64 << 30, String::new());
    let mut subgroup_shuffle = false;
    let size_controlled = props.api_version >= vk::API_VERSION_1_1 && has(ash::ext::subgroup_size_control::NAME);
    if props.api_version >= vk::API_VERSION_1_1 {
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup).push_next(&mut maintenance3);
        if props.api_version >= vk::API_VERSION_1_2 {
            props2 = props2.push_next(&mut driver);
        }
        if has(ash::nv::shader_sm_builtins::NAME) {
            props2 = props2.push_next(&mut sm_builtins);
        }
        if size_controlled {
            props2 = props2.push_next(&mut size_control);
        }
        // SAFETY: the device supports Vulkan 1.1, where vkGetPhysicalDeviceProperties2 and both
        // chained structures are core (driver properties: 1.2, chained only then); the SM
        // builtins' and the subgroup size control's structures are chained only where the device
        // offers their extensions.
        unsafe { instance.get_physical_device_properties2(pd, &mut props2) };
        if size_controlled {
            let mut features2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut size_control_features);
            // SAFETY: Vulkan 1.1, where vkGetPhysicalDeviceFeatures2 is core; the chained
            // structure is the device's extension's.
            unsafe { instance.get_physical_device_features2(pd, &mut features2) };
        }
        subgroup_size = subgroup.subgroup_size;
        subgroup_shuffle = subgroup.supported_stages.contains(vk::ShaderStageFlags::COMPUTE)
            && subgroup
                .supported_operations
                .contains(vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::SHUFFLE);
        max_alloc = maintenance3.max_memory_allocation_size;
        if props.api_version >= vk::API_VERSION_1_2 {
            driver_name = format!(
                "{} {}",
                driver.driver_name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default(),
                driver.driver_info_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
            );
        }
    }
    // SAFETY: as above.
    let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
    let compute: Vec<(u32, u32)> = families
        .iter()
        .enumerate()
        .filter(|(_, f)| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0)
        .map(|(i, f)| (i as u32, f.timestamp_valid_bits))
        .collect();
    let family = compute.iter().find(|(_, bits)| *bits > 0).or(compute.first()).copied();
    let synchronization2 = has(ash::khr::synchronization2::NAME);
    // SAFETY: as above.
    let features = unsafe { instance.get_physical_device_features(pd) };
    // SAFETY: as above.
    let memory = unsafe { instance.get_physical_device_memory_properties(pd) };
    let device_local_memory = memory
        .memory_heaps_as_slice()
        .iter()
        .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|h| h.size)
        .max()
        .unwrap_or(0);
    let l = &props.limits;
    let v = props.api_version;
    DeviceInfo {
        index,
        name: props.device_name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default(),
        device_type: DeviceType::from_vk(props.device_type),
        api_version: format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v)),
        driver: driver_name.trim().to_owned(),
        compute_queue_family: family.map(|(i, _)| i),
        limits: DeviceLimits {
            max_compute_shared_memory_size: l.max_compute_shared_memory_size,
            max_compute_work_group_count_x: l.max_compute_work_group_count[0],
            max_compute_work_group_count_y: l.max_compute_work_group_count[1],
            max_compute_work_group_invocations: l.max_compute_work_group_invocations,
            max_compute_work_group_size_x: l.max_compute_work_group_size[0],
            max_storage_buffer_range: l.max_storage_buffer_range,
            max_memory_allocation_size: max_alloc,
            subgroup_size,
            subgroup_shuffle,
            timestamp_period: l.timestamp_period,
            timestamp_valid_bits: family.map_or(0, |(_, bits)| bits),
            min_storage_buffer_offset_alignment: l.min_storage_buffer_offset_alignment,
            multiprocessors: sm_builtins.shader_sm_count,
        },
        synchronization2,
        device_local_memory,
        shader_int16: features.shader_int16 == vk::TRUE,
        full_subgroups: size_controlled && size_control_features.compute_full_subgroups == vk::TRUE,
        max_subgroup_size: if size_controlled {
            size_control.max_subgroup_size.max(subgroup_size)
        } else {
            subgroup_size
        },
        raw_api_version: v,
        portability_subset: has(c"VK_KHR_portability_subset"),
        cache_id: CacheId {
            vendor_id: props.vendor_id,
            device_id: props.device_id,
            driver_version: props.driver_version,
            uuid: props.pipeline_cache_uuid,
        },
        memory,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(api_version: u32, compute_queue_family: Option<u32>) -> DeviceInfo {
        DeviceInfo {
            index: 0,
            name: "test".into(),
            device_type: DeviceType::Cpu,
            api_version: String::new(),
            driver: String::new(),
            compute_queue_family,
            limits: DeviceLimits {
                max_compute_shared_memory_size: 16384,
                max_compute_work_group_count_x: 65535,
                max_compute_work_group_count_y: 65535,
                max_compute_work_group_invocations: 128,
                max_compute_work_group_size_x: 128,
                max_storage_buffer_range: 1 << 27,
                max_memory_allocation_size: 1 << 30,
                subgroup_size: 0,
                subgroup_shuffle: false,
                timestamp_period: 1.0,
                timestamp_valid_bits: 0,
                min_storage_buffer_offset_alignment: 256,
                multiprocessors: 0,
            },
            synchronization2: false,
            device_local_memory: 0,
            shader_int16: false,
            full_subgroups: false,
            max_subgroup_size: 0,
            raw_api_version: api_version,
            portability_subset: false,
            cache_id: CacheId { vendor_id: 0, device_id: 0, driver_version: 0, uuid: [0; 16] },
            memory: vk::PhysicalDeviceMemoryProperties::default(),
        }
    }

    #[test]
    fn a_vulkan_1_0_device_or_one_without_compute_is_refused_by_name() {
        assert!(info(vk::API_VERSION_1_1, Some(0)).check_usable().is_ok());
        assert!(info(vk::API_VERSION_1_3, Some(2)).usable());
        let old = info(vk::API_VERSION_1_0, Some(0)).check_usable().expect_err("1.0 is refused").to_string();
        assert!(old.contains("Vulkan 1.0") && old.contains("1.1 or later"), "{old}");
        let no_compute = info(vk::API_VERSION_1_2, None).check_usable().expect_err("no compute is refused").to_string();
        assert!(no_compute.contains("compute"), "{no_compute}");
        assert!(!info(vk::API_VERSION_1_0, Some(0)).usable());
    }
}
