//! The only place that records Vulkan commands: the [`Encoder`] over a command buffer that
//! records a plan's passes, the barrier flavours between them, and the transfers and timestamps
//! around them.

use ash::vk;

use crate::abi::{DispatchRule, PushConstants, ARGS_PER_DISPATCH};
use crate::network::{Encoder, Pass};

use super::pipelines::{Kernels, ARGS_PUSH_HEAD, PUSH_BYTES};

/// How the barrier between two passes is expressed. Every flavour orders the same accesses:
/// compute-shader writes before later compute-shader reads and writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "study"), allow(dead_code))]
pub enum BarrierFlavor {
    /// `vkCmdPipelineBarrier` with one global `VkMemoryBarrier` (what sorts use).
    #[default]
    Memory,
    /// `vkCmdPipelineBarrier` with a `VkBufferMemoryBarrier` per buffer the passes touch.
    Buffer,
    /// `vkCmdPipelineBarrier2` (synchronization2) with one `VkMemoryBarrier2` naming the exact
    /// stage (compute shader) and accesses (shader storage write, read and write).
    Memory2,
}

#[cfg(feature = "study")]
impl BarrierFlavor {
    /// Every flavour.
    pub const ALL: [BarrierFlavor; 3] = [BarrierFlavor::Memory, BarrierFlavor::Buffer, BarrierFlavor::Memory2];

    /// A short name, as the `passes` command takes it.
    pub fn name(self) -> &'static str {
        match self {
            BarrierFlavor::Memory => "memory",
            BarrierFlavor::Buffer => "buffer",
            BarrierFlavor::Memory2 => "barrier2",
        }
    }
}

/// A barrier between passes, with what its flavour needs to be recorded.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "study"), allow(dead_code))]
pub(crate) enum PassBarrier<'a> {
    /// A global memory barrier.
    Memory,
    /// One buffer memory barrier per buffer, each over the whole buffer.
    Buffer(&'a [vk::Buffer]),
    /// A synchronization2 global memory barrier.
    Memory2(&'a ash::khr::synchronization2::Device),
}

impl Default for PassBarrier<'_> {
    /// The global memory barrier that every sort records unless a study asks for another.
    fn default() -> Self {
        PassBarrier::Memory
    }
}

impl PassBarrier<'_> {
    /// Records the barrier.
    pub fn record(&self, device: &ash::Device, cmd: vk::CommandBuffer) {
        match *self {
            PassBarrier::Memory => compute_barrier(device, cmd),
            PassBarrier::Buffer(buffers) => {
                let barriers: Vec<_> = buffers
                    .iter()
                    .map(|&buffer| {
                        vk::BufferMemoryBarrier::default()
                            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                            .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)
                            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                            .buffer(buffer)
                            .offset(0)
                            .size(vk::WHOLE_SIZE)
                    })
                    .collect();
                // SAFETY: `cmd` is recording outside a render pass; every buffer is a live buffer of
                // `device` (the sorter's own, alive until its submission is waited for).
                unsafe {
                    device.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::DependencyFlags::empty(),
                        &[],
                        &barriers,
                        &[],
                    )
                };
            }
            PassBarrier::Memory2(sync2) => {
                let memory = [vk::MemoryBarrier2::default()
                    .src_stage_mask(vk::PipelineStageFlags2::COMPUTE_SHADER)
                    .src_access_mask(vk::AccessFlags2::SHADER_STORAGE_WRITE)
                    .dst_stage_mask(vk::PipelineStageFlags2::COMPUTE_SHADER)
                    .dst_access_mask(vk::AccessFlags2::SHADER_STORAGE_READ | vk::AccessFlags2::SHADER_STORAGE_WRITE)];
                let dependency = vk::DependencyInfo::default().memory_barriers(&memory);
                // SAFETY: `sync2` was loaded for `device`, created with VK_KHR_synchronization2 and
                // its feature enabled (the context does so whenever it loads these commands);
                // `cmd` is recording outside a render pass.
                unsafe { sync2.cmd_pipeline_barrier2(cmd, &dependency) };
            }
        }
    }
}

