//! Everything that touches Vulkan objects for the kernels: the embedded SPIR-V, the pipelines
//! made from it, and the recording of commands.

pub(crate) mod memory;
pub(crate) mod pipelines;
pub(crate) mod record;
pub(crate) mod shaders;
