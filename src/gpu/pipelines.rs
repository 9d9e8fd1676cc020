//! Layouts and compute pipelines of the four kernels, specialised for one binding's shape. Each
//! object destroys what it created and nothing else.

use std::collections::BTreeMap;

use ash::vk;

use crate::abi::{
    spec, DispatchRule, Form, KernelFamily, KeyWidth, PassKind, Payload, PushConstants, ARGS_PER_DISPATCH,
};
use crate::device::DeviceLimits;
use crate::error::{Error, Result};
use crate::network::Pass;
use crate::segment::Segment;
use crate::tuning::{load_batch, small_slots, small_tile_sort, BindingShape, Sizing, MAX_FUSED};

use super::shaders::{chain_module, copy_probe, dispatch_args_module, empty_probe, module, Embedded};

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

    /// The knob that sets this kernel's workgroup, for errors.
    pub fn knob(&self) -> &'static str {
        match self {
            Slot::GlobalMerge { .. } => "Tuning::global_workgroup_size (--global-wg)",
            _ => "Tuning::local_workgroup_size (--local-wg)",
        }
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
    /// The sizing they were planned with: the recorder's, or its workgroups capped where the
    /// driver refused a larger one. Its limits say whether the tile sort takes its SMALL build.
    pub sizing: Sizing,
    /// How each pipeline is created.
    creation: Creation,
    /// Shaped segment passes run on the unoptimised shaped build where no chain module fits
    /// (`Tuning::shaped_segments` = Some(true)), else on chain modules alone.
    every_shape: bool,
}

impl Kernels {
    /// Kernels of `key`, planned with `sizing`, with no pipeline made yet.
    pub fn new(
        device: &ash::Device,
        sizing: &Sizing,
        key: KernelKey,
        creation: Creation,
        every_shape: bool,
    ) -> Kernels {
        Kernels { device: device.clone(), pipelines: BTreeMap::new(), key, sizing: *sizing, creation, every_shape }
    }

    /// The local kernels' constants. The compact kernels take a workgroup of at most a tile (a
    /// batch of loads lies in the tile) and chunks of at most log2 of the tile (a chunk's group
    /// lies in the tile); the plan does not depend on either.
    fn local_constants(&self) -> Constants {
        let BindingShape { family, geometry, local_wg, chunk, .. } = self.key.shape;
        match family {
            KernelFamily::Unrolled => Constants::new(&self.key, local_wg, chunk),
            KernelFamily::Compact => {
                let wg = local_wg.min(geometry.tile());
                let batch = load_batch(geometry.tile(), wg, self.sizing.cpu);
                Constants::new(&self.key, wg, chunk.min(geometry.tile_log2)).with(spec::BATCH, batch)
            }
        }
    }

