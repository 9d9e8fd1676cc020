//! The C API of bitonic-vk: `include/bitonic_vk.h`, which cbindgen generates from this crate
//! (`tests/header.rs` fails where the committed one is stale), over `libbitonic_vk.a` and
//! `libbitonic_vk.so`. A thin front over `SortRecorder` (a renderer's device, buffers and command
//! buffers) and `Sorter` (host arrays), as the wgpu front is: every call checks what C hands it,
//! and turns errors and panics into a result code and the thread's last error message.

#![allow(non_camel_case_types)]

use std::ffi::c_char;

use ash::vk;

mod recorder;
mod sorter;
mod status;
mod tuning;

pub use recorder::*;
pub use sorter::*;
pub use status::*;
pub use tuning::{BvkTuning, BVK_KERNELS_COMPACT, BVK_KERNELS_UNROLLED, BVK_ONE_TILE_PER_WORKGROUP};

// The Vulkan types of the header by their C names, which <vulkan/vulkan.h> declares (cbindgen
// leaves these aliases out).
type VkInstance = vk::Instance;
type VkPhysicalDevice = vk::PhysicalDevice;
type VkDevice = vk::Device;
type VkBuffer = vk::Buffer;
type VkCommandBuffer = vk::CommandBuffer;
type VkPipelineCache = vk::PipelineCache;
type VkQueryPool = vk::QueryPool;
type VkDeviceSize = vk::DeviceSize;
type VkBool32 = vk::Bool32;
/// Null is None: a C caller may pass NULL, which a bare Rust fn pointer may not be.
type PFN_vkGetInstanceProcAddr = Option<vk::PFN_vkGetInstanceProcAddr>;

/// The major version of this header; `bvk_version()` gives the library's.
pub const BVK_VERSION_MAJOR: u32 = 0;
/// The minor version of this header.
pub const BVK_VERSION_MINOR: u32 = 1;
/// The patch version of this header.
pub const BVK_VERSION_PATCH: u32 = 0;

/// The library's version, as `BVK_MAKE_VERSION(major, minor, patch)`: compare it with
/// `BVK_VERSION`, the header's. Versions of one major (above 0) share the ABI.
#[no_mangle]
pub extern "C" fn bvk_version() -> u32 {
    (BVK_VERSION_MAJOR << 22) | (BVK_VERSION_MINOR << 12) | BVK_VERSION_PATCH
}

/// Copies the message of this thread's last failed call into `buffer` as snprintf does (at most
/// `size - 1` bytes, then a NUL) and returns the message's whole length without the NUL: call it
/// with NULL and 0 to size a buffer. The message names what failed and what to change; a call that
/// succeeds clears it (length 0).
///
/// # Safety
/// `buffer` is null or points to `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn bvk_last_error_message(buffer: *mut c_char, size: usize) -> usize {
    // SAFETY: forwarded from the caller.
    unsafe { status::copy_last_error(buffer, size) }
}

/// The name of a result code, such as "BVK_ERROR_OVER_CAPACITY"; "a VkResult error code" for a
/// negative one. A static string.
#[no_mangle]
pub extern "C" fn bvk_result_name(result: BvkResult) -> *const c_char {
    status::name_of(result).as_ptr()
}

/// Test hook: a call that panics inside the guard, so that the C tests can see the panic come out
/// as `BVK_ERROR_PANIC` and the next call work.
#[cfg(feature = "test-hooks")]
#[no_mangle]
pub extern "C" fn bvk_test_panic() -> BvkResult {
    status::guard(|| panic!("bvk_test_panic was called"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_version_is_the_package_version() {
        let parts = [BVK_VERSION_MAJOR, BVK_VERSION_MINOR, BVK_VERSION_PATCH].map(|p| p.to_string());
        assert_eq!(parts.join("."), env!("CARGO_PKG_VERSION"));
    }
}
