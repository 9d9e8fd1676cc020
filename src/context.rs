//! The standalone context: loads Vulkan, chooses a device, creates a compute queue and a memory
//! allocator, and optionally the Khronos validation layer with synchronization validation.

use std::ffi::{c_void, CStr};
use std::fmt;
use std::mem::ManuallyDrop;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};

use crate::device::{describe, DeviceInfo, API_VERSION};
use crate::error::{Error, Result};
use crate::pipeline_cache::{DiskCache, PipelineCacheDir};

/// Environment variable choosing the device: an index from `bitonic-vk devices`, or a part of a
/// device's name.
pub const DEVICE_ENV: &str = "BITONIC_VK_DEVICE";
/// Environment variable that turns on validation when set to `1` (or `true`).
pub const VALIDATION_ENV: &str = "BITONIC_VK_VALIDATION";

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Which device to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSelector {
    /// The device at this index in `bitonic-vk devices`.
    Index(usize),
    /// The first device whose name contains this text (case-insensitive).
    Name(String),
}

impl FromStr for DeviceSelector {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().parse() {
            Ok(index) => DeviceSelector::Index(index),
            Err(_) => DeviceSelector::Name(s.trim().to_owned()),
        })
    }
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelector::Index(i) => write!(f, "{i}"),
            DeviceSelector::Name(name) => f.write_str(name),
        }
    }
}

/// How to create a [`Context`].
#[derive(Clone, Debug, Default)]
pub struct ContextDesc {
    /// The device to use; `None` reads [`DEVICE_ENV`], and without it prefers a discrete GPU, then
    /// an integrated one, then a virtual one, then a CPU implementation.
    pub device: Option<DeviceSelector>,
    /// Turns the Khronos validation layer (with synchronization validation) on or off; `None`
    /// reads [`VALIDATION_ENV`].
    pub validation: Option<bool>,
    /// Where the pipeline cache is kept between runs ([`PipelineCacheDir::Off`]: nowhere).
    pub pipeline_cache: PipelineCacheDir,
}

impl ContextDesc {
    fn validation(&self) -> bool {
        self.validation.unwrap_or_else(|| {
            std::env::var(VALIDATION_ENV).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"))
        })
    }

    fn selector(&self) -> Option<(DeviceSelector, &'static str)> {
        match &self.device {
            Some(s) => Some((s.clone(), "the device option")),
            None => std::env::var(DEVICE_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| (v.parse().unwrap_or(DeviceSelector::Name(v)), DEVICE_ENV)),
        }
    }
}

/// Every device the loader reports, and the one [`Context::new`] would choose.
#[derive(Clone, Debug)]
pub struct DeviceList {
    /// All devices, in enumeration order.
    pub devices: Vec<DeviceInfo>,
    /// Index of the chosen one.
    pub chosen: usize,
}

/// Lists every device and the one the description chooses, without creating a device.
pub fn list_devices(desc: &ContextDesc) -> Result<DeviceList> {
    let instance = InstanceGuard::new(false)?;
    let devices = instance.devices()?;
    let chosen = choose(&devices, desc)?;
    Ok(DeviceList { devices: devices.into_iter().map(|(_, info)| info).collect(), chosen })
}

/// Messages of the validation layer.
#[derive(Default)]
struct ValidationLog {
    errors: Mutex<Vec<String>>,
}

/// The debug messenger's callback: prints warnings and errors, and keeps the errors.
unsafe extern "system" fn on_validation_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data for the duration of the call; its message is
    // a NUL-terminated string when non-null.
    let message = unsafe { data.as_ref() }
        .filter(|d| !d.p_message.is_null())
        // SAFETY: checked non-null just above; the layer keeps it alive for the call.
        .map(|d| unsafe { CStr::from_ptr(d.p_message) }.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprintln!("[validation {severity:?}] {message}");
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        // SAFETY: `user` is the address of the ValidationLog boxed in InstanceGuard, which
        // outlives the messenger (the messenger is destroyed first).
        let log = unsafe { &*(user as *const ValidationLog) };
        if let Ok(mut errors) = log.errors.lock() {
            errors.push(message);
        }
    }
    vk::FALSE
}

struct Messenger {
    loader: ash::ext::debug_utils::Instance,
    raw: vk::DebugUtilsMessengerEXT,
    log: Box<ValidationLog>,
}

/// An instance, and its debug messenger when validating; destroys both.
struct InstanceGuard {
    _entry: ash::Entry,
    raw: ash::Instance,
    messenger: Option<Messenger>,
}