    /// The SPIR-V and constants of `slot`; None for a shaped slot without a module (its passes
    /// run the plain segment_merge).
    fn source(&self, slot: Slot) -> Result<Option<Job>> {
        let BindingShape { family, payload, geometry, local_wg, chunk } = self.key.shape;
        let width = self.key.width;
        let local = self.local_constants();
        let built = |kind, form| {
            module(family, kind, payload, width, form).ok_or_else(|| missing(family, kind, payload, width))
        };
        let plain =
            |(code, constants)| Job { code, constants, stage_flags: vk::PipelineShaderStageCreateFlags::empty() };
        Ok(Some(match slot {
            Slot::TileSort { looping: false } => {
                // The SMALL build runs the tile on its own number of invocations.
                let tile = geometry.tile();
                let small_form = match small_slots(payload, tile) {
                    2 if payload == Payload::Keys => Form::SmallTwoSlots,
                    _ => Form::Small,
                };
                match module(family, PassKind::TileSort, payload, width, small_form)
                    .filter(|_| small_tile_sort(&self.sizing.limits, payload, width, tile, local_wg, chunk))
                {
                    Some(m) => {
                        let wg = tile / small_slots(payload, tile);
                        Job {
                            code: m,
                            constants: Constants::new(&self.key, wg, chunk),
                            stage_flags: self.subgroups(wg),
                        }
                    }
                    None => plain((built(PassKind::TileSort, Form::Plain)?, local)),
                }
            }
            Slot::TileSort { looping: true } => plain((built(PassKind::TileSort, Form::Looping)?, local)),
            Slot::LocalMerge { window } => {
                plain((built(PassKind::LocalMerge, Form::Plain)?, local.with(spec::WINDOW, window)))
            }
            Slot::GlobalMerge { fused } => {
                let constants = Constants::new(&self.key, geometry.global_wg, fused);
                plain((built(PassKind::GlobalMerge, Form::Plain)?, constants))
            }
            Slot::SegmentMerge { looping: false } => plain((built(PassKind::SegmentMerge, Form::Plain)?, local)),
            Slot::SegmentMerge { looping: true } => plain((built(PassKind::SegmentMerge, Form::Looping)?, local)),
            // The compact family runs every segment pass on its one segment_merge.
            Slot::Shaped { .. } if family == KernelFamily::Compact => return Ok(None),
            Slot::Shaped { dir, shape } => {
                // A shape of more chunks than the shaped build holds runs on the plain build.
                let Some(constants) = shaped_constants(local, chunk, dir, shape) else { return Ok(None) };
                let code = match chain_module(payload, width, &shape_chain(chunk, dir, shape)) {
                    Some(m) => m,
                    None if self.every_shape => {
                        match module(family, PassKind::SegmentMerge, payload, width, Form::Shaped) {
                            Some(m) => m,
                            None => return Ok(None),
                        }
                    }
                    None => return Ok(None),
                };
                plain((code, constants))
            }
        }))
    }

    /// Whether a shaped slot has a module (else its passes run the plain segment_merge).
    pub fn has_source(&self, slot: Slot) -> Result<bool> {
        Ok(self.source(slot)?.is_some())
    }

    /// Makes every pipeline of `slots` not made yet, together ([`create_pipelines`]). On an error
    /// none of them is kept; a pipeline the driver refuses is [`Error::PipelineRefused`], naming
    /// the kernel (the one of the largest workgroup among those refused) and its workgroup, on
    /// the device `device_name`.
    pub fn make(
        &mut self,
        slots: impl IntoIterator<Item = Slot>,
        layouts: &Layouts,
        cache: vk::PipelineCache,
        device_name: &str,
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
        match create_pipelines(&self.device, layouts.pipeline_layout, cache, &self.creation, &jobs) {
            Ok(made) => {
                self.pipelines.extend(wanted.into_iter().zip(made));
                Ok(())
            }
            Err(Failure::Error(e)) => Err(e),
            Err(Failure::Refused { jobs: refused, result }) => {
                let workgroup = |j: usize| jobs[j].constants.0[spec::WG_SIZE];
                let slot = refused.iter().copied().max_by_key(|&j| workgroup(j)).map(|j| (wanted[j], workgroup(j)));
                let (slot, workgroup) = slot.unwrap_or((wanted[0], workgroup(0)));
                Err(Error::PipelineRefused {
                    device: device_name.to_owned(),
                    kernel: slot.label(self.key.shape.chunk),
                    workgroups: vec![workgroup],
                    knob: slot.knob(),
                    result,
                })
            }
        }
    }

    /// The stage flags of a kernel with subgroup operations (the SMALL tile sort) on workgroups
    /// of `wg`: full subgroups where the device's computeFullSubgroups is enabled and `wg` is a
    /// multiple of its maxSubgroupSize, so that a variable-width compiler (Intel's, AMD's) cannot
    /// leave a partial subgroup and send the kernel down its shared-memory form. The multiple of
    /// maxSubgroupSize is a multiple of every width the device runs, as the flag needs
    /// (VUID-VkPipelineShaderStageCreateInfo-flags-02758 and -02759).
    fn subgroups(&self, wg: u32) -> vk::PipelineShaderStageCreateFlags {
        match self.creation.full_subgroups {
            Some(max) if max > 0 && wg % max == 0 => vk::PipelineShaderStageCreateFlags::REQUIRE_FULL_SUBGROUPS,
            _ => vk::PipelineShaderStageCreateFlags::empty(),
        }
    }

