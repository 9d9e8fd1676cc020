//! Layouts and compute pipelines of the four kernels, specialised for one binding's shape. Each
//! object destroys what it created and nothing else.

use std::collections::hash_map::{Entry, HashMap};

use ash::vk;

use crate::abi::{spec, DispatchRule, Form, KeyWidth, PassKind, Payload, PushConstants, ARGS_PER_DISPATCH};
use crate::device::DeviceLimits;
use crate::error::{Error, Result};
use crate::network::Pass;
use crate::segment::Segment;
use crate::tuning::{small_slots, small_tile_sort, BindingShape, MAX_FUSED};

use super::shaders::{chain_module, copy_probe, dispatch_args_module, empty_probe, module};

/// The descriptor set layout (binding 0: keys, binding 1: values, binding 2: the GPU-side count,
/// binding 3: the indirect arguments, all storage buffers) and the pipeline layout with the
/// push-constant range, shared by every kernel and `dispatch_args`. Every sorting kernel declares
/// the count's binding; its builds of keys alone do not read binding 1; only `dispatch_args`
/// reads binding 3.
pub(crate) struct Layouts {
    device: ash::Device,
    pub set_layout: vk::DescriptorSetLayout,
    pub pipeline_layout: vk::PipelineLayout,
}

impl Layouts {
    pub fn new(device: &ash::Device) -> Result<Layouts> {
        let mut layouts = Layouts {
            device: device.clone(),
            set_layout: vk::DescriptorSetLayout::null(),
            pipeline_layout: vk::PipelineLayout::null(),
        };
        let bindings = [0, 1, 2, 3].map(|binding| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        });
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: `device` is a live device and `info` is fully initialised.
        layouts.set_layout = unsafe { device.create_descriptor_set_layout(&info, None) }
            .map_err(Error::vk("vkCreateDescriptorSetLayout"))?;
        let ranges =
            [vk::PushConstantRange { stage_flags: vk::ShaderStageFlags::COMPUTE, offset: 0, size: PUSH_BYTES }];
        let set_layouts = [layouts.set_layout];
        let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&ranges);
        // SAFETY: the set layout was just created on `device`; PUSH_BYTES is within the 128-byte
        // minimum of maxPushConstantsSize (checked by a test).
        layouts.pipeline_layout =
            unsafe { device.create_pipeline_layout(&info, None) }.map_err(Error::vk("vkCreatePipelineLayout"))?;
        Ok(layouts)
    }
}

/// Bytes of push constants the layout holds: the sorting kernels' block, or `dispatch_args`'s
/// (four words and its rules), whichever is larger.
pub(crate) const PUSH_BYTES: u32 = {
    let sort = std::mem::size_of::<PushConstants>();
    let args = ARGS_PUSH_HEAD * 4 + ARGS_PER_DISPATCH as usize * std::mem::size_of::<DispatchRule>();
    (if sort > args { sort } else { args }) as u32
};

/// The words `dispatch_args` takes before its rules: n, batches, rules, first.
pub(crate) const ARGS_PUSH_HEAD: usize = 4;

