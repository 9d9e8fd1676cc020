//! Layouts and compute pipelines of the four kernels, specialised for one binding's shape. Each
//! object destroys what it created and nothing else.

use std::collections::BTreeMap;

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
        // minimum of maxPushConstantsSize (asserted at compile time below).
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

// Every device offers 128 bytes of push constants (maxPushConstantsSize's minimum).
const _: () = assert!(PUSH_BYTES <= 128, "the push constants exceed the 128 bytes every device offers");

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

/// One pipeline of a binding's kernels: what a pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Slot {
    /// The tile sort; `looping`: the build whose workgroups loop over tiles.
    TileSort { looping: bool },
    /// local_merge; `window` w = 1 or 2 takes windows of 2^w tiles, 0 one tile.
    LocalMerge { window: u32 },
    /// global_merge fusing this many substages (1..=MAX_FUSED).
    GlobalMerge { fused: u32 },
    /// segment_merge; `looping`: the build whose workgroups loop over cosets.
    SegmentMerge { looping: bool },
    /// segment_merge specialised for one shape of pass (its push constants `dir` and `shape`).
    Shaped { dir: u32, shape: u32 },
}

impl Slot {
    /// The unshaped pipeline `pass` runs.
    pub fn of(pass: &Pass) -> Slot {
        let looping = pass.substages > 0;
        match pass.kind {
            PassKind::TileSort => Slot::TileSort { looping },
            PassKind::LocalMerge => Slot::LocalMerge { window: pass.substages.min(2) },
            PassKind::GlobalMerge => Slot::GlobalMerge { fused: pass.substages.clamp(1, MAX_FUSED) },
            PassKind::SegmentMerge => Slot::SegmentMerge { looping },
        }
    }

    /// The shaped pipeline `pass` may run instead: a segment pass of one coset per workgroup.
    pub fn shaped(pass: &Pass) -> Option<Slot> {
        (pass.kind == PassKind::SegmentMerge && pass.substages == 0)
            .then_some(Slot::Shaped { dir: pass.push.dir, shape: pass.push.shape })
    }

    /// A name for errors and `examples/kernel_stats.rs`.
    pub fn label(&self, chunk: u32) -> String {
        match *self {
            Slot::TileSort { looping } => format!("tile_sort{}", if looping { " looping" } else { "" }),
            Slot::LocalMerge { window: 0 } => "local_merge".to_string(),
            Slot::LocalMerge { window } => format!("local_merge window {}", 1 << window),
            Slot::GlobalMerge { fused } => format!("global_merge fused {fused}"),
            Slot::SegmentMerge { looping } => format!("segment_merge{}", if looping { " looping" } else { "" }),
            Slot::Shaped { dir, shape } => {
                format!("segment shaped {dir} {shape:#x} chain {:?}", shape_chain(chunk, dir, shape))
            }
        }
    }
}

/// The compute pipelines of one binding shape, each made when a binding's plans first need it
/// ([`Kernels::make`]): a binding of 1 024 keys makes its tile sort alone.
pub(crate) struct Kernels {
    device: ash::Device,
    pipelines: BTreeMap<Slot, vk::Pipeline>,
    /// What they were made for.
    pub key: KernelKey,
    /// The device's limits (whether the tile sort takes its SMALL build).
    limits: DeviceLimits,
    /// The flags every pipeline is created with (empty but for `examples/kernel_stats.rs`).
    flags: vk::PipelineCreateFlags,
    /// Shaped segment passes run on the unoptimised shaped build where no chain module fits
    /// (`Tuning::shaped_segments` = Some(true)), else on chain modules alone.
    every_shape: bool,
}

impl Kernels {
    /// Kernels of `key` with no pipeline made yet.
    pub fn new(
        device: &ash::Device,
        limits: &DeviceLimits,
        key: KernelKey,
        flags: vk::PipelineCreateFlags,
        every_shape: bool,
    ) -> Kernels {
        Kernels { device: device.clone(), pipelines: BTreeMap::new(), key, limits: *limits, flags, every_shape }
    }

    /// The local kernels' constants.
    fn local_constants(&self) -> Constants {
        Constants::new(&self.key, self.key.shape.local_wg, self.key.shape.chunk)
    }