    /// Test hook: the labels of the pipelines made with full subgroups.
    #[cfg(feature = "test-hooks")]
    pub fn full_subgroup_labels(&self) -> Vec<String> {
        self.pipelines
            .keys()
            .filter(|slot| self.source(**slot).ok().flatten().is_some_and(|job| !job.stage_flags.is_empty()))
            .map(|slot| slot.label(self.key.shape.chunk))
            .collect()
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
fn missing(family: KernelFamily, kind: PassKind, payload: Payload, width: KeyWidth) -> Error {
    Error::Build {
        what: format!("no {family:?} {} module for {payload:?} of {}-byte keys", kind.name(), width.bytes()),
    }
}

/// How a recorder creates its kernels' pipelines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Creation {
    /// The flags every pipeline is created with (empty but for `examples/kernel_stats.rs`).
    pub flags: vk::PipelineCreateFlags,
    /// The device's maxSubgroupSize where its computeFullSubgroups feature is enabled: the
    /// kernels with subgroup operations then ask for full subgroups where they can.
    pub full_subgroups: Option<u32>,
    /// Test hook: pipelines of workgroups of more invocations than this are refused, as a driver
    /// refuses one (`VK_ERROR_OUT_OF_DEVICE_MEMORY`), the others made; None: none refused.
    pub refuse_above: Option<u32>,
}

/// One pipeline to create: the module, its constants and its stage's flags.
#[derive(Clone, Copy)]
struct Job {
    code: &'static Embedded,
    constants: Constants,
    stage_flags: vk::PipelineShaderStageCreateFlags,
}

/// Why [`create_pipelines`] made nothing.
enum Failure {
    /// A shader module could not be made, or the device was lost.
    Error(Error),
    /// The driver refused the pipelines of these jobs (every job of its call where it marked
    /// none), with this result.
    Refused { jobs: Vec<usize>, result: vk::Result },
}

impl From<Failure> for Error {
    fn from(failure: Failure) -> Error {
        match failure {
            Failure::Error(e) => e,
            Failure::Refused { result, .. } => Error::vk("vkCreateComputePipelines")(result),
        }
    }
}

/// Creates one compute pipeline per job. The driver compiles each pipeline at creation, so the
/// jobs are spread over the machine's threads, each making its share in one
/// `vkCreateComputePipelines` call: creation may run concurrently on one device, and a pipeline
/// cache is internally synchronised unless created externally synchronised (which
/// [`crate::SortRecorder::new`] rules out). On a failure every pipeline made is destroyed. A call
/// that fails for some of its pipelines leaves theirs null and makes the others (the spec's
/// rule for multiple pipelines), which says which jobs the driver refused.
fn create_pipelines(
    device: &ash::Device,
    layout: vk::PipelineLayout,
    cache: vk::PipelineCache,
    creation: &Creation,
    jobs: &[Job],
) -> std::result::Result<Vec<vk::Pipeline>, Failure> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    // One module per distinct SPIR-V, shared by the pipelines specialised from it; the modules are
    // decoded and handed to the driver on the machine's threads, as the largest take milliseconds.
    let mut distinct: Vec<&'static Embedded> = Vec::new();
    for job in jobs {
        if !distinct.iter().any(|m| std::ptr::eq(*m, job.code)) {
            distinct.push(job.code);
        }
    }
    let make_module = |code: &&'static Embedded| -> Result<vk::ShaderModule> {
        let info = vk::ShaderModuleCreateInfo::default().code(code.words()?);
        // SAFETY: `code` is SPIR-V that build.rs compiled for Vulkan 1.1.
        unsafe { device.create_shader_module(&info, None) }.map_err(Error::vk("vkCreateShaderModule"))
    };
    // A thread that panicked stands as the driver's unknown error, as in the pipeline phase below.
    let lost = || Err(Error::vk("vkCreateShaderModule")(vk::Result::ERROR_UNKNOWN));
    let made: Vec<Result<vk::ShaderModule>> = on_threads(&distinct, make_module, lost);
    let modules: Vec<vk::ShaderModule> =
        made.iter().map(|m| *m.as_ref().unwrap_or(&vk::ShaderModule::null())).collect();
    let destroy_modules = || {
        for m in &modules {
            // SAFETY: made above on `device` (or null, which is ignored); a pipeline keeps no
            // reference to its module.
            unsafe { device.destroy_shader_module(*m, None) };
        }
    };
    if let Some(Err(e)) = made.into_iter().find(Result::is_err) {
        destroy_modules();
        return Err(Failure::Error(e));
    }
    let module_of = |code: &'static Embedded| {
        distinct.iter().position(|m| std::ptr::eq(*m, code)).map_or(vk::ShaderModule::null(), |i| modules[i])
    };
    let refused = |j: usize| creation.refuse_above.is_some_and(|most| jobs[j].constants.0[spec::WG_SIZE] > most);
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(jobs.len());
    // Thread t makes jobs t, t + threads, ...: the costly kernels are spread rather than bunched.
    let shares: Vec<Vec<usize>> = (0..threads).map(|t| (t..jobs.len()).step_by(threads).collect()).collect();
    let make_share = |share: &[usize]| -> std::result::Result<Vec<vk::Pipeline>, (Vec<vk::Pipeline>, vk::Result)> {
        // The test hook's refused jobs are left out of the call and stand as null pipelines.
        let asked: Vec<usize> = share.iter().copied().filter(|&j| !refused(j)).collect();
        let entries: Vec<vk::SpecializationMapEntry> = (0..spec::COUNT as u32)
            .map(|id| vk::SpecializationMapEntry { constant_id: id, offset: id * 4, size: 4 })
            .collect();
        let specializations: Vec<vk::SpecializationInfo<'_>> = asked
            .iter()
            .map(|&j| {
                vk::SpecializationInfo::default().map_entries(&entries).data(bytemuck::cast_slice(&jobs[j].constants.0))
            })
            .collect();
        let infos: Vec<vk::ComputePipelineCreateInfo<'_>> = asked
            .iter()
            .zip(&specializations)
            .map(|(&j, specialization)| {
                let stage = vk::PipelineShaderStageCreateInfo::default()
                    .flags(jobs[j].stage_flags)
                    .stage(vk::ShaderStageFlags::COMPUTE)
                    .module(module_of(jobs[j].code))
                    .name(c"main")
                    .specialization_info(specialization);
                vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout).flags(creation.flags)
            })
            .collect();
        let result = if infos.is_empty() {
            Ok(Vec::new())
        } else {
            // SAFETY: the modules and layout are live objects of `device`, the cache is null or a
            // live, internally synchronised cache of `device`; each specialization's data holds
            // the u32 constants its map entries describe, constant i at byte 4 i (booleans as 0
            // or 1, a VkBool32's size); a kernel without constant i ignores its entry. A stage
            // asks for full subgroups only where the device's computeFullSubgroups is enabled and
            // the workgroup is a multiple of maxSubgroupSize (`Kernels::subgroups`).
            unsafe { device.create_compute_pipelines(cache, &infos, None) }
        };
        if asked.len() == share.len() {
            return result;
        }
        let (made, outcome) = match result {
            Ok(made) => (made, vk::Result::ERROR_OUT_OF_DEVICE_MEMORY),
            Err((made, e)) => (made, e),
        };
        let mut made = made.into_iter();
        let whole =
            share.iter().map(|&j| if refused(j) { vk::Pipeline::null() } else { made.next().unwrap_or_default() });
        Err((whole.collect(), outcome))
    };
    let lost = || Err((Vec::new(), vk::Result::ERROR_UNKNOWN));
    let results = on_threads(&shares, |share| make_share(share), lost);
    destroy_modules();
    let mut made = vec![vk::Pipeline::null(); jobs.len()];
    let mut failure: Option<(vk::Result, Vec<usize>)> = None;
    for (share, result) in shares.iter().zip(results) {
        let pipelines = match result {
            Ok(p) => p,
            Err((p, e)) => {
                // The jobs of this call left null; all of them where it marked none.
                let mut nulls: Vec<usize> =
                    share.iter().zip(&p).filter(|(_, p)| **p == vk::Pipeline::null()).map(|(&j, _)| j).collect();
                if nulls.is_empty() || p.len() < share.len() {
                    nulls = share.clone();
                }
                let (result, jobs) = failure.get_or_insert((e, Vec::new()));
                if *result != vk::Result::ERROR_DEVICE_LOST {
                    *result = e;
                }
                jobs.extend(nulls);
                p
            }
        };
        for (&j, p) in share.iter().zip(pipelines) {
            made[j] = p;
        }
    }
    if let Some((result, jobs)) = failure {
        for p in made {
            // SAFETY: any pipeline that was created is destroyed before it was ever used (null is
            // ignored).
            unsafe { device.destroy_pipeline(p, None) };
        }
        return Err(match result {
            vk::Result::ERROR_DEVICE_LOST => Failure::Error(Error::vk("vkCreateComputePipelines")(result)),
            result => Failure::Refused { jobs, result },
        });
    }
    Ok(made)
}

