//! `BvkSorter`: the standalone `Sorter` on a device of its own, sorting host arrays.

use std::ffi::{c_char, c_void, CStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use ash::vk;
use bvk::{Context, ContextDesc, KeyKind, Order, PipelineCacheDir, SortKey, SortStats, Sorter, SorterDesc, StableKey};

use crate::status::{check_size, guard, parse_key_type, parse_order, read_struct, BvkResult, Fail};
use crate::status::{BVK_ERROR_BAD_ARRAY, BVK_ERROR_BAD_ENUM, BVK_ERROR_TOO_LARGE};
use crate::tuning::{tuning, BvkTuning};
use crate::VkBool32;

/// Sorts host arrays on a device of its own (made by `bvk_create_sorter`).
pub struct BvkSorter(Sorter);

/// `BvkSorterDesc::validation`: `BITONIC_VK_VALIDATION=1` in the environment turns it on.
pub const BVK_VALIDATION_FROM_ENV: u32 = 0;
/// No validation layer.
pub const BVK_VALIDATION_OFF: u32 = 1;
/// The Khronos validation layer with synchronization validation; its errors are printed and
/// counted (`bvk_sorter_validation_errors`).
pub const BVK_VALIDATION_ON: u32 = 2;

/// `BvkSorterDesc::pipeline_cache`: a file per device and driver in `BITONIC_VK_PIPELINE_CACHE`,
/// else `$XDG_CACHE_HOME/bitonic-vk/`, else `~/.cache/bitonic-vk/`.
pub const BVK_PIPELINE_CACHE_DEFAULT: u32 = 0;
/// No file: the pipelines are compiled again by each sorter.
pub const BVK_PIPELINE_CACHE_OFF: u32 = 1;
/// A file in the folder `BvkSorterDesc::pipeline_cache_dir`.
pub const BVK_PIPELINE_CACHE_AT: u32 = 2;

/// How to make a standalone sorter. Zero it and set `struct_size` for the defaults.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BvkSorterDesc {
    /// `sizeof(BvkSorterDesc)`.
    pub struct_size: u32,
    /// The device: an index as `bitonic-vk devices` lists them, or a part of its name; NULL reads
    /// `BITONIC_VK_DEVICE`, and without it takes a discrete GPU, then an integrated, a virtual and
    /// a CPU one.
    pub device: *const c_char,
    /// `BVK_VALIDATION_FROM_ENV` (0), `BVK_VALIDATION_OFF` or `BVK_VALIDATION_ON`.
    pub validation: u32,
    /// `BVK_PIPELINE_CACHE_DEFAULT` (0), `BVK_PIPELINE_CACHE_OFF` or `BVK_PIPELINE_CACHE_AT`.
    pub pipeline_cache: u32,
    /// The pipeline cache's folder with `BVK_PIPELINE_CACHE_AT`; NULL otherwise.
    pub pipeline_cache_dir: *const c_char,
    /// How long a sort waits for the GPU, in nanoseconds; 0 takes two minutes.
    pub timeout_ns: u64,
    /// The knobs; zeroed, each takes its default.
    pub tuning: BvkTuning,
}

/// What one host sort did (`bvk_sort`, `bvk_sort_stable`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BvkSortStats {
    /// `sizeof(BvkSortStats)`, set by the caller.
    pub struct_size: u32,
    /// Passes recorded (0 when the count is below 2).
    pub passes: u32,
    /// Elements sorted.
    pub count: u64,
    /// `VK_TRUE` where the queue has timestamps and something ran: `gpu_time_ns` holds the GPU time
    /// from the start of the first pass to the end of the last.
    pub has_gpu_time: VkBool32,
    /// The GPU time in nanoseconds where `has_gpu_time`, else 0.
    pub gpu_time_ns: u64,
}

/// A C string argument as text, or None for null.
///
/// # Safety
/// `s` is null or a NUL-terminated string.
unsafe fn text<'a>(s: *const c_char) -> Option<&'a CStr> {
    // SAFETY: the caller's promise: non-null means NUL-terminated.
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) })
}