    /// The SPIR-V and constants of `slot`; None for a shaped slot without a module (its passes
    /// run the plain segment_merge).
    fn source(&self, slot: Slot) -> Result<Option<(&'static [u32], Constants)>> {
        let BindingShape { payload, geometry, local_wg, chunk } = self.key.shape;
        let width = self.key.width;
        let local = self.local_constants();
        let built = |kind, form| module(kind, payload, width, form).ok_or_else(|| missing(kind, payload, width));
        Ok(Some(match slot {
            Slot::TileSort { looping: false } => {
                // The SMALL build runs the tile on its own number of invocations.
                let tile = geometry.tile();
                let small_form = match small_slots(payload, tile) {
                    2 if payload == Payload::Keys => Form::SmallTwoSlots,
                    _ => Form::Small,
                };
                match module(PassKind::TileSort, payload, width, small_form)
                    .filter(|_| small_tile_sort(&self.limits, payload, width, tile, local_wg, chunk))
                {
                    Some(m) => (m.words()?, Constants::new(&self.key, tile / small_slots(payload, tile), chunk)),
                    None => (required(PassKind::TileSort, payload, width)?, local),
                }
            }
            Slot::TileSort { looping: true } => (built(PassKind::TileSort, Form::Looping)?.words()?, local),
            Slot::LocalMerge { window } => {
                (required(PassKind::LocalMerge, payload, width)?, local.with(spec::WINDOW, window))
            }
            Slot::GlobalMerge { fused } => {
                (required(PassKind::GlobalMerge, payload, width)?, Constants::new(&self.key, geometry.global_wg, fused))
            }
            Slot::SegmentMerge { looping: false } => (required(PassKind::SegmentMerge, payload, width)?, local),
            Slot::SegmentMerge { looping: true } => (built(PassKind::SegmentMerge, Form::Looping)?.words()?, local),
            Slot::Shaped { dir, shape } => {
                // A shape of more chunks than the shaped build holds runs on the plain build.
                let Some(constants) = shaped_constants(local, chunk, dir, shape) else { return Ok(None) };
                let code = match chain_module(payload, width, &shape_chain(chunk, dir, shape)) {
                    Some(m) => m,
                    None if self.every_shape => match module(PassKind::SegmentMerge, payload, width, Form::Shaped) {
                        Some(m) => m,
                        None => return Ok(None),
                    },
                    None => return Ok(None),
                };
                (code.words()?, constants)
            }
        }))
    }

    /// Whether a shaped slot has a module (else its passes run the plain segment_merge).
    pub fn has_source(&self, slot: Slot) -> Result<bool> {
        Ok(self.source(slot)?.is_some())
    }

    /// Makes every pipeline of `slots` not made yet, together ([`create_pipelines`]). On an error
    /// none of them is kept.
    pub fn make(
        &mut self,
        slots: impl IntoIterator<Item = Slot>,
        layouts: &Layouts,
        cache: vk::PipelineCache,
    ) -> Result<()> {
        let mut wanted = Vec::new();
        let mut jobs = Vec::new();
        for slot in slots {
            if self.pipelines.contains_key(&slot) || wanted.contains(&slot) {
                continue;
            }
            if let Some(job) = self.source(slot)? {
                wanted.push(slot);
                jobs.push(job);
            }
        }
        let made = create_pipelines(&self.device, layouts.pipeline_layout, cache, self.flags, &jobs)?;
        self.pipelines.extend(wanted.into_iter().zip(made));
        Ok(())
    }

    /// The pipeline a pass runs: for a segment pass of one coset per workgroup, its shape's
    /// pipeline where one is made, else its plain one; None where that was never made.
    pub fn pass_pipeline(&self, pass: &Pass) -> Option<vk::Pipeline> {
        Slot::shaped(pass).and_then(|s| self.pipelines.get(&s)).or_else(|| self.pipelines.get(&Slot::of(pass))).copied()
    }

    /// How many pipelines are made.
    #[cfg(feature = "study")]
    pub fn made(&self) -> usize {
        self.pipelines.len()
    }

