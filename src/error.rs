//! The crate's one error type. Every failing Vulkan call is reported with the call's name, and
//! every limit or bad input names what to change.

use ash::vk;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Vulkan loader library could not be loaded.
    #[error(
        "the Vulkan loader could not be loaded ({0}): install it (Debian/Ubuntu: `apt-get install libvulkan1`) \
         together with a driver (`mesa-vulkan-drivers` provides lavapipe, a CPU driver)"
    )]
    LoaderMissing(String),

    /// The loader found no device that can run compute work.
    #[error(
        "no Vulkan device with a compute queue and Vulkan 1.1 was found: install a driver (the GPU vendor's, or \
         `mesa-vulkan-drivers` for lavapipe, a CPU driver)"
    )]
    NoDevice,

    /// A device was asked for by index or name and none matches.
    #[error("no Vulkan device matches `{selector}` (from {origin}); available devices: {available}")]
    NoSuchDevice {
        /// What was asked for.
        selector: String,
        /// Where the request came from (an option or `BITONIC_VK_DEVICE`).
        origin: &'static str,
        /// The devices there are, `index: name`.
        available: String,
    },

    /// Validation was asked for but the Khronos validation layer is not installed.
    #[error(
        "validation was requested but VK_LAYER_KHRONOS_validation is not installed: install it (Debian/Ubuntu: \
         `apt-get install vulkan-validationlayers`) or unset BITONIC_VK_VALIDATION"
    )]
    ValidationLayerMissing,

    /// A Vulkan call failed.
    #[error("{call} failed: {result}")]
    Vulkan {
        /// The name of the Vulkan function.
        call: &'static str,
        /// What it returned.
        result: vk::Result,
    },

    /// The device was lost (driver reset, hang or crash): the context can no longer be used.
    #[error("the Vulkan device was lost during {call}: create a new context")]
    DeviceLost {
        /// The call that reported it.
        call: &'static str,
    },

    /// The device or host ran out of memory for a buffer.
    #[error("out of memory allocating {bytes} bytes for {what}: sort fewer elements at a time")]
    OutOfMemory {
        /// What the memory was for.
        what: &'static str,
        /// How much was asked for.
        bytes: u64,
    },

    /// The memory allocator failed for another reason.
    #[error("allocating memory for {what} failed: {source}")]
    Allocation {
        /// What the memory was for.
        what: &'static str,
        /// The allocator's error.
        source: gpu_allocator::AllocationError,
    },

    /// The input is larger than one buffer binding or allocation of this device can hold.
    #[error(
        "{n} elements need {bytes} bytes per buffer, more than this device's {limit} ({value}): sort at most {max} \
         elements at a time"
    )]
    TooLarge {
        /// The element count asked for.
        n: usize,
        /// Bytes one buffer would need.
        bytes: u64,
        /// The name of the limit, as the Vulkan spec spells it.
        limit: &'static str,
        /// The limit's value.
        value: u64,
        /// The most elements this device can sort in one call.
        max: u64,
    },

    /// Keys and values differ in length.
    #[error("keys and values differ in length: {keys} keys but {values} values")]
    LengthMismatch {
        /// Number of keys.
        keys: usize,
        /// Number of values.
        values: usize,
    },

    /// The GPU did not signal completion in time.
    #[error("the GPU did not finish within {0:?}; the sort's resources stay alive until the device is idle")]
    Timeout(std::time::Duration),

    /// A creation option is out of range.
    #[error("invalid option {name} = {value}: {reason}")]
    InvalidOption {
        /// The option's name.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        reason: &'static str,
    },

    /// A caller's buffer region starts at an offset the device cannot bind.
    #[error("the {what} region starts at byte {offset}, not a multiple of minStorageBufferOffsetAlignment ({alignment}): move it")]
    MisalignedOffset {
        /// Which region.
        what: &'static str,
        /// Its offset.
        offset: u64,
        /// The device's alignment.
        alignment: u64,
    },

    /// A caller's buffer region is smaller than the capacity asked for.
    #[error("the {what} region is {size} bytes but {capacity} elements need {needed}: enlarge it or bind a smaller capacity")]
    BufferTooSmall {
        /// Which region.
        what: &'static str,
        /// Its size.
        size: u64,
        /// Bytes needed.
        needed: u64,
        /// The capacity asked for.
        capacity: u32,
    },

    /// Two regions of one binding share bytes.
    #[error("the {first} and {second} regions overlap: they must not share bytes")]
    OverlappingRegions {
        /// One region.
        first: &'static str,
        /// The other.
        second: &'static str,
    },

    /// A sort's key type is not the width its binding was made for.
    #[error("{kind} keys do not fit a binding made for {bound}-bit keys: bind with the key_width of the keys sorted")]
    KeyWidthMismatch {
        /// The key type of the sort.
        kind: &'static str,
        /// The key width of the binding, in bits.
        bound: u32,
    },

    /// A recorded sort is larger than its binding's capacity.
    #[error("a sort of {n} elements does not fit its binding's capacity of {capacity}: bind a larger capacity")]
    OverCapacity {
        /// Elements asked for.
        n: u32,
        /// The binding's capacity.
        capacity: u32,
    },

    /// This build's embedded kernels lack a module or hold a damaged one.
    #[error("this build of bitonic-vk has {what}: rebuild it")]
    Build {
        /// What is wrong with them.
        what: String,
    },

    /// The pipeline cache file could not be written.
    #[error("cannot write the pipeline cache {path}: {reason}; set ContextDesc::pipeline_cache (or --no-pipeline-cache) to another folder or off")]
    CacheFile {
        /// The file.
        path: std::path::PathBuf,
        /// The system's error.
        reason: String,
    },

    /// The driver refused a kernel's pipeline (a Vulkan error other than a lost device, as
    /// register pressure gets on a small GPU) at every workgroup `bind` tried: the one asked for,
    /// then each half of it down to what the kernels allow.
    #[error(
        "{device} refused the {kernel} pipeline at workgroups of {workgroups:?} invocations (its last answer: \
         {result:?}): set {knob} to a size the driver takes, or a smaller Tuning::max_tile"
    )]
    PipelineRefused {
        /// The device's name.
        device: String,
        /// The kernel whose pipeline was refused last.
        kernel: String,
        /// The workgroup sizes of the refused pipelines, in the order tried.
        workgroups: Vec<u32>,
        /// The `Tuning` knob (and CLI option) that sets that kernel's workgroup.
        knob: &'static str,
        /// What the driver returned last.
        result: vk::Result,
    },

    /// The device lacks a feature that was asked for.
    #[error("this device cannot {what}: {fix}")]
    Unsupported {
        /// What was asked for.
        what: &'static str,
        /// What to do instead.
        fix: &'static str,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Maps a failed Vulkan call's result, keeping the call's name.
    pub(crate) fn vk(call: &'static str) -> impl Fn(vk::Result) -> Error {
        move |result| match result {
            vk::Result::ERROR_DEVICE_LOST => Error::DeviceLost { call },
            result => Error::Vulkan { call, result },
        }
    }

    /// Maps an allocator failure for `what` of `bytes` bytes.
    pub(crate) fn alloc(what: &'static str, bytes: u64) -> impl Fn(gpu_allocator::AllocationError) -> Error {
        move |source| match source {
            gpu_allocator::AllocationError::OutOfMemory => Error::OutOfMemory { what, bytes },
            source => Error::Allocation { what, source },
        }
    }
}