/// Records into a Vulkan command buffer in the recording state.
pub(crate) struct VulkanEncoder<'a> {
    pub device: &'a ash::Device,
    pub cmd: vk::CommandBuffer,
    pub layout: vk::PipelineLayout,
    pub kernels: &'a Kernels,
    /// Where to write a timestamp at the end of each pass: query `first + index` of this pool.
    pub pass_timestamps: Option<(vk::QueryPool, u32)>,
    /// How the barrier between passes is recorded.
    pub barrier: PassBarrier<'a>,
    /// Independent arrays sorted side by side: the dispatches' y dimension (1 for one array).
    pub batches: u32,
    /// With a GPU-side count: how the passes after the first dispatch indirectly.
    pub indirect: Option<Indirect>,
}

/// The indirect dispatches of a sort with a GPU-side count. The first pass's dispatches are
/// direct; `dispatch_args` is recorded after them (`pass_done`), so that the tile sort launches
/// first and the small kernel runs beside it, and every later dispatch reads its slot.
pub(crate) struct Indirect {
    /// The binding's buffer of arguments, one 16-byte slot per indirect dispatch in recording
    /// order.
    pub buffer: vk::Buffer,
    /// `dispatch_args`, until it is recorded: while it is pending, dispatches are direct.
    pub pending: Option<PendingArgs>,
    /// The next indirect dispatch's slot.
    pub next_slot: u64,
    /// Whether a barrier has made the arguments visible to the indirect dispatches (the first
    /// barrier after `dispatch_args` does, together with the first pass's writes).
    pub visible: bool,
}

/// What `dispatch_args` is recorded with: its pipeline, and the plan's n, batches and rules.
pub(crate) struct PendingArgs {
    pub pipeline: vk::Pipeline,
    pub n: u32,
    pub batches: u32,
    pub rules: Vec<DispatchRule>,
}

impl Encoder for VulkanEncoder<'_> {
    fn bind_pass(&mut self, pass: &Pass) {
        // `SortRecorder::plan` refuses a plan with a pass whose pipeline was not made.
        bind_pipeline(self.device, self.cmd, self.kernels.pass_pipeline(pass).unwrap_or_default());
    }

    fn push_constants(&mut self, push: &PushConstants) {
        push_constants(self.device, self.cmd, self.layout, push);
    }

    fn dispatch(&mut self, groups: u32) {
        match &mut self.indirect {
            Some(indirect) if indirect.pending.is_none() => {
                // SAFETY: a compute pipeline and its descriptor set are bound; the buffer is the
                // binding's STORAGE | INDIRECT_BUFFER buffer, sized at bind for every dispatch a
                // plan of it records (the recorder checks before recording), its slots written by
                // `dispatch_args` and made visible by the barrier after the first pass
                // (`compute_barrier`), each within the limits (at most the dispatch's workgroups
                // for n, and the checked batches along y).
                unsafe {
                    self.device.cmd_dispatch_indirect(self.cmd, indirect.buffer, indirect.next_slot * ARGS_SLOT_BYTES)
                };
                indirect.next_slot += 1;
            }
            _ => dispatch_rows(self.device, self.cmd, groups, self.batches),
        }
    }

    fn compute_barrier(&mut self) {
        match &mut self.indirect {
            Some(indirect) if !indirect.visible => {
                args_barrier(self.device, self.cmd);
                indirect.visible = true;
            }
            _ => self.barrier.record(self.device, self.cmd),
        }
    }

    fn pass_done(&mut self, index: usize) {
        if let Some(args) = self.indirect.as_mut().and_then(|i| i.pending.take()) {
            bind_pipeline(self.device, self.cmd, args.pipeline);
            dispatch_args(self.device, self.cmd, self.layout, args.n, args.batches, &args.rules);
        }
        if let Some((pool, first)) = self.pass_timestamps {
            timestamp(self.device, self.cmd, vk::PipelineStageFlags::COMPUTE_SHADER, pool, first + index as u32);
        }
    }
}

