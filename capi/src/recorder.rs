//! `BvkRecorder`: `SortRecorder` on the caller's instance, device and buffers, loaded through the
//! caller's `vkGetInstanceProcAddr`, and its bindings.

use ash::vk;
use bvk::{BindDesc, BufferRegion, KeyKind, Order, RecorderDesc, SortBinding, SortRecorder};

use crate::status::{
    guard, parse_bool, parse_key_type, parse_key_width, parse_order, read_struct, BvkResult, Fail,
    BVK_ERROR_BAD_BINDING,
};
use crate::tuning::{tuning, BvkTuning};
use crate::{PFN_vkGetInstanceProcAddr, VkBool32, VkBuffer, VkCommandBuffer, VkDevice, VkDeviceSize, VkInstance};
use crate::{VkPhysicalDevice, VkPipelineCache, VkQueryPool};

/// Records sorts into the caller's command buffers (made by `bvk_create_recorder`).
pub struct BvkRecorder {
    recorder: SortRecorder,
    /// Every binding made, freed with the recorder: boxed, so that the pointers handed out stay
    /// put as the list grows.
    #[allow(clippy::vec_box)]
    bindings: Vec<Box<BvkBinding>>,
}

/// A bound set of regions (made by `bvk_bind`); it lives as long as its recorder.
pub struct BvkBinding(SortBinding);

/// How to make a recorder. Zero it, set `struct_size` and the handles, and the rest as you use it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BvkRecorderDesc {
    /// `sizeof(BvkRecorderDesc)`.
    pub struct_size: u32,
    /// The loader's (or volk's) `vkGetInstanceProcAddr`: every Vulkan function is loaded through it.
    pub get_instance_proc_addr: PFN_vkGetInstanceProcAddr,
    /// The instance, created with `apiVersion` 1.1 or later.
    pub instance: VkInstance,
    /// The physical device of `device`.
    pub physical_device: VkPhysicalDevice,
    /// The device the sorts run on; it needs a queue family with compute for them.
    pub device: VkDevice,
    /// A pipeline cache of `device` to make the pipelines through, or `VK_NULL_HANDLE`. `bvk_bind`
    /// uses it from several threads at once: it must be internally synchronised (made without
    /// `VK_PIPELINE_CACHE_CREATE_EXTERNALLY_SYNCHRONIZED_BIT`).
    pub pipeline_cache: VkPipelineCache,
    /// The most bindings the recorder makes (each one descriptor set); 0 takes 16.
    pub max_bindings: u32,
    /// `VK_TRUE` where `device` was created with `shaderInt16` enabled: tiles of u32 pairs may
    /// then hold 16-bit origins in place of their values.
    pub shader_int16: VkBool32,
    /// `VK_TRUE` where `device` was created with `VK_EXT_subgroup_size_control` and its
    /// `computeFullSubgroups` feature enabled: the tile sort then asks for full subgroups.
    pub full_subgroups: VkBool32,
    /// The knobs; zeroed, each takes its default.
    pub tuning: BvkTuning,
}

/// A region of one of the caller's buffers, made with `VK_BUFFER_USAGE_STORAGE_BUFFER_BIT`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BvkBufferRegion {
    /// The buffer; `VK_NULL_HANDLE` leaves an optional region out.
    pub buffer: VkBuffer,
    /// Where the region starts, in bytes: a multiple of `minStorageBufferOffsetAlignment`.
    pub offset: VkDeviceSize,
    /// Its length in bytes: at least the capacity times the element's size (4 for the count).
    pub size: VkDeviceSize,
}