impl InstanceGuard {
    fn new(validation: bool) -> Result<InstanceGuard> {
        // SAFETY: loading the system's Vulkan loader runs its initialisers; the library stays
        // loaded as long as the Entry (kept in the guard, dropped after the instance).
        let entry = unsafe { ash::Entry::load() }.map_err(|e| Error::LoaderMissing(e.to_string()))?;
        if validation {
            // SAFETY: plain query of the loader.
            let layers = unsafe { entry.enumerate_instance_layer_properties() }
                .map_err(Error::vk("vkEnumerateInstanceLayerProperties"))?;
            if !layers.iter().any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == VALIDATION_LAYER)) {
                return Err(Error::ValidationLayerMissing);
            }
        }
        let app = vk::ApplicationInfo::default()
            .application_name(c"bitonic-vk")
            .engine_name(c"bitonic-vk")
            .api_version(API_VERSION);
        let layers = [VALIDATION_LAYER.as_ptr()];
        // SAFETY: plain query of the loader.
        let offered = unsafe { entry.enumerate_instance_extension_properties(None) }.unwrap_or_default();
        let offers = |name: &CStr| offered.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name));
        // Portability drivers (MoltenVK) are listed only to an instance that asks for them.
        let portability = offers(ash::khr::portability_enumeration::NAME);
        let mut extensions = Vec::new();
        if validation {
            extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        if portability {
            extensions.push(ash::khr::portability_enumeration::NAME.as_ptr());
        }
        let enabled = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enabled);
        let log = Box::new(ValidationLog::default());
        // One description for the messenger chained to instance creation (messages of
        // vkCreateInstance/vkDestroyInstance) and a copy, unchained, for the lasting one.
        let messenger_info = || {
            vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                )
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                        | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                        | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                )
                .pfn_user_callback(Some(on_validation_message))
                .user_data(&*log as *const ValidationLog as *mut c_void)
        };
        let mut chained_messenger = messenger_info();
        let mut info = vk::InstanceCreateInfo::default().application_info(&app).enabled_extension_names(&extensions);
        if portability {
            info = info.flags(vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR);
        }
        if validation {
            info = info.enabled_layer_names(&layers).push_next(&mut features).push_next(&mut chained_messenger);
        }
        // SAFETY: every pointer in `info` refers to locals that outlive the call; the layer and
        // extensions were checked above (debug_utils ships with the validation layer).
        let raw = unsafe { entry.create_instance(&info, None) }.map_err(|e| match e {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => Error::NoDevice,
            e => Error::vk("vkCreateInstance")(e),
        })?;
        let mut guard = InstanceGuard { _entry: entry, raw, messenger: None };
        if validation {
            let loader = ash::ext::debug_utils::Instance::new(&guard._entry, &guard.raw);
            // SAFETY: the instance was created with VK_EXT_debug_utils; the callback's user data is
            // the boxed log, moved into the guard with the messenger and freed after it.
            let raw = unsafe { loader.create_debug_utils_messenger(&messenger_info(), None) }
                .map_err(Error::vk("vkCreateDebugUtilsMessengerEXT"))?;
            guard.messenger = Some(Messenger { loader, raw, log });
        }
        Ok(guard)
    }

    fn devices(&self) -> Result<Vec<(vk::PhysicalDevice, DeviceInfo)>> {
        // SAFETY: the instance is live.
        let physical =
            unsafe { self.raw.enumerate_physical_devices() }.map_err(Error::vk("vkEnumeratePhysicalDevices"))?;
        // SAFETY: each device was just enumerated from this live instance.
        Ok(physical
            .into_iter()
            .enumerate()
            .map(|(index, pd)| (pd, unsafe { describe(&self.raw, index, pd) }))
            .collect())
    }
}

impl Drop for InstanceGuard {
    fn drop(&mut self) {
        if let Some(m) = &self.messenger {
            // SAFETY: created from this instance; destroyed before it, after every device.
            unsafe { m.loader.destroy_debug_utils_messenger(m.raw, None) };
        }
        // SAFETY: every child object (devices, messenger) is destroyed before this guard drops.
        unsafe { self.raw.destroy_instance(None) };
        // The validation log drops with the fields, after the instance: the layer may report
        // messages from vkDestroyInstance through the messenger chained at creation.
    }
}