/// Binds a compute pipeline of the sorter's (created on `device`, alive until the command buffer
/// has executed: the sorter owns both).
pub(crate) fn bind_pipeline(device: &ash::Device, cmd: vk::CommandBuffer, pipeline: vk::Pipeline) {
    // SAFETY: `cmd` is recording and `pipeline` is a live compute pipeline of `device`.
    unsafe { device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline) };
}

/// Sets the push constants of the sorter's pipeline layout.
pub(crate) fn push_constants(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    layout: vk::PipelineLayout,
    push: &PushConstants,
) {
    // SAFETY: the layout's one push-constant range covers the whole PushConstants struct for the
    // compute stage (see pipelines.rs).
    unsafe { device.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, bytemuck::bytes_of(push)) };
}

/// Dispatches `groups` workgroups along x.
#[cfg(feature = "study")]
pub(crate) fn dispatch(device: &ash::Device, cmd: vk::CommandBuffer, groups: u32) {
    dispatch_rows(device, cmd, groups, 1);
}

/// Dispatches `groups` workgroups along x in each of `rows` rows along y (one row per array of a
/// batch).
pub(crate) fn dispatch_rows(device: &ash::Device, cmd: vk::CommandBuffer, groups: u32, rows: u32) {
    // SAFETY: a compute pipeline and its descriptor set are bound; callers keep groups within
    // maxComputeWorkGroupCount[0] (record_passes and the probes split larger work) and rows within
    // maxComputeWorkGroupCount[1] (the recorder checks batches).
    unsafe { device.cmd_dispatch(cmd, groups, rows, 1) };
}

/// Bytes of one dispatch's slot of indirect arguments (x, y, z and a pad word).
pub(crate) const ARGS_SLOT_BYTES: u64 = 16;

/// Records `dispatch_args` for `rules` (its pipeline and the binding's set bound): the arguments
/// of indirect dispatch i into slot i, `ARGS_PER_DISPATCH` rules a workgroup. It needs no barrier
/// of its own: it is recorded after the first pass's dispatches and runs beside them (that pass
/// is dispatched directly), and the barrier after that pass ([`args_barrier`]) makes its writes
/// visible to the indirect reads. The previous sort's indirect reads of the slots come before
/// these writes through the barrier the caller records after that sort (its last writes are the
/// keys this one reads): a barrier's source stage `COMPUTE_SHADER` takes in the logically earlier
/// `DRAW_INDIRECT` stage.
pub(crate) fn dispatch_args(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    layout: vk::PipelineLayout,
    n: u32,
    batches: u32,
    rules: &[DispatchRule],
) {
    let head = ARGS_PUSH_HEAD * 4;
    let mut bytes = [0u8; PUSH_BYTES as usize];
    for (chunk, some) in rules.chunks(ARGS_PER_DISPATCH as usize).enumerate() {
        let words = [n, batches, some.len() as u32, chunk as u32 * ARGS_PER_DISPATCH];
        bytes[..head].copy_from_slice(bytemuck::cast_slice(&words));
        let body: &[u8] = bytemuck::cast_slice(some);
        bytes[head..head + body.len()].copy_from_slice(body);
        // SAFETY: the layout's push-constant range covers PUSH_BYTES, the head and
        // ARGS_PER_DISPATCH rules (see pipelines.rs).
        unsafe {
            device.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes[..head + body.len()])
        };
        dispatch_rows(device, cmd, 1, 1);
    }
}

/// The barrier after the first pass of a sort with a GPU-side count: the pass barrier, whose
/// destination also takes the indirect reads of the arguments `dispatch_args` wrote beside it.
pub(crate) fn args_barrier(device: &ash::Device, cmd: vk::CommandBuffer) {
    barrier(
        device,
        cmd,
        (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE),
        (
            vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::DRAW_INDIRECT,
            vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::INDIRECT_COMMAND_READ,
        ),
    );
}

