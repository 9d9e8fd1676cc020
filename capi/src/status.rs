//! What every exported function shares: the result codes, the calling thread's last error message,
//! the guard that turns errors and panics into both, and the checks of what C passes in (null
//! pointers, `struct_size`, enum values).

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use ash::vk;
use bvk::{Error, KeyKind, KeyWidth, Order};

/// What every function that can fail returns: `BVK_SUCCESS` (0); a `BVK_ERROR_*` code (above 0);
/// or, where a Vulkan call failed, the negative `VkResult` it returned (`VK_ERROR_*`).
pub type BvkResult = i32;

/// The call did what it was asked.
pub const BVK_SUCCESS: BvkResult = 0;
/// A pointer argument, or a handle in a struct, that must not be null was null.
pub const BVK_ERROR_NULL_POINTER: BvkResult = 1;
/// A struct's `struct_size` is not `sizeof` the struct as this library knows it: set it, and
/// build against the header of the library you link.
pub const BVK_ERROR_BAD_STRUCT_SIZE: BvkResult = 2;
/// An enum argument or field holds a value that the function does not take.
pub const BVK_ERROR_BAD_ENUM: BvkResult = 3;
/// A binding that is not one of this recorder's.
pub const BVK_ERROR_BAD_BINDING: BvkResult = 4;
/// A host array is not aligned to its element type, or keys and values overlap.
pub const BVK_ERROR_BAD_ARRAY: BvkResult = 5;
/// The library panicked: a bug. The object the call was given should be destroyed.
pub const BVK_ERROR_PANIC: BvkResult = 6;
/// The Vulkan loader could not be loaded (standalone sorter).
pub const BVK_ERROR_LOADER_MISSING: BvkResult = 100;
/// No device with a compute queue and Vulkan 1.1 was found (standalone sorter).
pub const BVK_ERROR_NO_DEVICE: BvkResult = 101;
/// No device matches `BvkSorterDesc::device` or `BITONIC_VK_DEVICE`.
pub const BVK_ERROR_NO_SUCH_DEVICE: BvkResult = 102;
/// Validation was asked for but `VK_LAYER_KHRONOS_validation` is not installed.
pub const BVK_ERROR_VALIDATION_LAYER_MISSING: BvkResult = 103;
/// A Vulkan call returned a result that is not an error code (its negative codes pass through).
pub const BVK_ERROR_VULKAN: BvkResult = 104;
/// The device was lost.
pub const BVK_ERROR_DEVICE_LOST: BvkResult = 105;
/// Out of device or host memory for a buffer.
pub const BVK_ERROR_OUT_OF_MEMORY: BvkResult = 106;
/// The memory allocator failed for another reason.
pub const BVK_ERROR_ALLOCATION: BvkResult = 107;
/// More elements than one buffer of this device holds.
pub const BVK_ERROR_TOO_LARGE: BvkResult = 108;
/// Keys and values differ in length.
pub const BVK_ERROR_LENGTH_MISMATCH: BvkResult = 109;
/// The GPU did not finish in time (standalone sorter).
pub const BVK_ERROR_TIMEOUT: BvkResult = 110;
/// An option or argument is out of range (the message names it).
pub const BVK_ERROR_INVALID_OPTION: BvkResult = 111;
/// A buffer region's offset is not a multiple of `minStorageBufferOffsetAlignment`.
pub const BVK_ERROR_MISALIGNED_OFFSET: BvkResult = 112;
/// A buffer region is smaller than the binding's capacity needs.
pub const BVK_ERROR_BUFFER_TOO_SMALL: BvkResult = 113;
/// Two regions of one binding share bytes.
pub const BVK_ERROR_OVERLAPPING_REGIONS: BvkResult = 114;
/// A sort's key type is not of the width its binding was made for.
pub const BVK_ERROR_KEY_WIDTH_MISMATCH: BvkResult = 115;
/// A sort is larger than its binding's capacity.
pub const BVK_ERROR_OVER_CAPACITY: BvkResult = 116;
/// This build's embedded kernels are damaged or incomplete.
pub const BVK_ERROR_BUILD: BvkResult = 117;
/// The pipeline cache file could not be written (standalone sorter).
pub const BVK_ERROR_CACHE_FILE: BvkResult = 118;
/// The driver refused a kernel's pipeline at every workgroup size tried.
pub const BVK_ERROR_PIPELINE_REFUSED: BvkResult = 119;
/// The device lacks a feature the sort needs.
pub const BVK_ERROR_UNSUPPORTED: BvkResult = 120;
/// An error this version of the C API has no code for (the message says what).
pub const BVK_ERROR_UNKNOWN: BvkResult = 199;