/// Index in `devices` of the device `desc` chooses.
fn choose(devices: &[(vk::PhysicalDevice, DeviceInfo)], desc: &ContextDesc) -> Result<usize> {
    let usable: Vec<&DeviceInfo> = devices.iter().map(|(_, d)| d).filter(|d| d.usable()).collect();
    match desc.selector() {
        Some((selector, origin)) => {
            let found = match &selector {
                DeviceSelector::Index(i) => usable.iter().find(|d| d.index == *i),
                DeviceSelector::Name(name) => {
                    let name = name.to_lowercase();
                    usable.iter().find(|d| d.name.to_lowercase().contains(&name))
                }
            };
            found.map(|d| d.index).ok_or_else(|| Error::NoSuchDevice {
                selector: selector.to_string(),
                origin,
                available: if usable.is_empty() {
                    "none".to_owned()
                } else {
                    usable.iter().map(|d| format!("{}: {}", d.index, d.name)).collect::<Vec<_>>().join(", ")
                },
            })
        }
        None => usable.iter().min_by_key(|d| (d.device_type.rank(), d.index)).map(|d| d.index).ok_or(Error::NoDevice),
    }
}

/// What the context's clones share; destroyed when the last clone (context or sorter) drops.
pub(crate) struct Shared {
    pub device: ash::Device,
    /// `VK_KHR_synchronization2`'s commands, where the device has the extension (the study's
    /// `barrier2` flavour).
    #[cfg_attr(not(feature = "study"), allow(dead_code))]
    pub sync2: Option<ash::khr::synchronization2::Device>,
    pub info: DeviceInfo,
    pub queue_family: u32,
    queue: Mutex<vk::Queue>,
    allocator: ManuallyDrop<Mutex<Allocator>>,
    /// One pipeline cache for every sorter of the context: a sorter made with the same options
    /// as an earlier one (tests and `bench` make many) finds its pipelines compiled.
    pub pipeline_cache: DiskCache,
    instance: InstanceGuard,
    /// Set once any call reports VK_ERROR_DEVICE_LOST: every later sort fails at once with
    /// `DeviceLost` instead of reaching the driver again.
    lost: AtomicBool,
}

impl Shared {
    /// Whether the device was lost.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Passes `e` on, remembering a lost device.
    pub fn note(&self, e: Error) -> Error {
        if matches!(e, Error::DeviceLost { .. }) {
            self.lost.store(true, Ordering::Release);
        }
        e
    }

    /// The allocator, locked. A poisoned lock only means another thread panicked mid-call; the
    /// allocator's own state stays consistent, so it is used anyway.
    pub fn allocator(&self) -> MutexGuard<'_, Allocator> {
        self.allocator.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The queue, locked for submission (vkQueueSubmit needs external synchronisation).
    pub fn queue(&self) -> MutexGuard<'_, vk::Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // A cache that cannot be written costs the next run its compile time, nothing else.
        let _ = self.pipeline_cache.save(&self.device);
        // SAFETY: the allocator is dropped once, here, before the device it allocates from.
        unsafe { ManuallyDrop::drop(&mut self.allocator) };
        // SAFETY: the cache belongs to this device, and every pipeline creation that used it has
        // returned (it is only used inside vkCreateComputePipelines).
        unsafe { self.pipeline_cache.destroy(&self.device) };
        // SAFETY: every object created from the device (sorters hold a clone of this Arc) is gone.
        unsafe { self.device.destroy_device(None) };
        // `instance` drops after this, destroying the messenger and the instance.
    }
}

/// A Vulkan instance, device, compute queue and allocator. Cheap to clone: clones share them.
#[derive(Clone)]
pub struct Context {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").field("device", &self.shared.info.name).finish_non_exhaustive()
    }
}