/// Orders every compute-shader write recorded so far before the compute-shader reads and writes
/// recorded after it: the barrier between two passes.
pub(crate) fn compute_barrier(device: &ash::Device, cmd: vk::CommandBuffer) {
    barrier(
        device,
        cmd,
        (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE),
        (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE),
    );
}

/// Orders the copies that put a sort's input in place before its first pass reads and writes it.
pub(crate) fn input_barrier(device: &ash::Device, cmd: vk::CommandBuffer) {
    barrier(
        device,
        cmd,
        (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
        (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE),
    );
}

/// Copies a sort's result to staging: the last pass's writes before the `copies` read them, and
/// the copies before the host reads staging (after the fence wait).
pub(crate) fn download(device: &ash::Device, cmd: vk::CommandBuffer, copies: &[(vk::Buffer, vk::Buffer, u64)]) {
    barrier(
        device,
        cmd,
        (vk::PipelineStageFlags::COMPUTE_SHADER, vk::AccessFlags::SHADER_WRITE),
        (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_READ),
    );
    copy(device, cmd, copies);
    barrier(
        device,
        cmd,
        (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE),
        (vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ),
    );
}

/// One global memory barrier from (stage, access) to (stage, access).
pub(crate) fn barrier(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    src: (vk::PipelineStageFlags, vk::AccessFlags),
    dst: (vk::PipelineStageFlags, vk::AccessFlags),
) {
    let memory = vk::MemoryBarrier::default().src_access_mask(src.1).dst_access_mask(dst.1);
    // SAFETY: `cmd` is recording, outside a render pass; the stages are supported by a compute queue.
    unsafe { device.cmd_pipeline_barrier(cmd, src.0, dst.0, vk::DependencyFlags::empty(), &[memory], &[], &[]) };
}

/// Writes `word` into the first four bytes of `buffer`.
#[cfg(feature = "study")]
pub(crate) fn fill(device: &ash::Device, cmd: vk::CommandBuffer, buffer: vk::Buffer, word: u32) {
    // SAFETY: `cmd` is recording outside a render pass; `buffer` is live, made with TRANSFER_DST
    // usage and at least four bytes long (the sorter's count buffer).
    unsafe { device.cmd_fill_buffer(cmd, buffer, 0, 4, word) };
}

/// Copies `regions` of (source, destination, bytes) between buffers.
pub(crate) fn copy(device: &ash::Device, cmd: vk::CommandBuffer, regions: &[(vk::Buffer, vk::Buffer, u64)]) {
    for &(src, dst, size) in regions {
        let region = vk::BufferCopy { src_offset: 0, dst_offset: 0, size };
        // SAFETY: `cmd` is recording; both buffers were created with the transfer usages and hold
        // at least `size` bytes (the sorter sizes them before recording).
        unsafe { device.cmd_copy_buffer(cmd, src, dst, &[region]) };
    }
}

/// Binds the one descriptor set of the kernels.
pub(crate) fn bind_set(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    layout: vk::PipelineLayout,
    set: vk::DescriptorSet,
) {
    // SAFETY: `set` was allocated with the set layout `layout` was created from, and its
    // descriptors point at live buffers.
    unsafe { device.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]) };
}

/// Resets the first `count` queries of `pool`.
pub(crate) fn reset_queries(device: &ash::Device, cmd: vk::CommandBuffer, pool: vk::QueryPool, count: u32) {
    // SAFETY: `cmd` is recording outside a render pass and the pool holds `count` queries.
    unsafe { device.cmd_reset_query_pool(cmd, pool, 0, count) };
}

/// Writes timestamp `query` once every earlier command has finished `stage`.
pub(crate) fn timestamp(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    stage: vk::PipelineStageFlags,
    pool: vk::QueryPool,
    query: u32,
) {
    // SAFETY: the query was reset before this command buffer runs and the queue family supports
    // timestamps: the sorter creates its pool only then and resets its queries in this command
    // buffer or an earlier, completed submission; `SortRecorder::record_timed`'s caller promises
    // the same of its pool.
    unsafe { device.cmd_write_timestamp(cmd, stage, pool, query) };
}
