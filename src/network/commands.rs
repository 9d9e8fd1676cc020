//! The command sequence of a plan, in pure Rust: binds, push constants, dispatches and barriers,
//! recorded through an [`Encoder`], so the same code drives a Vulkan command buffer
//! (`gpu::record`) and the CPU model that checks it ([`super::model`]).

use crate::abi::{DispatchRule, PassKind, PushConstants};

use super::plan::{Pass, Plan};

/// What the pass sequence needs from a command sink.
pub trait Encoder {
    /// Binds the pipeline a pass runs: its kernel's (for `GlobalMerge`, the one fusing its
    /// `substages`), or for a segment pass the one made for its shape where there is one.
    fn bind_pass(&mut self, pass: &Pass);
    /// Sets the push constants for the following dispatches.
    fn push_constants(&mut self, push: &PushConstants);
    /// Dispatches `groups` workgroups along x.
    fn dispatch(&mut self, groups: u32);
    /// Makes every compute-shader write recorded so far available and visible to every
    /// compute-shader read and write recorded after it.
    fn compute_barrier(&mut self);
    /// Marks the end of pass `index` (after its last dispatch, before the next barrier).
    fn pass_done(&mut self, _index: usize) {}
}

/// How the passes are cut into commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordOptions {
    /// Most workgroups in one dispatch (the device's `maxComputeWorkGroupCount[0]`, or lower).
    pub max_groups_per_dispatch: u32,
    /// Test hook: leave out the barrier before this pass, to prove that the tests catch a missing
    /// barrier.
    pub drop_barrier_before_pass: Option<usize>,
}

/// Records every pass of `plan`: a barrier between consecutive passes (each reads what the one
/// before wrote), each pass split into dispatches of at most `max_groups_per_dispatch`
/// workgroups. The dispatches of one pass touch disjoint elements and need no barrier between them.
pub fn record_passes(enc: &mut impl Encoder, plan: &Plan, options: &RecordOptions) {
    let mut bound = None;
    for (index, pass) in plan.passes.iter().enumerate() {
        if index > 0 && options.drop_barrier_before_pass != Some(index) {
            enc.compute_barrier();
        }
        // Segment passes of different shapes may run different pipelines.
        let shape = if pass.kind == PassKind::SegmentMerge { (pass.push.dir, pass.push.shape) } else { (0, 0) };
        let key = (pass.kind, pass.substages, shape);
        if bound != Some(key) {
            enc.bind_pass(pass);
            bound = Some(key);
        }
        dispatch_pass(enc, pass, options.max_groups_per_dispatch);
        enc.pass_done(index);
    }
}

/// Records the dispatches of one pass (its kernel already bound), split into dispatches of at most
/// `max_groups` workgroups.
pub fn dispatch_pass(enc: &mut impl Encoder, pass: &Pass, max_groups: u32) {
    for (offset, groups) in splits(pass.workgroups, max_groups) {
        enc.push_constants(&PushConstants { group_offset: offset, ..pass.push });
        enc.dispatch(groups);
    }
}

/// The dispatches a pass of `workgroups` is split into, as (first workgroup, workgroups).
fn splits(workgroups: u32, max_groups: u32) -> impl ExactSizeIterator<Item = (u32, u32)> {
    let max_groups = max_groups.max(1);
    (0..workgroups.div_ceil(max_groups)).map(move |i| {
        let offset = i * max_groups;
        (offset, (workgroups - offset).min(max_groups))
    })
}

/// How many dispatches of the first pass [`record_passes`] records for `plan`: with a GPU-side
/// count they are direct (the tile sort's workgroups past the count return at once), and the
/// count's `dispatch_args` kernel runs beside them, so the barrier after the first pass makes the
/// indirect arguments of every later pass visible. The CPU model runs them untrimmed.
#[cfg(any(test, feature = "test-hooks"))]
pub fn direct_dispatches(plan: &Plan, max_groups: u32) -> usize {
    plan.passes.first().map_or(0, |pass| splits(pass.workgroups, max_groups).len())
}

/// How many indirect dispatches [`record_passes`] records for `plan` with a GPU-side count: those
/// of every pass after the first, as many as [`dispatch_rules`] has.
pub fn dispatch_count(plan: &Plan, max_groups: u32) -> usize {
    plan.passes.iter().skip(1).map(|pass| splits(pass.workgroups, max_groups).len()).sum()
}

/// The rule of every indirect dispatch [`record_passes`] records for `plan` (every pass after the
/// first), in order: what the `dispatch_args` kernel turns into their arguments for a GPU-side
/// count.
pub fn dispatch_rules(plan: &Plan, max_groups: u32) -> Vec<DispatchRule> {
    plan.passes
        .iter()
        .skip(1)
        .flat_map(|pass| {
            splits(pass.workgroups, max_groups).map(|(offset, size)| pass.rule(&plan.geometry, offset, size))
        })
        .collect()
}