/// The code of a library error: one per variant, a failed Vulkan call's own result where it is an
/// error code.
pub(crate) fn code_of(e: &Error) -> BvkResult {
    match e {
        Error::LoaderMissing(_) => BVK_ERROR_LOADER_MISSING,
        Error::NoDevice => BVK_ERROR_NO_DEVICE,
        Error::NoSuchDevice { .. } => BVK_ERROR_NO_SUCH_DEVICE,
        Error::ValidationLayerMissing => BVK_ERROR_VALIDATION_LAYER_MISSING,
        Error::Vulkan { result, .. } if result.as_raw() < 0 => result.as_raw(),
        Error::Vulkan { .. } => BVK_ERROR_VULKAN,
        Error::DeviceLost { .. } => BVK_ERROR_DEVICE_LOST,
        Error::OutOfMemory { .. } => BVK_ERROR_OUT_OF_MEMORY,
        Error::Allocation { .. } => BVK_ERROR_ALLOCATION,
        Error::TooLarge { .. } => BVK_ERROR_TOO_LARGE,
        Error::LengthMismatch { .. } => BVK_ERROR_LENGTH_MISMATCH,
        Error::Timeout(_) => BVK_ERROR_TIMEOUT,
        Error::InvalidOption { .. } => BVK_ERROR_INVALID_OPTION,
        Error::MisalignedOffset { .. } => BVK_ERROR_MISALIGNED_OFFSET,
        Error::BufferTooSmall { .. } => BVK_ERROR_BUFFER_TOO_SMALL,
        Error::OverlappingRegions { .. } => BVK_ERROR_OVERLAPPING_REGIONS,
        Error::KeyWidthMismatch { .. } => BVK_ERROR_KEY_WIDTH_MISMATCH,
        Error::OverCapacity { .. } => BVK_ERROR_OVER_CAPACITY,
        Error::Build { .. } => BVK_ERROR_BUILD,
        Error::CacheFile { .. } => BVK_ERROR_CACHE_FILE,
        Error::PipelineRefused { .. } => BVK_ERROR_PIPELINE_REFUSED,
        Error::Unsupported { .. } => BVK_ERROR_UNSUPPORTED,
        // `Error` is non_exhaustive: a variant added later reads as unknown until it has a code.
        _ => BVK_ERROR_UNKNOWN,
    }
}