impl Context {
    /// Loads Vulkan and creates a device as `desc` says.
    pub fn new(desc: &ContextDesc) -> Result<Context> {
        let instance = InstanceGuard::new(desc.validation())?;
        let devices = instance.devices()?;
        let chosen = choose(&devices, desc)?;
        let (physical, info) = devices[chosen].clone();
        let queue_family = info.compute_queue_family.ok_or(Error::NoDevice)?;
        let priorities = [1.0];
        let queues =
            [vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family).queue_priorities(&priorities)];
        // synchronization2 only for the barrier study (`passes --barrier barrier2`); the sort itself
        // needs nothing beyond Vulkan 1.1.
        let mut extensions = Vec::new();
        let mut sync2 = vk::PhysicalDeviceSynchronization2Features::default().synchronization2(true);
        // Full subgroups where the device offers them: the tile sort's subgroup form asks for
        // them (`RecorderDesc::full_subgroups`). Through the extension: the instance asks for
        // Vulkan 1.1, where the 1.3 core feature cannot be enabled.
        let mut size_control = vk::PhysicalDeviceSubgroupSizeControlFeaturesEXT::default().compute_full_subgroups(true);
        // shaderInt16 where the device offers it: the tiles of u32 pairs with origins use it.
        let features = vk::PhysicalDeviceFeatures::default().shader_int16(info.shader_int16);
        let mut create = vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_features(&features);
        if info.synchronization2 {
            extensions.push(ash::khr::synchronization2::NAME.as_ptr());
            create = create.push_next(&mut sync2);
        }
        if info.full_subgroups {
            extensions.push(ash::ext::subgroup_size_control::NAME.as_ptr());
            create = create.push_next(&mut size_control);
        }
        // A portability device (MoltenVK) must have its subset extension enabled.
        if info.portability_subset {
            extensions.push(c"VK_KHR_portability_subset".as_ptr());
        }
        create = create.enabled_extension_names(&extensions);
        // SAFETY: `physical` belongs to the live instance and the queue family index came from it;
        // every extension and feature enabled is one `describe` found the device offers.
        let device =
            unsafe { instance.raw.create_device(physical, &create, None) }.map_err(Error::vk("vkCreateDevice"))?;
        // SAFETY: queue 0 of this family was requested at device creation.
        let queue = unsafe { device.get_device_queue(queue_family, 0) };
        let pipeline_cache = match DiskCache::open(&device, desc.pipeline_cache.folder(), &info.cache_id) {
            Ok(cache) => cache,
            Err(e) => {
                // SAFETY: nothing was created from the device yet.
                unsafe { device.destroy_device(None) };
                return Err(e);
            }
        };
        let allocator = Allocator::new(&AllocatorCreateDesc {
            instance: instance.raw.clone(),
            device: device.clone(),
            physical_device: physical,
            debug_settings: Default::default(),
            buffer_device_address: false,
            allocation_sizes: Default::default(),
        });
        let allocator = match allocator {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: nothing but the cache was created from the device yet.
                unsafe {
                    pipeline_cache.destroy(&device);
                    device.destroy_device(None);
                }
                return Err(Error::alloc("the allocator", 0)(e));
            }
        };
        let sync2 = info.synchronization2.then(|| ash::khr::synchronization2::Device::new(&instance.raw, &device));
        let shared = Shared {
            sync2,
            device,
            info,
            queue_family,
            queue: Mutex::new(queue),
            allocator: ManuallyDrop::new(Mutex::new(allocator)),
            pipeline_cache,
            instance,
            lost: AtomicBool::new(false),
        };
        Ok(Context { shared: Arc::new(shared) })
    }

    /// The chosen device.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// The file the pipeline cache was loaded from and is written back to when the last clone
    /// of the context drops ([`ContextDesc::pipeline_cache`]), if any.
    pub fn pipeline_cache_file(&self) -> Option<&Path> {
        self.shared.pipeline_cache.file.as_deref()
    }

    /// Why the pipeline cache file was ignored (truncated, corrupt, another device's), if it was:
    /// it is rewritten when the context drops.
    pub fn pipeline_cache_note(&self) -> Option<&str> {
        self.shared.pipeline_cache.note.as_deref()
    }

    /// Writes the pipeline cache to its file now (it is also written when the last clone of the
    /// context drops), where it grew since it was loaded.
    pub fn save_pipeline_cache(&self) -> Result<()> {
        self.shared.pipeline_cache.save(&self.shared.device)
    }

    /// Whether the validation layer is on.
    pub fn validation_enabled(&self) -> bool {
        self.shared.instance.messenger.is_some()
    }

    /// Every error-severity message the validation layer has reported so far.
    pub fn validation_errors(&self) -> Vec<String> {
        match &self.shared.instance.messenger {
            Some(m) => m.log.errors.lock().map(|e| e.clone()).unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// Device memory held through this context's allocator: (bytes in live allocations, bytes in
    /// the memory blocks they live in). Sorters' buffers grow to the largest input and are then
    /// reused, so after a warm-up both stay flat (the soak test checks it).
    pub fn allocated_bytes(&self) -> (u64, u64) {
        let report = self.shared.allocator().generate_report();
        (report.total_allocated_bytes, report.total_capacity_bytes)
    }

    /// Whether the device was lost: once it is, every sort on this context fails with
    /// [`Error::DeviceLost`] at once. Create a new context to go on.
    pub fn is_lost(&self) -> bool {
        self.shared.is_lost()
    }

    /// Test hook: marks the device lost, as a VK_ERROR_DEVICE_LOST from any call does, so that the
    /// behaviour after a loss can be tested on a device that never loses itself.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn mark_lost_for_tests(&self) {
        self.shared.lost.store(true, Ordering::Release);
    }
}