/// What `bvk_bind` binds. Zero it, set `struct_size`, `keys` and `capacity`, and the rest as you use it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BvkBindDesc {
    /// `sizeof(BvkBindDesc)`.
    pub struct_size: u32,
    /// The keys: 4 bytes each, or 8 with `BVK_KEY_WIDTH_64`.
    pub keys: BvkBufferRegion,
    /// The values (`uint32_t`, one per key) of key+value sorts; a null `buffer` sorts keys alone.
    pub values: BvkBufferRegion,
    /// A `uint32_t` element count written on the GPU before the sort runs; a null `buffer` takes
    /// the `n` of each record call alone. Each sort takes min(count, n) elements.
    pub count: BvkBufferRegion,
    /// The most elements any sort through the binding takes (the regions are checked for it and
    /// the pipelines made for it).
    pub capacity: u32,
    /// `BVK_KEY_WIDTH_32` (0) or `BVK_KEY_WIDTH_64` (1): each width has its own kernels.
    pub key_width: u32,
    /// `VK_TRUE` where sorts through it may be batched (`bvk_cmd_sort_batches` with more than one
    /// array); a binding with a `count` may be batched anyway.
    pub batched: VkBool32,
}

impl BvkRecorder {
    /// The binding `binding` points to, if it is one of this recorder's.
    fn binding(&self, binding: *const BvkBinding) -> Result<&SortBinding, Fail> {
        let found = self.bindings.iter().position(|b| std::ptr::eq(&**b, binding));
        found.map(|i| &self.bindings[i].0).ok_or_else(|| not_ours(binding))
    }
}

/// The binding of `bindings` that `binding` points to: the pointer is compared with each, never
/// followed, so a stranger's or a dangling one is an error, not a crash.
fn find(bindings: &mut [Box<BvkBinding>], binding: *const BvkBinding) -> Result<&mut BvkBinding, Fail> {
    bindings.iter_mut().map(|b| &mut **b).find(|b| std::ptr::eq(&**b, binding)).ok_or_else(|| not_ours(binding))
}

fn not_ours(binding: *const BvkBinding) -> Fail {
    if binding.is_null() {
        return Fail::null("binding");
    }
    let message = format!("binding {binding:p} was not made by this recorder's bvk_bind");
    Fail::new(BVK_ERROR_BAD_BINDING, message)
}

/// The recorder behind a caller's pointer.
///
/// # Safety
/// `recorder` is null or was made by `bvk_create_recorder` and not destroyed, and no other call
/// uses it at the same time.
unsafe fn recordermut<'a>(recorder: *mut BvkRecorder) -> Result<&'a mut BvkRecorder, Fail> {
    // SAFETY: the caller's promise: null or a live recorder used by this call alone.
    unsafe { recorder.as_mut() }.ok_or_else(|| Fail::null("recorder"))
}

fn region(r: BvkBufferRegion) -> Option<BufferRegion> {
    (r.buffer != vk::Buffer::null()).then_some(BufferRegion { buffer: r.buffer, offset: r.offset, size: r.size })
}

/// A binding's description, checked.
///
/// # Safety
/// As `read_struct`.
unsafe fn bind_desc(desc: *const BvkBindDesc) -> Result<BindDesc, Fail> {
    // SAFETY: forwarded from the caller.
    let d = unsafe { read_struct(desc, "desc") }?;
    Ok(BindDesc {
        // A null keys buffer is the library's error, which names the region.
        keys: BufferRegion { buffer: d.keys.buffer, offset: d.keys.offset, size: d.keys.size },
        values: region(d.values),
        count: region(d.count),
        capacity: d.capacity,
        key_width: parse_key_width(d.key_width)?,
        batched: parse_bool(d.batched, "batched")?,
    })
}