/// `f` of every item, the items spread over the machine's threads (item i on thread i mod
/// threads, so that costly neighbours are not bunched), in the items' order. A thread that cannot
/// be started leaves its items to this one, after the others; a thread that panics gives `lost()`
/// for each of its items.
fn on_threads<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync, lost: impl Fn() -> R) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    let run = move |t: usize| -> Vec<R> { items.iter().skip(t).step_by(threads).map(f).collect() };
    let mut per_thread: Vec<std::vec::IntoIter<R>> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..threads).map(|t| (t, std::thread::Builder::new().spawn_scoped(scope, move || run(t)).ok())).collect();
        handles
            .into_iter()
            .map(|(t, handle)| match handle {
                Some(h) => h.join().unwrap_or_else(|_| (t..items.len()).step_by(threads).map(|_| lost()).collect()),
                None => run(t),
            })
            .map(Vec::into_iter)
            .collect()
    });
    (0..items.len()).map(|i| per_thread[i % threads].next().unwrap_or_else(&lost)).collect()
}

/// Creates one compute pipeline of `code` specialised by `constants`.
fn create_pipeline(
    device: &ash::Device,
    layout: vk::PipelineLayout,
    cache: vk::PipelineCache,
    code: &'static Embedded,
    constants: &Constants,
) -> Result<vk::Pipeline> {
    let job = Job { code, constants: *constants, stage_flags: vk::PipelineShaderStageCreateFlags::empty() };
    Ok(create_pipelines(device, layout, cache, &Creation::default(), &[job])?[0])
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
        probes.copy = create_pipeline(device, layouts.pipeline_layout, null, copy_probe(), &constants)?;
        probes.empty = create_pipeline(device, layouts.pipeline_layout, null, empty_probe(), &constants)?;
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
        let pipeline = create_pipeline(device, layouts.pipeline_layout, cache, dispatch_args_module(), &constants)?;
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

#[cfg(test)]
mod tests {
    use super::on_threads;

    #[test]
    fn work_on_threads_comes_back_in_the_items_order() {
        let items: Vec<u32> = (0..37).collect();
        let threads = std::sync::Mutex::new(std::collections::HashSet::new());
        let doubled = on_threads(
            &items,
            |&i| {
                threads.lock().expect("no thread panicked").insert(std::thread::current().id());
                2 * i
            },
            || u32::MAX,
        );
        assert_eq!(doubled, items.iter().map(|i| 2 * i).collect::<Vec<_>>());
        let cores = std::thread::available_parallelism().map_or(1, |t| t.get());
        assert_eq!(threads.lock().expect("no thread panicked").len(), cores.min(items.len()), "one thread a share");
        assert!(on_threads(&[] as &[u32], |&i| i, || 0).is_empty());
    }

    #[test]
    fn a_panicking_thread_gives_lost_for_its_items_only() {
        let items: Vec<u32> = (0..8).collect();
        if std::thread::available_parallelism().map_or(1, |t| t.get()) < 2 {
            return;
        }
        let out = on_threads(
            &items,
            |&i| {
                assert!(i != 0, "item 0 panics");
                i
            },
            || u32::MAX,
        );
        // Item 0's thread made items 0, t, 2t, ...: each of them lost, every other item made.
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(items.len());
        for (i, v) in out.iter().enumerate() {
            let lost = i % threads == 0;
            assert_eq!(*v, if lost { u32::MAX } else { i as u32 }, "item {i}");
        }
    }
}