/// The context's description from the caller's.
///
/// # Safety
/// The strings in `d` are null or NUL-terminated.
unsafe fn context_desc(d: &BvkSorterDesc) -> Result<ContextDesc, Fail> {
    let validation = match d.validation {
        BVK_VALIDATION_FROM_ENV => None,
        BVK_VALIDATION_OFF => Some(false),
        BVK_VALIDATION_ON => Some(true),
        v => return Err(Fail::bad_enum("desc->validation", v, "BVK_VALIDATION_FROM_ENV, _OFF or _ON (0 to 2)")),
    };
    // SAFETY: the caller's promise on the strings.
    let dir = unsafe { text(d.pipeline_cache_dir) };
    let pipeline_cache = match (d.pipeline_cache, dir) {
        (BVK_PIPELINE_CACHE_DEFAULT, None) => PipelineCacheDir::Default,
        (BVK_PIPELINE_CACHE_OFF, None) => PipelineCacheDir::Off,
        (BVK_PIPELINE_CACHE_AT, Some(dir)) => {
            PipelineCacheDir::At(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
        }
        (BVK_PIPELINE_CACHE_AT, None) => return Err(Fail::null("desc->pipeline_cache_dir")),
        (BVK_PIPELINE_CACHE_DEFAULT | BVK_PIPELINE_CACHE_OFF, Some(_)) => {
            let message = "desc->pipeline_cache_dir is set but desc->pipeline_cache is not BVK_PIPELINE_CACHE_AT";
            return Err(Fail::new(BVK_ERROR_BAD_ENUM, message.into()));
        }
        (v, _) => {
            return Err(Fail::bad_enum("desc->pipeline_cache", v, "BVK_PIPELINE_CACHE_DEFAULT, _OFF or _AT (0 to 2)"))
        }
    };
    // SAFETY: the caller's promise on the strings.
    let device = unsafe { text(d.device) }.map(|s| s.to_string_lossy().parse().unwrap_or_else(|e| match e {}));
    Ok(ContextDesc { device, validation, pipeline_cache })
}

/// Makes a standalone sorter: loads Vulkan (`libvulkan.so.1`), picks a device, makes a queue,
/// an allocator and the sorter's pipelines as sorts need them.
///
/// # Safety
/// `desc` is null or points to a `BvkSorterDesc` whose `struct_size` is set and whose strings are
/// null or NUL-terminated; `sorter` is null or points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn bvk_create_sorter(desc: *const BvkSorterDesc, sorter: *mut *mut BvkSorter) -> BvkResult {
    guard(|| {
        // SAFETY: the caller's promise on `desc`.
        let d = unsafe { read_struct(desc, "desc") }?;
        if sorter.is_null() {
            return Err(Fail::null("sorter"));
        }
        // SAFETY: the caller's promise on the strings.
        let context = unsafe { context_desc(&d) }?;
        let tuning = tuning(&d.tuning, "desc->tuning")?;
        let ctx = Context::new(&context)?;
        let timeout = (d.timeout_ns > 0).then(|| Duration::from_nanos(d.timeout_ns));
        let made = Sorter::new(&ctx, &SorterDesc { timeout, tuning, ..SorterDesc::default() })?;
        // SAFETY: checked non-null; the caller's promise of writable storage.
        unsafe { sorter.write(Box::into_raw(Box::new(BvkSorter(made)))) };
        Ok(())
    })
}

/// Destroys a sorter and, with it, its device; null does nothing.
///
/// # Safety
/// `sorter` is null or a live sorter that no call is using.
#[no_mangle]
pub unsafe extern "C" fn bvk_destroy_sorter(sorter: *mut BvkSorter) {
    if sorter.is_null() {
        return;
    }
    guard(|| {
        // SAFETY: made by Box::into_raw in bvk_create_sorter, not destroyed (the caller's promise).
        drop(unsafe { Box::from_raw(sorter) });
        Ok(())
    });
}