    /// Every pipeline made, with a label: what `examples/kernel_stats.rs` reports the driver's
    /// statistics of.
    #[cfg(feature = "test-hooks")]
    pub fn labelled(&self) -> Vec<(String, vk::Pipeline)> {
        self.pipelines.iter().map(|(slot, p)| (slot.label(self.key.shape.chunk), *p)).collect()
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

/// Creates one compute pipeline per job (SPIR-V and its constants). The driver compiles each
/// pipeline at creation, so the jobs are spread over the machine's threads, each making its
/// share in one `vkCreateComputePipelines` call: creation may run concurrently on one device, and
/// a pipeline cache is internally synchronised unless created externally synchronised (which
/// [`crate::SortRecorder::new`] rules out). On an error every pipeline made is destroyed.
fn create_pipelines(
    device: &ash::Device,
    layout: vk::PipelineLayout,
    cache: vk::PipelineCache,
    flags: vk::PipelineCreateFlags,
    jobs: &[(&'static [u32], Constants)],
) -> Result<Vec<vk::Pipeline>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    // One module per distinct SPIR-V, shared by the pipelines specialised from it.
    let mut modules: Vec<(usize, vk::ShaderModule)> = Vec::new();
    let destroy_modules = |modules: &[(usize, vk::ShaderModule)]| {
        for (_, m) in modules {
            // SAFETY: made below on `device`; a pipeline keeps no reference to its module.
            unsafe { device.destroy_shader_module(*m, None) };
        }
    };
    for (code, _) in jobs {
        if modules.iter().any(|(p, _)| *p == code.as_ptr() as usize) {
            continue;
        }
        let info = vk::ShaderModuleCreateInfo::default().code(code);
        // SAFETY: `code` is SPIR-V that build.rs compiled for Vulkan 1.1.
        match unsafe { device.create_shader_module(&info, None) } {
            Ok(m) => modules.push((code.as_ptr() as usize, m)),
            Err(e) => {
                destroy_modules(&modules);
                return Err(Error::vk("vkCreateShaderModule")(e));
            }
        }
    }
    let module_of = |code: &[u32]| {
        modules.iter().find(|(p, _)| *p == code.as_ptr() as usize).map_or(vk::ShaderModule::null(), |m| m.1)
    };
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(jobs.len());
    // Thread t makes jobs t, t + threads, ...: the costly kernels are spread rather than bunched.
    let shares: Vec<Vec<usize>> = (0..threads).map(|t| (t..jobs.len()).step_by(threads).collect()).collect();
    let make_share = |share: &[usize]| -> std::result::Result<Vec<vk::Pipeline>, (Vec<vk::Pipeline>, vk::Result)> {
        let entries: Vec<vk::SpecializationMapEntry> = (0..spec::COUNT as u32)
            .map(|id| vk::SpecializationMapEntry { constant_id: id, offset: id * 4, size: 4 })
            .collect();
        let specializations: Vec<vk::SpecializationInfo<'_>> = share
            .iter()
            .map(|&j| vk::SpecializationInfo::default().map_entries(&entries).data(bytemuck::cast_slice(&jobs[j].1 .0)))
            .collect();
        let infos: Vec<vk::ComputePipelineCreateInfo<'_>> = share
            .iter()
            .zip(&specializations)
            .map(|(&j, specialization)| {
                let stage = vk::PipelineShaderStageCreateInfo::default()
                    .stage(vk::ShaderStageFlags::COMPUTE)
                    .module(module_of(jobs[j].0))
                    .name(c"main")
                    .specialization_info(specialization);
                vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout).flags(flags)
            })
            .collect();
        // SAFETY: the modules and layout are live objects of `device`, the cache is null or a
        // live, internally synchronised cache of `device`; each specialization's data holds the
        // u32 constants its map entries describe, constant i at byte 4 i (booleans as 0 or 1, a
        // VkBool32's size); a kernel without constant i ignores its entry.
        unsafe { device.create_compute_pipelines(cache, &infos, None) }
    };
    let results: Vec<_> = if threads == 1 {
        vec![make_share(&shares[0])]
    } else {
        std::thread::scope(|scope| {
            // A share whose thread cannot be started is made here, after the others.
            let handles: Vec<_> = shares
                .iter()
                .map(|share| (share, std::thread::Builder::new().spawn_scoped(scope, || make_share(share)).ok()))
                .collect();
            handles
                .into_iter()
                .map(|(share, handle)| match handle {
                    Some(h) => h.join().unwrap_or(Err((Vec::new(), vk::Result::ERROR_UNKNOWN))),
                    None => make_share(share),
                })
                .collect()
        })
    };
    destroy_modules(&modules);
    let mut made = vec![vk::Pipeline::null(); jobs.len()];
    let mut failure = None;
    for (share, result) in shares.iter().zip(results) {
        let pipelines = match result {
            Ok(p) => p,
            Err((p, e)) => {
                failure.get_or_insert(e);
                p
            }
        };
        for (&j, p) in share.iter().zip(pipelines) {
            made[j] = p;
        }
    }
    if let Some(e) = failure {
        for p in made {
            // SAFETY: any pipeline that was created is destroyed before it was ever used (null is
            // ignored).
            unsafe { device.destroy_pipeline(p, None) };
        }
        return Err(Error::vk("vkCreateComputePipelines")(e));
    }
    Ok(made)
}

/// Creates one compute pipeline of `code` specialised by `constants`.
fn create_pipeline(
    device: &ash::Device,
    layout: vk::PipelineLayout,
    cache: vk::PipelineCache,
    flags: vk::PipelineCreateFlags,
    code: &'static [u32],
    constants: &Constants,
) -> Result<vk::Pipeline> {
    Ok(create_pipelines(device, layout, cache, flags, &[(code, *constants)])?[0])
}

impl Drop for Kernels {
    fn drop(&mut self) {
        for p in self.pipelines.values() {
            // SAFETY: created on `device` by `make`; the owner waits for the GPU to finish every
            // command buffer that uses them before dropping.
            unsafe { self.device.destroy_pipeline(*p, None) };
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