impl Drop for Layouts {
    fn drop(&mut self) {
        // SAFETY: both were created on `device` by `new` (or are null, which destroy ignores), and
        // the pipelines and descriptor sets that use them are destroyed first by their owners.
        unsafe {
            self.device.destroy_pipeline_layout(self.pipeline_layout, None);
            self.device.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// What selects a set of kernels: the binding's shape, key width, and whether its sorts are
/// batched or read a GPU-side count (specialization constants of the same modules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelKey {
    /// Payload, geometry, local workgroup and chunk.
    pub shape: BindingShape,
    /// The key width.
    pub width: KeyWidth,
    /// Workgroup row y sorts array y.
    pub batched: bool,
    /// Each array sorts min(count, n) elements, the count read from binding 2.
    pub counted: bool,
}

/// The specialization constants of a pipeline, by id ([`spec`]).
#[derive(Clone, Copy)]
struct Constants([u32; spec::COUNT]);

impl Constants {
    /// The constants every kernel of `key` shares, with `wg` invocations and chunks (or
    /// global passes) of `fused` substages.
    fn new(key: &KernelKey, wg: u32, fused: u32) -> Constants {
        let mut c = [0; spec::COUNT];
        c[spec::WG_SIZE] = wg;
        c[spec::TILE] = key.shape.geometry.tile();
        c[spec::FUSED] = fused;
        c[spec::BATCHED] = u32::from(key.batched || key.counted);
        c[spec::COUNTED] = u32::from(key.counted);
        Constants(c)
    }

    fn with(mut self, id: usize, value: u32) -> Constants {
        self.0[id] = value;
        self
    }
}

/// The chain codes ([`crate::segment::SegmentChunk::chain_code`]) of a segment pass's chunks on
/// local chunks of `chunk` substages.
pub(crate) fn shape_chain(chunk: u32, dir: u32, shape: u32) -> Vec<u32> {
    let push = PushConstants { dir, shape, ..PushConstants::default() };
    Segment::decode(&push).chunks(chunk).iter().map(|c| c.chain_code(chunk)).collect()
}

/// The constants of the shaped segment_merge for the pass of push constants `dir` and `shape`:
/// the shape and its chunks ([`Segment::chunks`]); None for a shape of more chunks than the
/// shaped build holds.
fn shaped_constants(base: Constants, chunk: u32, dir: u32, shape: u32) -> Option<Constants> {
    let push = PushConstants { dir, shape, ..PushConstants::default() };
    let chunks = Segment::decode(&push).chunks(chunk);
    if chunks.len() > spec::SHAPE_CHUNKS {
        return None;
    }
    let mut c = base.with(spec::SHAPE_LOG_BLOCK, shape).with(spec::SHAPE_DIR, dir);
    for (i, chunk) in chunks.iter().enumerate() {
        c = c.with(spec::SHAPE_CHUNK0 + i, chunk.encode());
    }
    Some(c)
}

/// The compute pipelines of one binding shape: the two local kernels, and global_merge once per
/// number of fused substages (1..=geometry.fused); segment_merge, and the tile sort and
/// segment_merge whose workgroups loop, once a binding needs them ([`Kernels::make_segment_merge`],
/// [`Kernels::make_looping`]).
pub(crate) struct Kernels {
    device: ash::Device,
    tile_sort: vk::Pipeline,
    /// The looping build of tile_sort, null until made.
    tile_sort_looping: vk::Pipeline,
    local_merge: vk::Pipeline,
    /// segment_merge, null until made.
    segment_merge: vk::Pipeline,
    /// The looping build of segment_merge, null until made.
    segment_merge_looping: vk::Pipeline,
    /// The shaped segment_merge, one pipeline per shape (the pass's `dir` and `shape`).
    segment_shaped: HashMap<(u32, u32), vk::Pipeline>,
    /// local_merge specialised for windows of two and of four tiles (`WINDOW` = 1, 2).
    local_merge_window: [vk::Pipeline; 2],
    global_merge: [vk::Pipeline; MAX_FUSED as usize],
    /// What they were made for.
    pub key: KernelKey,
    /// The flags every pipeline is created with (empty but for `examples/kernel_stats.rs`).
    flags: vk::PipelineCreateFlags,
}

impl Kernels {
    pub fn new(
        device: &ash::Device,
        layouts: &Layouts,
        limits: &DeviceLimits,
        key: KernelKey,
        cache: vk::PipelineCache,
        flags: vk::PipelineCreateFlags,
    ) -> Result<Kernels> {
        let BindingShape { payload, geometry, local_wg, chunk } = key.shape;
        let width = key.width;
        let mut kernels = Kernels {
            device: device.clone(),
            tile_sort: vk::Pipeline::null(),
            tile_sort_looping: vk::Pipeline::null(),
            local_merge: vk::Pipeline::null(),
            segment_merge: vk::Pipeline::null(),
            segment_merge_looping: vk::Pipeline::null(),
            segment_shaped: HashMap::new(),
            local_merge_window: [vk::Pipeline::null(); 2],
            global_merge: [vk::Pipeline::null(); MAX_FUSED as usize],
            key,
            flags,
        };
        let layout = layouts.pipeline_layout;
        let local = Constants::new(&key, local_wg, chunk);
        // The SMALL build runs the tile on its own number of invocations.
        let tile = geometry.tile();
        let small_form = match small_slots(payload, tile) {
            2 if payload == Payload::Keys => Form::SmallTwoSlots,
            _ => Form::Small,
        };
        let small = module(PassKind::TileSort, payload, width, small_form)
            .filter(|_| small_tile_sort(limits, payload, width, tile, local_wg, chunk))
            .map(|m| m.words())
            .transpose()?;
        kernels.tile_sort = match small {
            Some(code) => {
                let wg = tile / small_slots(payload, tile);
                create_pipeline(device, layout, cache, flags, code, &Constants::new(&key, wg, chunk))?
            }
            None => {
                create_pipeline(device, layout, cache, flags, required(PassKind::TileSort, payload, width)?, &local)?
            }
        };
        let merge = required(PassKind::LocalMerge, payload, width)?;
        kernels.local_merge = create_pipeline(device, layout, cache, flags, merge, &local)?;
        for w in 1..=2 {
            kernels.local_merge_window[w as usize - 1] =
                create_pipeline(device, layout, cache, flags, merge, &local.with(spec::WINDOW, w))?;
        }
        let global = required(PassKind::GlobalMerge, payload, width)?;
        for m in 1..=geometry.fused {
            let constants = Constants::new(&key, geometry.global_wg, m);
            kernels.global_merge[m as usize - 1] = create_pipeline(device, layout, cache, flags, global, &constants)?;
        }
        Ok(kernels)
    }

    /// The local kernels' constants.
    fn local_constants(&self) -> Constants {
        Constants::new(&self.key, self.key.shape.local_wg, self.key.shape.chunk)
    }

    /// Makes the build of `kind` (the tile sort or segment_merge) whose workgroups loop over tiles
    /// or cosets, for plans whose pass of that kind has fewer workgroups than tiles, unless it is
    /// made already; other kinds have no such build.
    pub fn make_looping(&mut self, kind: PassKind, layouts: &Layouts, cache: vk::PipelineCache) -> Result<()> {
        let local = self.local_constants();
        let (payload, width) = (self.key.shape.payload, self.key.width);
        let slot = match kind {
            PassKind::TileSort => &mut self.tile_sort_looping,
            PassKind::SegmentMerge => &mut self.segment_merge_looping,
            PassKind::GlobalMerge | PassKind::LocalMerge => return Ok(()),
        };
        if *slot == vk::Pipeline::null() {
            let code =
                module(kind, payload, width, Form::Looping).ok_or_else(|| missing(kind, payload, width))?.words()?;
            *slot = create_pipeline(&self.device, layouts.pipeline_layout, cache, self.flags, code, &local)?;
        }
        Ok(())
    }

    /// Makes segment_merge, for segmented plans, unless it is made already.
    pub fn make_segment_merge(&mut self, layouts: &Layouts, cache: vk::PipelineCache) -> Result<()> {
        if self.segment_merge == vk::Pipeline::null() {
            let (payload, width) = (self.key.shape.payload, self.key.width);
            let code = required(PassKind::SegmentMerge, payload, width)?;
            let local = self.local_constants();
            self.segment_merge =
                create_pipeline(&self.device, layouts.pipeline_layout, cache, self.flags, code, &local)?;
        }
        Ok(())
    }

    /// Makes a shaped pipeline of segment_merge for every shape (`dir`, `shape`) not made yet: on
    /// the module of the shape's chain of chunks where there is one, else, with `every`, on the
    /// shaped build (unoptimised), else none. A segment pass of one coset per workgroup whose
    /// shape has a pipeline runs it ([`Kernels::pass_pipeline`]); the others run the plain build.
    pub fn make_shaped(
        &mut self,
        shapes: impl IntoIterator<Item = (u32, u32)>,
        every: bool,
        layouts: &Layouts,
        cache: vk::PipelineCache,
    ) -> Result<()> {
        let (payload, width, chunk) = (self.key.shape.payload, self.key.width, self.key.shape.chunk);
        let Some(any_chain) = module(PassKind::SegmentMerge, payload, width, Form::Shaped) else {
            return Ok(());
        };
        let local = self.local_constants();
        for (dir, shape) in shapes {
            if let Entry::Vacant(slot) = self.segment_shaped.entry((dir, shape)) {
                // A shape of more chunks runs on the plain build.
                let Some(constants) = shaped_constants(local, chunk, dir, shape) else { continue };
                let code = match chain_module(payload, width, &shape_chain(chunk, dir, shape)) {
                    Some(module) => module.words()?,
                    None if every => any_chain.words()?,
                    None => continue,
                };
                slot.insert(create_pipeline(
                    &self.device,
                    layouts.pipeline_layout,
                    cache,
                    self.flags,
                    code,
                    &constants,
                )?);
            }
        }
        Ok(())
    }

    /// The pipeline a pass runs: for a segment pass of one coset per workgroup, its shape's
    /// pipeline where one is made, else [`Kernels::pipeline`].
    pub fn pass_pipeline(&self, pass: &Pass) -> vk::Pipeline {
        if pass.kind == PassKind::SegmentMerge && pass.substages == 0 {
            if let Some(p) = self.segment_shaped.get(&(pass.push.dir, pass.push.shape)) {
                return *p;
            }
        }
        self.pipeline(pass.kind, pass.substages)
    }

    /// The pipeline of a kernel; for `GlobalMerge`, the one fusing `substages`; for `LocalMerge`
    /// with `substages` w = 1 or 2, the one taking windows of 2^w tiles; for `TileSort` and
    /// `SegmentMerge` with `substages` 1, the looping one (made by [`Kernels::make_looping`]).
    pub fn pipeline(&self, kind: PassKind, substages: u32) -> vk::Pipeline {
        match kind {
            PassKind::TileSort if substages > 0 => self.tile_sort_looping,
            PassKind::TileSort => self.tile_sort,
            PassKind::LocalMerge if substages > 0 => self.local_merge_window[(substages.min(2) - 1) as usize],
            PassKind::LocalMerge => self.local_merge,
            PassKind::GlobalMerge => self.global_merge[(substages.clamp(1, MAX_FUSED) - 1) as usize],
            PassKind::SegmentMerge if substages > 0 => self.segment_merge_looping,
            PassKind::SegmentMerge => self.segment_merge,
        }
    }
}

impl Kernels {
    /// Every pipeline made, with a label and its workgroup size, tile and fusion: what
    /// `examples/kernel_stats.rs` reports the driver's statistics of.
    #[cfg(feature = "test-hooks")]
    pub fn labelled(&self) -> Vec<(String, vk::Pipeline)> {
        let mut list = vec![("tile_sort".to_string(), self.tile_sort), ("local_merge".to_string(), self.local_merge)];
        list.extend((1..=2).map(|w| (format!("local_merge window {}", 1 << w), self.local_merge_window[w - 1])));
        list.push(("tile_sort looping".to_string(), self.tile_sort_looping));
        list.push(("segment_merge".to_string(), self.segment_merge));
        list.push(("segment_merge looping".to_string(), self.segment_merge_looping));
        let mut shaped: Vec<_> = self.segment_shaped.iter().collect();
        shaped.sort();
        let chunk = self.key.shape.chunk;
        list.extend(shaped.into_iter().map(|(&(dir, shape), &p)| {
            (format!("segment shaped {dir} {shape:#x} chain {:?}", shape_chain(chunk, dir, shape)), p)
        }));
        list.extend((0..MAX_FUSED as usize).map(|m| (format!("global_merge fused {}", m + 1), self.global_merge[m])));
        list.retain(|(_, p)| *p != vk::Pipeline::null());
        list
    }
}

/// The error for a module the variant table does not have.
fn missing(kind: PassKind, payload: Payload, width: KeyWidth) -> Error {
    Error::Build { what: format!("no {} module for {payload:?} of {}-byte keys", kind.name(), width.bytes()) }
}

/// The plain module of a kernel.
fn required(kind: PassKind, payload: Payload, width: KeyWidth) -> Result<&'static [u32]> {
    module(kind, payload, width, Form::Plain).ok_or_else(|| missing(kind, payload, width))?.words()
}

fn create_pipeline(
    device: &ash::Device,
    layout: vk::PipelineLayout,
    cache: vk::PipelineCache,
    flags: vk::PipelineCreateFlags,
    code: &[u32],
    constants: &Constants,
) -> Result<vk::Pipeline> {
    let info = vk::ShaderModuleCreateInfo::default().code(code);
    // SAFETY: `code` is SPIR-V that build.rs compiled for Vulkan 1.1.
    let module = unsafe { device.create_shader_module(&info, None) }.map_err(Error::vk("vkCreateShaderModule"))?;
    let entries: Vec<vk::SpecializationMapEntry> = (0..spec::COUNT as u32)
        .map(|id| vk::SpecializationMapEntry { constant_id: id, offset: id * 4, size: 4 })
        .collect();
    let specialization =
        vk::SpecializationInfo::default().map_entries(&entries).data(bytemuck::cast_slice(&constants.0));
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(c"main")
        .specialization_info(&specialization);
    let info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout).flags(flags)];
    // SAFETY: the module and layout are live objects of `device`, the cache is null or the
    // caller's live cache of `device`; the specialization data holds the u32 constants the map
    // entries describe, constant i at byte 4 i (booleans as 0 or 1, a VkBool32's size); a kernel
    // without constant i ignores its entry.
    let result = unsafe { device.create_compute_pipelines(cache, &info, None) };
    // SAFETY: a pipeline keeps no reference to the module it was created from.
    unsafe { device.destroy_shader_module(module, None) };
    match result {
        Ok(pipelines) => Ok(pipelines[0]),
        Err((pipelines, result)) => {
            for p in pipelines {
                // SAFETY: any pipeline that was created is destroyed before it was ever used.
                unsafe { device.destroy_pipeline(p, None) };
            }
            Err(Error::vk("vkCreateComputePipelines")(result))
        }
    }
}