/// The name of each code of this API, as the header spells it.
pub(crate) fn name_of(code: BvkResult) -> &'static CStr {
    match code {
        BVK_SUCCESS => c"BVK_SUCCESS",
        BVK_ERROR_NULL_POINTER => c"BVK_ERROR_NULL_POINTER",
        BVK_ERROR_BAD_STRUCT_SIZE => c"BVK_ERROR_BAD_STRUCT_SIZE",
        BVK_ERROR_BAD_ENUM => c"BVK_ERROR_BAD_ENUM",
        BVK_ERROR_BAD_BINDING => c"BVK_ERROR_BAD_BINDING",
        BVK_ERROR_BAD_ARRAY => c"BVK_ERROR_BAD_ARRAY",
        BVK_ERROR_PANIC => c"BVK_ERROR_PANIC",
        BVK_ERROR_LOADER_MISSING => c"BVK_ERROR_LOADER_MISSING",
        BVK_ERROR_NO_DEVICE => c"BVK_ERROR_NO_DEVICE",
        BVK_ERROR_NO_SUCH_DEVICE => c"BVK_ERROR_NO_SUCH_DEVICE",
        BVK_ERROR_VALIDATION_LAYER_MISSING => c"BVK_ERROR_VALIDATION_LAYER_MISSING",
        BVK_ERROR_VULKAN => c"BVK_ERROR_VULKAN",
        BVK_ERROR_DEVICE_LOST => c"BVK_ERROR_DEVICE_LOST",
        BVK_ERROR_OUT_OF_MEMORY => c"BVK_ERROR_OUT_OF_MEMORY",
        BVK_ERROR_ALLOCATION => c"BVK_ERROR_ALLOCATION",
        BVK_ERROR_TOO_LARGE => c"BVK_ERROR_TOO_LARGE",
        BVK_ERROR_LENGTH_MISMATCH => c"BVK_ERROR_LENGTH_MISMATCH",
        BVK_ERROR_TIMEOUT => c"BVK_ERROR_TIMEOUT",
        BVK_ERROR_INVALID_OPTION => c"BVK_ERROR_INVALID_OPTION",
        BVK_ERROR_MISALIGNED_OFFSET => c"BVK_ERROR_MISALIGNED_OFFSET",
        BVK_ERROR_BUFFER_TOO_SMALL => c"BVK_ERROR_BUFFER_TOO_SMALL",
        BVK_ERROR_OVERLAPPING_REGIONS => c"BVK_ERROR_OVERLAPPING_REGIONS",
        BVK_ERROR_KEY_WIDTH_MISMATCH => c"BVK_ERROR_KEY_WIDTH_MISMATCH",
        BVK_ERROR_OVER_CAPACITY => c"BVK_ERROR_OVER_CAPACITY",
        BVK_ERROR_BUILD => c"BVK_ERROR_BUILD",
        BVK_ERROR_CACHE_FILE => c"BVK_ERROR_CACHE_FILE",
        BVK_ERROR_PIPELINE_REFUSED => c"BVK_ERROR_PIPELINE_REFUSED",
        BVK_ERROR_UNSUPPORTED => c"BVK_ERROR_UNSUPPORTED",
        BVK_ERROR_UNKNOWN => c"BVK_ERROR_UNKNOWN",
        code if code < 0 => c"a VkResult error code",
        _ => c"not a BvkResult",
    }
}

/// A failed call: its code and the message the thread's last error then holds.
pub(crate) struct Fail {
    code: BvkResult,
    message: String,
}

impl Fail {
    pub(crate) fn new(code: BvkResult, message: String) -> Fail {
        Fail { code, message }
    }

    pub(crate) fn null(what: &str) -> Fail {
        Fail::new(BVK_ERROR_NULL_POINTER, format!("{what} is null"))
    }

    pub(crate) fn bad_enum(what: &str, value: u32, takes: &str) -> Fail {
        Fail::new(BVK_ERROR_BAD_ENUM, format!("{what} is {value}; it takes {takes}"))
    }

    fn panic(payload: &(dyn Any + Send)) -> Fail {
        let what = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a panic without a message");
        Fail::new(BVK_ERROR_PANIC, format!("bitonic-vk panicked (a bug; please report it): {what}"))
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::new(code_of(&e), e.to_string())
    }
}

thread_local! {
    /// The message of the calling thread's last failed call, without a NUL; empty after a success.
    static LAST_ERROR: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn set_last_error(message: &str) {
    // A NUL inside would cut the C string short.
    let bytes = message.bytes().map(|b| if b == 0 { b' ' } else { b });
    // `try_with` fails only while the thread is being torn down: the message is then dropped.
    let _ = LAST_ERROR.try_with(|last| {
        let mut last = last.borrow_mut();
        last.clear();
        last.extend(bytes);
    });
}

/// Runs an exported function's body: an error or a panic becomes its code and the thread's last
/// error message; a success clears the message. No unwind crosses into C.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Fail>) -> BvkResult {
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| Err(Fail::panic(&*payload)));
    match outcome {
        Ok(()) => {
            set_last_error("");
            BVK_SUCCESS
        }
        Err(fail) => {
            set_last_error(&fail.message);
            fail.code
        }
    }
}