/// The error-severity messages the validation layer has reported on the sorter's device so far
/// (0 without validation).
///
/// # Safety
/// `sorter` is null or a live sorter; `count` is null or points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn bvk_sorter_validation_errors(sorter: *const BvkSorter, count: *mut u32) -> BvkResult {
    guard(|| {
        // SAFETY: the caller's promise on `sorter`.
        let s = unsafe { sorter.as_ref() }.ok_or_else(|| Fail::null("sorter"))?;
        if count.is_null() {
            return Err(Fail::null("count"));
        }
        let errors = s.0.context().validation_errors().len();
        // SAFETY: checked non-null; the caller's promise of a writable u32.
        unsafe { count.write(u32::try_from(errors).unwrap_or(u32::MAX)) };
        Ok(())
    })
}

/// Sorts `count` keys of `key_type` in place, and with `values` non-null moves `values[i]` (a
/// `uint32_t` each) with `keys[i]`. Equal keys may come out in any order. Waits for the GPU.
///
/// # Safety
/// `sorter` is null or a live sorter that no other call is using; `keys` is null or points to
/// `count` keys of `key_type`, `values` null or to `count` `uint32_t`s, both readable and
/// writable; `stats` null or a `BvkSortStats` whose `struct_size` is set.
#[no_mangle]
pub unsafe extern "C" fn bvk_sort(
    sorter: *mut BvkSorter,
    keys: *mut c_void,
    values: *mut u32,
    count: usize,
    key_type: u32,
    order: u32,
    stats: *mut BvkSortStats,
) -> BvkResult {
    // SAFETY: forwarded from the caller.
    unsafe { host_sort(sorter, keys, values, count, key_type, order, stats, false) }
}

/// `bvk_sort` of pairs that keeps equal keys in their input order. `uint32_t`, `int32_t` and
/// `float` keys (each is packed with its index into an 8-byte key); `values` must not be null.
///
/// # Safety
/// As `bvk_sort`.
#[no_mangle]
pub unsafe extern "C" fn bvk_sort_stable(
    sorter: *mut BvkSorter,
    keys: *mut c_void,
    values: *mut u32,
    count: usize,
    key_type: u32,
    order: u32,
    stats: *mut BvkSortStats,
) -> BvkResult {
    // SAFETY: forwarded from the caller.
    unsafe { host_sort(sorter, keys, values, count, key_type, order, stats, true) }
}

/// What `bvk_sort` and `bvk_sort_stable` share.
///
/// # Safety
/// As `bvk_sort`.
#[allow(clippy::too_many_arguments)]
unsafe fn host_sort(
    sorter: *mut BvkSorter,
    keys: *mut c_void,
    values: *mut u32,
    count: usize,
    key_type: u32,
    order: u32,
    stats: *mut BvkSortStats,
    stable: bool,
) -> BvkResult {
    guard(|| {
        // SAFETY: the caller's promise on `sorter`.
        let s = &mut unsafe { sorter.as_mut() }.ok_or_else(|| Fail::null("sorter"))?.0;
        let (kind, order) = (parse_key_type(key_type)?, parse_order(order)?);
        if !stats.is_null() {
            // SAFETY: non-null: the caller's promise of a BvkSortStats whose struct_size is set.
            check_size::<BvkSortStats>(unsafe { stats.cast::<u32>().read() }, "stats")?;
        }
        if stable && values.is_null() {
            return Err(Fail::null("values"));
        }
        let width = if matches!(kind, KeyKind::U64 | KeyKind::I64 | KeyKind::F64) { 8 } else { 4 };
        if !values.is_null() && overlap(keys as usize, count, width, values as usize) {
            return Err(Fail::new(BVK_ERROR_BAD_ARRAY, "keys and values overlap".into()));
        }
        // SAFETY: the caller's promise on `keys` and `values`.
        let done = unsafe {
            match (kind, stable) {
                (KeyKind::U32, false) => sort::<u32>(s, keys, values, count, order),
                (KeyKind::I32, false) => sort::<i32>(s, keys, values, count, order),
                (KeyKind::F32, false) => sort::<f32>(s, keys, values, count, order),
                (KeyKind::U64, false) => sort::<u64>(s, keys, values, count, order),
                (KeyKind::I64, false) => sort::<i64>(s, keys, values, count, order),
                (KeyKind::F64, false) => sort::<f64>(s, keys, values, count, order),
                (KeyKind::U32, true) => sort_stable::<u32>(s, keys, values, count, order),
                (KeyKind::I32, true) => sort_stable::<i32>(s, keys, values, count, order),
                (KeyKind::F32, true) => sort_stable::<f32>(s, keys, values, count, order),
                (_, true) => Err(Fail::bad_enum("key_type", key_type, "BVK_KEY_U32, _I32 or _F32 in a stable sort")),
            }
        }?;
        if !stats.is_null() {
            let gpu = done.gpu_time.map(|t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX));
            let out = BvkSortStats {
                struct_size: std::mem::size_of::<BvkSortStats>() as u32,
                passes: u32::try_from(done.passes).unwrap_or(u32::MAX),
                count: done.n as u64,
                has_gpu_time: if gpu.is_some() { vk::TRUE } else { vk::FALSE },
                gpu_time_ns: gpu.unwrap_or(0),
            };
            // SAFETY: checked above: a BvkSortStats of this size, writable (the caller's promise).
            unsafe { stats.write(out) };
        }
        Ok(())
    })
}