impl Drop for Kernels {
    fn drop(&mut self) {
        let local =
            [self.tile_sort, self.tile_sort_looping, self.local_merge, self.segment_merge, self.segment_merge_looping];
        let shaped = self.segment_shaped.values().copied();
        for p in local.into_iter().chain(self.local_merge_window).chain(self.global_merge).chain(shaped) {
            // SAFETY: created on `device` by `new` (or null); the owner waits for the GPU to finish
            // every command buffer that uses them before dropping.
            unsafe { self.device.destroy_pipeline(p, None) };
        }
    }
}

/// The probe kernels of the pass model: a vec4 copy (the bandwidth ceiling) and an empty dispatch
/// (the fixed cost of a pass).
#[cfg_attr(not(feature = "study"), allow(dead_code))]
pub(crate) struct Probes {
    device: ash::Device,
    pub copy: vk::Pipeline,
    pub empty: vk::Pipeline,
    /// Invocations per workgroup of `copy` (one 16-byte word each).
    pub copy_wg: u32,
}

#[cfg_attr(not(feature = "study"), allow(dead_code))]
impl Probes {
    pub fn new(device: &ash::Device, layouts: &Layouts, limits: &DeviceLimits) -> Result<Probes> {
        let invocations = limits.max_compute_work_group_invocations.max(1);
        let copy_wg = crate::tuning::GLOBAL_WG.min(1 << (31 - invocations.leading_zeros()));
        let mut probes =
            Probes { device: device.clone(), copy: vk::Pipeline::null(), empty: vk::Pipeline::null(), copy_wg };
        let null = vk::PipelineCache::null();
        let mut constants = Constants([0; spec::COUNT]);
        constants.0[spec::WG_SIZE] = copy_wg;
        let none = vk::PipelineCreateFlags::empty();
        probes.copy = create_pipeline(device, layouts.pipeline_layout, null, none, copy_probe()?, &constants)?;
        probes.empty = create_pipeline(device, layouts.pipeline_layout, null, none, empty_probe()?, &constants)?;
        Ok(probes)
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        // SAFETY: created on `device` by `new` (or null); the sorter waits for its submissions to
        // finish before dropping.
        unsafe {
            self.device.destroy_pipeline(self.copy, None);
            self.device.destroy_pipeline(self.empty, None);
        }
    }
}

/// The `dispatch_args` pipeline: recorded beside the first pass of a sort through a binding with a
/// GPU-side count, it writes the indirect arguments of every later dispatch.
pub(crate) struct ArgsKernel {
    device: ash::Device,
    pub pipeline: vk::Pipeline,
}

impl ArgsKernel {
    pub fn new(device: &ash::Device, layouts: &Layouts, cache: vk::PipelineCache) -> Result<ArgsKernel> {
        let constants = Constants([0; spec::COUNT]);
        let none = vk::PipelineCreateFlags::empty();
        let pipeline =
            create_pipeline(device, layouts.pipeline_layout, cache, none, dispatch_args_module()?, &constants)?;
        Ok(ArgsKernel { device: device.clone(), pipeline })
    }
}

impl Drop for ArgsKernel {
    fn drop(&mut self) {
        // SAFETY: created on `device` by `new`; the recorder's caller lets every command buffer
        // that uses it finish before dropping the recorder (its Contract).
        unsafe { self.device.destroy_pipeline(self.pipeline, None) };
    }
}