/// Copies the thread's last error message into `buffer` as snprintf does: at most `size - 1`
/// bytes and a NUL; returns the message's whole length without the NUL.
///
/// # Safety
/// `buffer` is null (with `size` 0) or points to `size` writable bytes.
pub(crate) unsafe fn copy_last_error(buffer: *mut c_char, size: usize) -> usize {
    LAST_ERROR
        .try_with(|last| {
            let last = last.borrow();
            if !buffer.is_null() && size > 0 {
                let n = last.len().min(size - 1);
                // SAFETY: the caller's buffer holds `size` bytes and n + 1 <= size; the message is
                // ours, so the two cannot overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(last.as_ptr().cast::<c_char>(), buffer, n);
                    buffer.add(n).write(0);
                }
            }
            last.len()
        })
        .unwrap_or(0)
}

/// Reads a caller's struct whose first field is `uint32_t struct_size`, after checking that field:
/// only this library's size of it is taken (the first version of each struct is the only one).
///
/// # Safety
/// `ptr` is null or points to at least a readable `uint32_t`, and to a whole readable `T` where
/// that `uint32_t` is `size_of::<T>()`. Every bit pattern must be a valid `T` (plain integers,
/// Vulkan handles, raw pointers, `Option` of function pointers).
pub(crate) unsafe fn read_struct<T: Copy>(ptr: *const T, what: &str) -> Result<T, Fail> {
    if ptr.is_null() {
        return Err(Fail::null(what));
    }
    // SAFETY: non-null, and the caller's promise of a readable u32 at its start.
    let size = unsafe { ptr.cast::<u32>().read() };
    check_size::<T>(size, what)?;
    // SAFETY: the struct_size says a whole T is there (the caller's promise), and any bits are valid.
    Ok(unsafe { ptr.read() })
}

/// Checks a `struct_size` against this library's size of `T`.
pub(crate) fn check_size<T>(size: u32, what: &str) -> Result<(), Fail> {
    let expected = std::mem::size_of::<T>();
    if size as usize != expected {
        return Err(Fail::new(
            BVK_ERROR_BAD_STRUCT_SIZE,
            format!("{what}->struct_size is {size}; this library's is {expected}: set it to sizeof the struct"),
        ));
    }
    Ok(())
}

/// `uint32_t` keys: the values of `key_type` arguments are BVK_KEY_*.
pub const BVK_KEY_U32: u32 = 0;
/// `int32_t` keys.
pub const BVK_KEY_I32: u32 = 1;
/// `float` keys, in IEEE total order: -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN.
pub const BVK_KEY_F32: u32 = 2;
/// `uint64_t` keys.
pub const BVK_KEY_U64: u32 = 3;
/// `int64_t` keys.
pub const BVK_KEY_I64: u32 = 4;
/// `double` keys, in IEEE total order as `BVK_KEY_F32`.
pub const BVK_KEY_F64: u32 = 5;

/// Smallest key first: the values of `order` arguments are BVK_ORDER_*.
pub const BVK_ORDER_ASCENDING: u32 = 0;
/// Largest key first.
pub const BVK_ORDER_DESCENDING: u32 = 1;

/// `BvkBindDesc::key_width` of `uint32_t`, `int32_t` and `float` keys.
pub const BVK_KEY_WIDTH_32: u32 = 0;
/// `uint64_t`, `int64_t` and `double` keys.
pub const BVK_KEY_WIDTH_64: u32 = 1;

/// A switch of `BvkTuning`: the default, which may depend on the device and the sort.
pub const BVK_KNOB_AUTO: u32 = 0;
/// A switch of `BvkTuning`: off.
pub const BVK_KNOB_OFF: u32 = 1;
/// A switch of `BvkTuning`: on.
pub const BVK_KNOB_ON: u32 = 2;