/// Whether `count` keys of `width` bytes at `keys` share bytes with `count` u32 values at `values`.
fn overlap(keys: usize, count: usize, width: usize, values: usize) -> bool {
    let key_end = keys.saturating_add(count.saturating_mul(width));
    let value_end = values.saturating_add(count.saturating_mul(4));
    count > 0 && keys < value_end && values < key_end
}

/// A caller's array as a slice: null only for an empty one, aligned to `T`, and within what one
/// slice may hold.
///
/// # Safety
/// `ptr` is null or points to `count` readable and writable `T`s that nothing else uses during the
/// call.
unsafe fn slice<'a, T>(ptr: *mut T, count: usize, what: &str) -> Result<&'a mut [T], Fail> {
    if count == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Fail::null(what));
    }
    if !ptr.is_aligned() {
        let message = format!("{what} ({ptr:p}) is not aligned to its {}-byte elements", std::mem::align_of::<T>());
        return Err(Fail::new(BVK_ERROR_BAD_ARRAY, message));
    }
    if count.checked_mul(std::mem::size_of::<T>()).is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(Fail::new(BVK_ERROR_TOO_LARGE, format!("{count} elements of {what} are more than memory holds")));
    }
    // SAFETY: non-null, aligned, within isize::MAX bytes, and the caller's promise of `count`
    // live elements used by nothing else.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, count) })
}

/// # Safety
/// As `bvk_sort`, `keys` holding `K`s.
unsafe fn sort<K: SortKey>(
    s: &mut Sorter,
    keys: *mut c_void,
    values: *mut u32,
    count: usize,
    order: Order,
) -> Result<SortStats, Fail> {
    // SAFETY: forwarded from the caller.
    let keys = unsafe { slice(keys.cast::<K>(), count, "keys") }?;
    if values.is_null() {
        return Ok(s.sort(keys, order)?);
    }
    // SAFETY: forwarded from the caller; `host_sort` checked that the arrays do not overlap.
    let values = unsafe { slice(values, count, "values") }?;
    Ok(s.sort_pairs(keys, values, order)?)
}

/// # Safety
/// As `bvk_sort_stable`, `keys` holding `K`s.
unsafe fn sort_stable<K: StableKey>(
    s: &mut Sorter,
    keys: *mut c_void,
    values: *mut u32,
    count: usize,
    order: Order,
) -> Result<SortStats, Fail> {
    // SAFETY: forwarded from the caller.
    let keys = unsafe { slice(keys.cast::<K>(), count, "keys") }?;
    // SAFETY: as above; `host_sort` checked that the arrays do not overlap.
    let values = unsafe { slice(values, count, "values") }?;
    Ok(s.sort_pairs_stable(keys, values, order)?)
}
