//! Device memory the recorder owns itself: a small buffer made with the device alone, for what
//! its bindings need beyond the caller's regions. Destroys what it created and nothing else.

use ash::vk;

use crate::error::{Error, Result};

/// A buffer and its own memory allocation.
pub(crate) struct OwnBuffer {
    device: ash::Device,
    pub buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

impl OwnBuffer {
    /// A buffer of `size` bytes for `usage` in the first memory type that takes it, preferring
    /// device-local memory.
    pub fn new(
        device: &ash::Device,
        types: &vk::PhysicalDeviceMemoryProperties,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<OwnBuffer> {
        let mut own =
            OwnBuffer { device: device.clone(), buffer: vk::Buffer::null(), memory: vk::DeviceMemory::null() };
        let info = vk::BufferCreateInfo::default().size(size).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: `device` is live and the info complete; the buffer is stored at once, so Drop
        // destroys it if a later step fails.
        own.buffer = unsafe { device.create_buffer(&info, None) }.map_err(Error::vk("vkCreateBuffer"))?;
        // SAFETY: the buffer was just created on `device`.
        let needs = unsafe { device.get_buffer_memory_requirements(own.buffer) };
        let fits = |i: usize| needs.memory_type_bits & (1 << i) != 0;
        let local = |i: usize| types.memory_types[i].property_flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL);
        let count = types.memory_type_count as usize;
        let index = (0..count)
            .find(|&i| fits(i) && local(i))
            .or_else(|| (0..count).find(|&i| fits(i)))
            .ok_or(Error::Unsupported { what: "make a storage buffer", fix: "it offers no memory type for one" })?;
        let info = vk::MemoryAllocateInfo::default().allocation_size(needs.size).memory_type_index(index as u32);
        // SAFETY: the type index is one the buffer's requirements allow; stored at once, as above.
        own.memory = unsafe { device.allocate_memory(&info, None) }.map_err(Error::vk("vkAllocateMemory"))?;
        // SAFETY: fresh memory of the right type and size, bound once, at offset 0.
        unsafe { device.bind_buffer_memory(own.buffer, own.memory, 0) }.map_err(Error::vk("vkBindBufferMemory"))?;
        Ok(own)
    }
}

impl std::fmt::Debug for OwnBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnBuffer").field("buffer", &self.buffer).finish_non_exhaustive()
    }
}

impl Drop for OwnBuffer {
    fn drop(&mut self) {
        // SAFETY: both were created on `device` by `new` (or are null, which destroy and free
        // ignore); the owner lets every command buffer that uses the buffer finish first.
        unsafe {
            self.device.destroy_buffer(self.buffer, None);
            self.device.free_memory(self.memory, None);
        }
    }
}