pub(crate) fn parse_key_type(value: u32) -> Result<KeyKind, Fail> {
    match value {
        BVK_KEY_U32 => Ok(KeyKind::U32),
        BVK_KEY_I32 => Ok(KeyKind::I32),
        BVK_KEY_F32 => Ok(KeyKind::F32),
        BVK_KEY_U64 => Ok(KeyKind::U64),
        BVK_KEY_I64 => Ok(KeyKind::I64),
        BVK_KEY_F64 => Ok(KeyKind::F64),
        _ => Err(Fail::bad_enum("key_type", value, "BVK_KEY_U32 to BVK_KEY_F64 (0 to 5)")),
    }
}

pub(crate) fn parse_order(value: u32) -> Result<Order, Fail> {
    match value {
        BVK_ORDER_ASCENDING => Ok(Order::Ascending),
        BVK_ORDER_DESCENDING => Ok(Order::Descending),
        _ => Err(Fail::bad_enum("order", value, "BVK_ORDER_ASCENDING (0) or BVK_ORDER_DESCENDING (1)")),
    }
}

pub(crate) fn parse_key_width(value: u32) -> Result<KeyWidth, Fail> {
    match value {
        BVK_KEY_WIDTH_32 => Ok(KeyWidth::Bits32),
        BVK_KEY_WIDTH_64 => Ok(KeyWidth::Bits64),
        _ => Err(Fail::bad_enum("key_width", value, "BVK_KEY_WIDTH_32 (0) or BVK_KEY_WIDTH_64 (1)")),
    }
}

pub(crate) fn parse_bool(value: vk::Bool32, what: &str) -> Result<bool, Fail> {
    match value {
        vk::FALSE => Ok(false),
        vk::TRUE => Ok(true),
        _ => Err(Fail::bad_enum(what, value, "VK_FALSE (0) or VK_TRUE (1)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_own_name() {
        let codes: Vec<BvkResult> = (0..=BVK_ERROR_UNKNOWN).filter(|&c| name_of(c) != c"not a BvkResult").collect();
        let mut names: Vec<&CStr> = codes.iter().map(|&c| name_of(c)).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), codes.len(), "two codes share a name: {codes:?}");
        assert_eq!(codes.len(), 29, "a code was added or removed without its name: {codes:?}");
    }

    #[test]
    fn a_failed_vulkan_call_passes_its_result_through() {
        let e = Error::Vulkan { call: "vkCreateBuffer", result: vk::Result::ERROR_OUT_OF_HOST_MEMORY };
        assert_eq!(code_of(&e), vk::Result::ERROR_OUT_OF_HOST_MEMORY.as_raw());
        let e = Error::Vulkan { call: "vkWaitForFences", result: vk::Result::TIMEOUT };
        assert_eq!(code_of(&e), BVK_ERROR_VULKAN);
    }

    #[test]
    fn the_last_error_is_copied_as_snprintf_does_and_cleared_by_a_success() {
        let code = guard(|| Err(Fail::null("desc")));
        assert_eq!(code, BVK_ERROR_NULL_POINTER);
        let mut small = [0x7f as c_char; 5];
        // SAFETY: a buffer of 5 bytes.
        let len = unsafe { copy_last_error(small.as_mut_ptr(), small.len()) };
        assert_eq!(len, "desc is null".len());
        assert_eq!(small.map(|c| c as u8), *b"desc\0");
        // SAFETY: a null buffer of size 0 only measures.
        assert_eq!(unsafe { copy_last_error(std::ptr::null_mut(), 0) }, len);
        assert_eq!(guard(|| Ok(())), BVK_SUCCESS);
        // SAFETY: as above.
        assert_eq!(unsafe { copy_last_error(std::ptr::null_mut(), 0) }, 0);
    }

    #[test]
    fn a_panic_becomes_its_code_and_message() {
        let code = guard(|| panic!("on purpose"));
        assert_eq!(code, BVK_ERROR_PANIC);
        let mut buffer = [0 as c_char; 200];
        // SAFETY: a buffer of 200 bytes.
        let len = unsafe { copy_last_error(buffer.as_mut_ptr(), buffer.len()) };
        let message = String::from_utf8(buffer[..len].iter().map(|&c| c as u8).collect()).expect("UTF-8");
        assert!(message.ends_with("on purpose"), "{message}");
    }
}