/// Makes a recorder on the caller's device: its layouts and a descriptor pool (pipelines are made
/// by `bvk_bind`). The instance, physical device and device are the caller's and are never
/// destroyed by the recorder.
///
/// # Safety
/// `desc` is null or points to a `BvkRecorderDesc` whose `struct_size` is set; its handles are
/// live, the physical device is the instance's and the device was made from it, and all three
/// outlive the recorder; `get_instance_proc_addr` is the instance's loader's. `recorder` is null
/// or points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn bvk_create_recorder(
    desc: *const BvkRecorderDesc,
    recorder: *mut *mut BvkRecorder,
) -> BvkResult {
    guard(|| {
        // SAFETY: the caller's promise on `desc`.
        let d = unsafe { read_struct(desc, "desc") }?;
        if recorder.is_null() {
            return Err(Fail::null("recorder"));
        }
        let get_instance_proc_addr =
            d.get_instance_proc_addr.ok_or_else(|| Fail::null("desc->get_instance_proc_addr"))?;
        if d.instance == vk::Instance::null() {
            return Err(Fail::null("desc->instance"));
        }
        if d.physical_device == vk::PhysicalDevice::null() {
            return Err(Fail::null("desc->physical_device"));
        }
        if d.device == vk::Device::null() {
            return Err(Fail::null("desc->device"));
        }
        // Field by field: a build of the workspace's tests gives RecorderDesc its test-hook fields.
        let mut rust_desc = RecorderDesc::default();
        if d.max_bindings != 0 {
            rust_desc.max_bindings = d.max_bindings;
        }
        rust_desc.pipeline_cache = d.pipeline_cache;
        rust_desc.shader_int16 = parse_bool(d.shader_int16, "desc->shader_int16")?;
        rust_desc.full_subgroups = parse_bool(d.full_subgroups, "desc->full_subgroups")?;
        rust_desc.tuning = tuning(&d.tuning, "desc->tuning")?;
        // SAFETY: the caller vouches for the loader's function, which stays valid as long as the
        // instance it serves.
        let entry = unsafe { ash::Entry::from_static_fn(ash::StaticFn { get_instance_proc_addr }) };
        // SAFETY: a live instance of that loader (the caller's promise).
        let instance = unsafe { ash::Instance::load(entry.static_fn(), d.instance) };
        // SAFETY: a live device made from that instance (the caller's promise).
        let device = unsafe { ash::Device::load(instance.fp_v1_0(), d.device) };
        // SAFETY: the caller promises the physical device is the instance's, the device was made
        // from it, and all three outlive the recorder.
        let made = unsafe { SortRecorder::new(&instance, d.physical_device, &device, &rust_desc) }?;
        let boxed = Box::new(BvkRecorder { recorder: made, bindings: Vec::new() });
        // SAFETY: checked non-null above; the caller's promise of writable storage.
        unsafe { recorder.write(Box::into_raw(boxed)) };
        Ok(())
    })
}

/// Destroys a recorder, its bindings and what it made on the device; null does nothing.
///
/// # Safety
/// `recorder` is null or a live recorder that no call is using, and the device has finished every
/// command buffer its sorts were recorded into.
#[no_mangle]
pub unsafe extern "C" fn bvk_destroy_recorder(recorder: *mut BvkRecorder) {
    if recorder.is_null() {
        return;
    }
    // The status has nowhere to go: a panic while dropping is caught and the message kept.
    guard(|| {
        // SAFETY: made by Box::into_raw in bvk_create_recorder, and not destroyed (the caller's promise).
        drop(unsafe { Box::from_raw(recorder) });
        Ok(())
    });
}

/// Binds a keys region, optionally a values region and a GPU-side count, for sorts of up to
/// `capacity` elements: checks each region against the device's limits, makes the pipelines those
/// sorts run (at load time: this is where the driver compiles them) and writes one descriptor set.
///
/// # Safety
/// `recorder` is a live recorder that no other call is using; `desc` is null or points to a
/// `BvkBindDesc` whose `struct_size` is set; its buffers are the recorder's device's and outlive
/// every command buffer sorts through the binding are recorded into; `binding` is null or points
/// to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn bvk_bind(
    recorder: *mut BvkRecorder,
    desc: *const BvkBindDesc,
    binding: *mut *mut BvkBinding,
) -> BvkResult {
    guard(|| {
        // SAFETY: the caller's promise on `recorder`.
        let r = unsafe { recordermut(recorder) }?;
        // SAFETY: the caller's promise on `desc`.
        let desc = unsafe { bind_desc(desc) }?;
        if binding.is_null() {
            return Err(Fail::null("binding"));
        }
        let mut made = Box::new(BvkBinding(r.recorder.bind(&desc)?));
        let raw: *mut BvkBinding = &mut *made;
        r.bindings.push(made);
        // SAFETY: checked non-null above; the caller's promise of writable storage.
        unsafe { binding.write(raw) };
        Ok(())
    })
}

/// Points a binding at new regions (a resized buffer, say), with a new capacity or key width if
/// `desc` says so, keeping its descriptor set: `bvk_bind`'s checks and errors, and on an error the
/// binding stays as it was.
///
/// # Safety
/// As `bvk_bind`, and no command buffer recorded with `binding` is pending or still recording.
#[no_mangle]
pub unsafe extern "C" fn bvk_rebind(
    recorder: *mut BvkRecorder,
    binding: *mut BvkBinding,
    desc: *const BvkBindDesc,
) -> BvkResult {
    guard(|| {
        // SAFETY: the caller's promise on `recorder`.
        let r = unsafe { recordermut(recorder) }?;
        // SAFETY: the caller's promise on `desc`.
        let desc = unsafe { bind_desc(desc) }?;
        let bound = find(&mut r.bindings, binding)?;
        // SAFETY: the caller promises nothing pending or recording uses the binding.
        unsafe { r.recorder.rebind(&mut bound.0, &desc) }?;
        Ok(())
    })
}

/// Records a sort of the first `n` elements of the binding's regions into `cmd` (with a GPU-side
/// count, of min(count, n)). Nothing is recorded for n < 2.
///
/// # Safety
/// `recorder` is a live recorder that no call is binding with, destroying or rebinding at the same
/// time; `cmd` is a command buffer of its device in the recording state, outside a render pass, of a
/// queue family with compute. The contract in the header's opening comment applies.
#[no_mangle]
pub unsafe extern "C" fn bvk_cmd_sort(
    recorder: *const BvkRecorder,
    cmd: VkCommandBuffer,
    binding: *const BvkBinding,
    n: u32,
    key_type: u32,
    order: u32,
) -> BvkResult {
    // SAFETY: forwarded from the caller.
    unsafe { record(recorder, cmd, binding, n, 1, key_type, order, None) }
}

/// Records sorts of `batches` independent arrays of `n` elements laid end to end in the binding's
/// regions (array b holds elements b*n to b*n + n - 1), as one sequence of passes. `n * batches`
/// fits the capacity; more than one array needs a binding made `batched` or with a count.
///
/// # Safety
/// As `bvk_cmd_sort`.
#[no_mangle]
pub unsafe extern "C" fn bvk_cmd_sort_batches(
    recorder: *const BvkRecorder,
    cmd: VkCommandBuffer,
    binding: *const BvkBinding,
    n: u32,
    batches: u32,
    key_type: u32,
    order: u32,
) -> BvkResult {
    // SAFETY: forwarded from the caller.
    unsafe { record(recorder, cmd, binding, n, batches, key_type, order, None) }
}

/// `bvk_cmd_sort` with a timestamp after each pass: query `first_query + i` of `query_pool` after
/// pass i (`bvk_sort_passes` gives how many).
///
/// # Safety
/// As `bvk_cmd_sort`, and `query_pool` is a `VK_QUERY_TYPE_TIMESTAMP` pool of the device with at
/// least `first_query` + passes queries, reset before the command buffer runs, on a queue family
/// with `timestampValidBits` above 0.
#[no_mangle]
pub unsafe extern "C" fn bvk_cmd_sort_timed(
    recorder: *const BvkRecorder,
    cmd: VkCommandBuffer,
    binding: *const BvkBinding,
    n: u32,
    key_type: u32,
    order: u32,
    query_pool: VkQueryPool,
    first_query: u32,
) -> BvkResult {
    if query_pool == vk::QueryPool::null() {
        return guard(|| Err(Fail::null("query_pool")));
    }
    // SAFETY: forwarded from the caller.
    unsafe { record(recorder, cmd, binding, n, 1, key_type, order, Some((query_pool, first_query))) }
}

/// The passes a sort of `n` elements of `key_type` in `order` through `binding` records (0 for
/// n < 2): the queries `bvk_cmd_sort_timed` writes. Fails as that sort would.
///
/// # Safety
/// `recorder` as for `bvk_cmd_sort`; `passes` is null or points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn bvk_sort_passes(
    recorder: *const BvkRecorder,
    binding: *const BvkBinding,
    n: u32,
    key_type: u32,
    order: u32,
    passes: *mut u32,
) -> BvkResult {
    guard(|| {
        // SAFETY: the caller's promise on `recorder`.
        let r = unsafe { recorder.as_ref() }.ok_or_else(|| Fail::null("recorder"))?;
        let (kind, order) = (parse_key_type(key_type)?, parse_order(order)?);
        let b = r.binding(binding)?;
        if passes.is_null() {
            return Err(Fail::null("passes"));
        }
        let count = r.recorder.passes(b, n, kind, order)?;
        // SAFETY: checked non-null; the caller's promise of a writable u32. A plan's passes fit.
        unsafe { passes.write(count as u32) };
        Ok(())
    })
}

/// What the three record calls share.
///
/// # Safety
/// As `bvk_cmd_sort`, and `timed` as `bvk_cmd_sort_timed` asks.
#[allow(clippy::too_many_arguments)]
unsafe fn record(
    recorder: *const BvkRecorder,
    cmd: VkCommandBuffer,
    binding: *const BvkBinding,
    n: u32,
    batches: u32,
    key_type: u32,
    order: u32,
    timed: Option<(vk::QueryPool, u32)>,
) -> BvkResult {
    guard(|| {
        // SAFETY: the caller's promise on `recorder`.
        let r = unsafe { recorder.as_ref() }.ok_or_else(|| Fail::null("recorder"))?;
        if cmd == vk::CommandBuffer::null() {
            return Err(Fail::null("cmd"));
        }
        let (kind, order) = (parse_key_type(key_type)?, parse_order(order)?);
        let b = r.binding(binding)?;
        let rec = &r.recorder;
        // SAFETY: the caller's promises on `cmd`, the contract and the query pool.
        unsafe {
            match timed {
                Some((pool, first)) => rec.record_timed(cmd, b, n, kind, order, pool, first),
                None if batches == 1 => rec.record_kind(cmd, b, n, kind, order),
                None => record_batches(rec, cmd, b, n, batches, kind, order),
            }
        }?;
        Ok(())
    })
}

/// `SortRecorder::record_batches` with the key type as a value.
///
/// # Safety
/// As `SortRecorder::record_batches`.
unsafe fn record_batches(
    r: &SortRecorder,
    cmd: vk::CommandBuffer,
    b: &SortBinding,
    n: u32,
    batches: u32,
    kind: KeyKind,
    order: Order,
) -> bvk::Result<bvk::Recorded> {
    // SAFETY: forwarded from the caller.
    unsafe {
        match kind {
            KeyKind::U32 => r.record_batches::<u32>(cmd, b, n, batches, order),
            KeyKind::I32 => r.record_batches::<i32>(cmd, b, n, batches, order),
            KeyKind::F32 => r.record_batches::<f32>(cmd, b, n, batches, order),
            KeyKind::U64 => r.record_batches::<u64>(cmd, b, n, batches, order),
            KeyKind::I64 => r.record_batches::<i64>(cmd, b, n, batches, order),
            KeyKind::F64 => r.record_batches::<f64>(cmd, b, n, batches, order),
        }
    }
}
