//! The pass list of one sort, in pure Rust: which kernel runs each pass, with which push
//! constants and how many workgroups. It knows nothing of Vulkan, so it is tested exhaustively on
//! the CPU (see [`super::model`]).
//!
//! The network is the bitonic sorter in its "flip" form. Stage k merges blocks of 2^k elements:
//! its first substage compares element i with its mirror in the block, every later substage
//! compares i with i + 2^j, and every comparator puts the smaller order image first. Indices at or
//! past n are virtual +infinity keys: a comparator whose upper element is virtual leaves both
//! elements where they are, and real keys never move past n. The kernels hold a virtual element
//! as the largest order image in registers and shared memory (never in a buffer), which no
//! comparator moves, not even beside a real key with that image; no memory beyond the n elements
//! is used.
//!
//! With tiles of T = 2^t elements: one `TileSort` pass runs stages 1..=t inside each tile; every
//! later stage k runs its k - t substages with strides 2^(k-1) down to T (the first one the flip)
//! in `GlobalMerge` passes of up to F substages each (the geometry's `fused`, at most 5 in sorts of
//! fewer than [`crate::tuning::FUSED6_MIN_TILES`] tiles), fused in registers, and then one
//! `LocalMerge` pass (strides T/2 down to 1, inside each tile). Where handing the substage of
//! stride T to the local merge saves a global pass (k - t - 1 a multiple of F) and the sort has at
//! least [`crate::tuning::WINDOW_MIN_TILES`] tiles, that local merge takes windows of two tiles: it runs the
//! stride-T substage (the flip, in stage t+1) as it loads a window, then each tile's strides T/2
//! down to 1 in turn. Where handing it the strides 2T and T instead saves a pass (k - t - 2 a
//! multiple of F) and the sort has at least [`crate::tuning::WINDOW4_MIN_TILES`] tiles, it takes windows of four
//! tiles the same way.
//!
//! [`Plan::segmented`] cuts the same network differently after the tile sort: into
//! `SegmentMerge` passes, each a run of consecutive substages (the end of one stage, the next
//! stage's flip and its largest strides) on cosets of a tile's size, about one pass per log2(tile)
//! substages ([`Segment`]).

use crate::abi::{
    DispatchRule, PassKind, PushConstants, FLAG_FROM_IMAGE_ON_STORE, FLAG_TO_IMAGE_ON_LOAD, NEXT_STAGE_SHIFT,
    SEGMENT_HIGH_BIT_SHIFT, SEGMENT_HIGH_SHIFT, SEGMENT_TAIL,
};
use crate::error::{Error, Result};
use crate::segment::{ceil_log2, segment_shapes, Segment, SegmentRuns};
use crate::tuning::{fused_for, window_log2, Geometry, MAX_ELEMENTS, MAX_FUSED};

/// One pass: one kernel over the whole array, separated from its neighbours by barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Which kernel.
    pub kind: PassKind,
    /// `GlobalMerge`: how many consecutive substages it runs (strides `push.inc` down to
    /// `push.inc >> (substages - 1)`). `LocalMerge`: w when it takes windows of 2^w tiles (w = 1
    /// or 2) and runs the w substages of strides `push.inc` (the tile << (w-1)) down to the tile
    /// itself, else 0. `TileSort` and `SegmentMerge`: 1 where its workgroups loop over tiles or
    /// cosets (`push.loop_stride` > 0, the looping build of the kernel:
    /// [`Plan::looping_passes`]), else 0 (a segment's shape is in the push constants:
    /// [`Segment::decode`]).
    pub substages: u32,
    /// log2 of the block size of the stage this pass belongs to.
    pub stage: u32,
    /// Workgroups the pass needs (it may be split over several dispatches).
    pub workgroups: u32,
    /// Push constants, `group_offset` left at 0 for the recorder to fill. A windowed `LocalMerge`
    /// has `inc` = its largest stride, and `dir` = 1 where its first substage is the stage's flip.
    pub push: PushConstants,
}

impl Pass {
    /// The stage of the pass's first substage: a segment pass that starts with the last strides
    /// of one stage and then runs the next stage's flip ends in the next stage.
    pub fn first_stage(&self) -> u32 {
        match self.kind {
            PassKind::TileSort => 1,
            PassKind::GlobalMerge | PassKind::LocalMerge => self.stage,
            PassKind::SegmentMerge => {
                let segment = Segment::decode(&self.push);
                self.stage - u32::from(segment.tail && segment.flip)
            }
        }
    }

    /// The rule that trims the dispatch of workgroups `offset .. offset + size` of this pass to a
    /// GPU-side count ([`DispatchRule::groups`]): the workgroups whose first element lies below
    /// the count, or none where the count needs no substage of the pass. Each kind's count of
    /// workgroups for n elements is the same rule at count n.
    pub fn rule(&self, geometry: &Geometry, offset: u32, size: u32) -> DispatchRule {
        let t = geometry.tile_log2;
        let (a, p, k, d) = match self.kind {
            PassKind::TileSort => (t, 0, 0, 1),
            // A windowed local merge takes 2^substages tiles a workgroup.
            PassKind::LocalMerge => (t + self.substages, 0, 0, 1),
            PassKind::GlobalMerge => {
                // Groups of 2^m elements of smallest stride `low`, one an invocation.
                let low = self.push.inc >> (self.substages - 1);
                (0, low.trailing_zeros(), self.substages, geometry.global_wg)
            }
            PassKind::SegmentMerge => {
                // Segment::element: a workgroup's first element takes the coset bits from bit
                // `low`, skipping the high run (and the flip's bit), 2^(t - u) cosets a workgroup.
                let segment = Segment::decode(&self.push);
                let u = segment.used_bits();
                (segment.low, segment.high_bit - segment.low, segment.high + u32::from(segment.flip), 1 << (t - u))
            }
        };
        DispatchRule { a, p, k, d, cap: self.workgroups, offset, size, first_stage: self.first_stage() }
    }
}

/// The passes of one sort of n elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Number of elements.
    pub n: u32,
    /// The geometry the passes are cut to.
    pub geometry: Geometry,
    /// The passes, in order.
    pub passes: Vec<Pass>,
}

impl Plan {
    /// Plans the sort of `n` elements; `key_flags` are the key kind and order bits of the `flags`
    /// push constant. Fails on more than [`MAX_ELEMENTS`] elements and on a geometry that
    /// [`Geometry::check`] refuses.
    pub fn new(n: u32, geometry: Geometry, key_flags: u32) -> Result<Plan> {
        let mut plan = Plan::tile_sorted(n, geometry, key_flags)?;
        let t = geometry.tile_log2;
        let levels = ceil_log2(u64::from(n));
        if levels <= t {
            // One pass at most: it has no next one.
            return Ok(plan);
        }
        let passes = &mut plan.passes;
        let tiles = n.div_ceil(geometry.tile());
        let base = PushConstants { n, flags: key_flags, ..PushConstants::default() };
        let last_flag = |stage: u32| {
            if stage == levels {
                FLAG_FROM_IMAGE_ON_STORE
            } else {
                0
            }
        };
        let fused = fused_for(tiles, geometry.fused);
        for stage in t + 1..=levels {
            // Strides 2^(stage-1) .. 2^t, in chunks of up to `fused` from the largest; the last
            // one or two go to a windowed local merge where that saves a pass.
            let mut top = stage - 1;
            let mut left = stage - t;
            let window = window_log2(tiles, left, fused);
            left -= window;
            while left > 0 {
                let m = left.min(fused);
                let low = 1u32 << (top + 1 - m);
                passes.push(Pass {
                    kind: PassKind::GlobalMerge,
                    substages: m,
                    stage,
                    workgroups: groups(n, low, m).div_ceil(geometry.global_wg),
                    push: PushConstants { inc: 1 << top, dir: u32::from(top == stage - 1), ..base },
                });
                top -= m;
                left -= m;
            }
            passes.push(Pass {
                kind: PassKind::LocalMerge,
                substages: window,
                stage,
                workgroups: n.div_ceil(geometry.tile() << window),
                // With a window and no global pass, the window's first substage is the stage's
                // flip.
                push: PushConstants {
                    inc: if window > 0 { geometry.tile() << (window - 1) } else { 0 },
                    dir: u32::from(window > 0 && top == stage - 1),
                    flags: key_flags | last_flag(stage),
                    ..base
                },
            });
        }
        plan.link_stages();
        Ok(plan)
    }

    /// The checks of [`Plan::new`] and the first pass of every plan: a plan of n elements that
    /// ends after its tile sort (no pass for fewer than 2 elements; the last for n of at most a
    /// tile, which then maps images back to keys).
    fn tile_sorted(n: u32, geometry: Geometry, key_flags: u32) -> Result<Plan> {
        geometry.check()?;
        if u64::from(n) > MAX_ELEMENTS {
            return Err(Error::TooLarge {
                n: n as usize,
                bytes: u64::from(n) * 4,
                limit: "the shaders' 32-bit indexing (2^31 elements)",
                value: MAX_ELEMENTS * 4,
                max: MAX_ELEMENTS,
            });
        }
        let mut passes = Vec::new();
        if n >= 2 {
            let levels = ceil_log2(u64::from(n));
            let sorted = levels.min(geometry.tile_log2);
            let last = if sorted == levels { FLAG_FROM_IMAGE_ON_STORE } else { 0 };
            passes.push(Pass {
                kind: PassKind::TileSort,
                substages: 0,
                stage: sorted,
                workgroups: n.div_ceil(geometry.tile()),
                push: PushConstants {
                    n,
                    shape: sorted,
                    flags: key_flags | FLAG_TO_IMAGE_ON_LOAD | last,
                    ..PushConstants::default()
                },
            });
        }
        Ok(Plan { n, geometry, passes })
    }

    /// Caps the workgroups of the tile sort, of every local merge without windows and of every
    /// segment pass at `groups` (0 leaves the plan as it is): each workgroup then loops over the
    /// tiles (cosets) `wg, wg + groups, ...` and loads the next while it sorts or merges this one
    /// (`push.loop_stride` = `groups`; 0 means one tile per workgroup; a looping tile sort or
    /// segment pass has `substages` 1, for the kernel build that loops). A workgroup that owns one
    /// tile waits for all of its loads before it works, leaving the memory idle meanwhile.
    ///
    /// `max_loop_tiles(kind)` bounds the tiles one workgroup of a pass of that kind loops over:
    /// where `groups` workgroups would each take more, the pass takes as many more workgroups as
    /// that needs ([`crate::tuning::max_loop_tiles`]; `u32::MAX` for no bound).
    pub fn looping_passes(mut self, groups: u32, max_loop_tiles: impl Fn(PassKind) -> u32) -> Plan {
        if groups == 0 {
            return self;
        }
        for pass in &mut self.passes {
            let looping = match pass.kind {
                PassKind::TileSort | PassKind::SegmentMerge => true,
                PassKind::LocalMerge => pass.substages == 0,
                PassKind::GlobalMerge => false,
            };
            if looping {
                let tiles = pass.workgroups;
                let capped = groups.max(tiles.div_ceil(max_loop_tiles(pass.kind).max(1)));
                if tiles > capped {
                    pass.workgroups = capped;
                    pass.push.loop_stride = capped;
                    if pass.kind != PassKind::LocalMerge {
                        pass.substages = 1;
                    }
                }
            }
        }
        self
    }

    /// Writes into each pass's `flags` the first stage of the pass after it (0 for the last), so
    /// that with a GPU-side count the last pass that count needs stores keys (`stores_keys`).
    fn link_stages(&mut self) {
        let next: Vec<u32> = self.passes.iter().skip(1).map(Pass::first_stage).chain([0]).collect();
        for (pass, next) in self.passes.iter_mut().zip(next) {
            pass.push.flags |= next << NEXT_STAGE_SHIFT;
        }
    }

    /// Index of the first pass of the last stage: the pass that reads, in its first workgroup, what
    /// the last workgroup of the pass before it wrote. Dropping the barrier before it is the
    /// surest way to expose a missing barrier on a real GPU.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn last_flip_pass(&self) -> Option<usize> {
        self.passes.iter().rposition(|p| p.kind != PassKind::TileSort && p.push.dir == 1)
    }
}

impl Plan {
    /// Plans the sort of `n` elements as [`Plan::new`] does up to the tile sort, then in
    /// [`Segment`] passes: each runs as many of the following substages as one coset of a tile's
    /// size holds, crossing a stage boundary where it falls inside (the last substages of a stage,
    /// the next stage's flip, the first of its half-cleaners). About (substages left) / log2(tile)
    /// passes instead of two or more per stage: at 2^16 elements in tiles of 2048, 8 passes
    /// instead of 11; at 2^20 in tiles of 8192, 11 instead of 17. Where a segment starts with a
    /// stage's flip or inside its strides of a tile and more, it carries a low run of
    /// [`crate::segment::SEGMENT_MIN_RUN_LOG2`] bits that it does not compare, so that it moves runs of 8
    /// consecutive elements, and it leaves at least that many substages to the next segment's tail.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn segmented(n: u32, geometry: Geometry, key_flags: u32) -> Result<Plan> {
        Plan::segmented_with_runs(n, geometry, key_flags, SegmentRuns::fixed(crate::segment::SEGMENT_MIN_RUN_LOG2))
    }

    /// [`Plan::segmented`] with carried low runs of `runs` (each at most log2(tile) - 1;
    /// [`crate::tuning::segment_runs`] picks them): a longer run moves longer stretches of consecutive elements
    /// per request to memory and leaves fewer bits of the coset to the substages, so it may take
    /// more passes ([`crate::segment::segment_passes`]); with two runs each segment that carries one takes the
    /// long run wherever that adds no pass to the plan.
    pub fn segmented_with_runs(n: u32, geometry: Geometry, key_flags: u32, runs: SegmentRuns) -> Result<Plan> {
        if runs.long < runs.short {
            return Err(Error::InvalidOption {
                name: "segment_run_long",
                value: format!("2^{}", runs.long),
                reason: "must be at least the short run",
            });
        }
        let mut plan = Plan::tile_sorted(n, geometry, key_flags)?;
        let t = geometry.tile_log2;
        let levels = ceil_log2(u64::from(n));
        let base = PushConstants { n, flags: key_flags, ..PushConstants::default() };
        let shapes = segment_shapes(levels, t, runs);
        let count = shapes.len();
        for (index, (segment, ends_in)) in shapes.into_iter().enumerate() {
            let (dir, shape) = segment.encode();
            // The sort's last pass maps order images back to keys as it stores.
            let last = index + 1 == count;
            plan.passes.push(Pass {
                kind: PassKind::SegmentMerge,
                substages: 0,
                stage: ends_in,
                workgroups: segment.workgroups(n, t, levels),
                push: PushConstants {
                    dir,
                    shape,
                    flags: key_flags | if last { FLAG_FROM_IMAGE_ON_STORE } else { 0 },
                    ..base
                },
            });
        }
        plan.link_stages();
        Ok(plan)
    }
}

/// Number of groups of 2^m elements (m substages of smallest stride `low`) whose lowest element
/// is below n: the ones a global pass must run. A group's lowest element grows with its index.
fn groups(n: u32, low: u32, m: u32) -> u32 {
    let (n, low) = (u64::from(n), u64::from(low));
    let span = low << m;
    let count = n / span * low + (n % span).min(low);
    u32::try_from(count).expect("at most n/2 + low groups, below 2^31")
}

/// Number of passes a sort of n elements takes with tiles of 2^tile_log2 elements and up to
/// `fused` substages per global pass.
pub fn pass_count(n: u64, tile_log2: u32, fused: u32) -> u64 {
    if n < 2 {
        return 0;
    }
    let above = u64::from(ceil_log2(n).saturating_sub(tile_log2));
    let tiles = u32::try_from(n.div_ceil(1 << tile_log2)).unwrap_or(u32::MAX);
    let fused = u64::from(fused_for(tiles, fused.clamp(1, MAX_FUSED)));
    // One tile sort, then stage t+m has ceil(m / fused) global passes and one local merge; with
    // a window of 2^w tiles, ceil((m - w) / fused).
    let global = |m: u64| {
        let w = u64::from(window_log2(tiles, m as u32, fused as u32));
        (m - w).div_ceil(fused)
    };
    1 + (1..=above).map(|m| global(m) + 1).sum::<u64>()
}

impl Segment {
    /// The push constants' `dir` and `shape` for this segment.
    pub fn encode(&self) -> (u32, u32) {
        let tail = if self.tail { SEGMENT_TAIL } else { 0 };
        let shape = self.low | self.high << SEGMENT_HIGH_SHIFT | tail | self.high_bit << SEGMENT_HIGH_BIT_SHIFT;
        (u32::from(self.flip), shape)
    }

    /// The shape a pass's push constants carry.
    pub fn decode(push: &PushConstants) -> Segment {
        Segment {
            low: push.shape & 31,
            tail: push.shape & SEGMENT_TAIL != 0,
            flip: push.dir != 0,
            high_bit: (push.shape >> SEGMENT_HIGH_BIT_SHIFT) & 31,
            high: (push.shape >> SEGMENT_HIGH_SHIFT) & 31,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::{max_loop_tiles, FUSED6_MIN_TILES, MAX_TILE, WINDOW4_MIN_TILES};

    #[test]
    fn loops_on_a_cpu_device_stay_under_its_loop_limit() {
        use PassKind::{LocalMerge, TileSort};
        let tiny = Geometry { tile_log2: 1, global_wg: 256, fused: 4 };
        for kind in [LocalMerge, TileSort] {
            assert_eq!(max_loop_tiles(false, &tiny, 1, kind), u32::MAX, "a GPU has no bound");
            // Tiles of 2: one substage either way.
            assert_eq!(max_loop_tiles(true, &tiny, 1, kind), 65535 / (2 * 3 * 5));
        }
        // One invocation per workgroup with tiles of 2^14: one tile per workgroup, never none.
        let huge = Geometry { tile_log2: 14, global_wg: 256, fused: 4 };
        assert_eq!(max_loop_tiles(true, &huge, 1, LocalMerge), 1);
        assert_eq!(max_loop_tiles(true, &huge, 1, TileSort), 1);
        // The default geometry on lavapipe (tiles of 8192, 512 invocations): loops of 113 tiles
        // for a local merge (13 substages), 20 for the tile sort (91).
        let geometry = Geometry { tile_log2: 13, global_wg: 256, fused: 4 };
        assert_eq!(max_loop_tiles(true, &geometry, 512, LocalMerge), 65535 / (2 * 17 * 17));
        assert_eq!(max_loop_tiles(true, &geometry, 512, LocalMerge), 113);
        assert_eq!(max_loop_tiles(true, &geometry, 512, TileSort), 65535 / (2 * 17 * 95));
        assert_eq!(max_loop_tiles(true, &geometry, 512, TileSort), 20);
        // A workgroup wider than its tile (64 elements, 1024 invocations) counts 2 elements per
        // invocation: lavapipe cut the tile sort's loop at 1024 tiles there and not at 820.
        let narrow = Geometry { tile_log2: 6, global_wg: 256, fused: 4 };
        assert_eq!(max_loop_tiles(true, &narrow, 1024, TileSort), 65535 / (2 * 3 * 25));
        assert_eq!(max_loop_tiles(true, &narrow, 1024, TileSort), 436);
        assert_eq!(max_loop_tiles(true, &narrow, 1024, LocalMerge), 65535 / (2 * 3 * 10));
        // A plan capped at one workgroup takes as many as those bounds need: 2^20 keys are 128
        // tiles, so the tile sort takes 7 workgroups and each plain local merge 2.
        let bound = |kind| max_loop_tiles(true, &geometry, 512, kind);
        let plan = Plan::new(1 << 20, geometry, 0).expect("a valid geometry").looping_passes(1, bound);
        let sort = plan.passes.iter().find(|p| p.kind == TileSort).expect("a tile sort");
        assert_eq!((sort.workgroups, sort.push.loop_stride), (7, 7));
        let merges: Vec<_> = plan.passes.iter().filter(|p| p.kind == LocalMerge && p.substages == 0).collect();
        assert!(!merges.is_empty());
        for merge in merges {
            assert_eq!((merge.workgroups, merge.push.loop_stride), (2, 2));
        }
    }

    #[test]
    fn segment_element_indices_are_linear_over_xor() {
        // glsl/segment_merge.comp takes each element's index as the XOR of its invocation's and
        // its slot's (slot_element), which holds because Segment::element is linear over GF(2)
        // in the local index and the group.
        for (n, t) in [(1u32 << 16, 11), (100_003, 8), (1 << 24, 13), (3 << 20, 12), (1000, 4)] {
            let plan = Plan::segmented(n, Geometry { tile_log2: t, global_wg: 256, fused: 5 }, 0).expect("valid");
            let tile = 1u32 << t;
            let groups = 1u32 << (32 - (n - 1).leading_zeros() - t);
            for pass in plan.passes.iter().skip(1) {
                let segment = Segment::decode(&pass.push);
                let e = |c: u32, g: u32| segment.element(t, g, c);
                assert_eq!(e(0, 0), 0, "{segment:?}");
                for (c, d) in [(1, tile - 1), (tile / 2, tile / 2 - 1), (5 % tile, 6 % tile), (tile - 1, tile - 1)] {
                    for (g, h) in [(0, 0), (1, groups - 1), (groups / 2, 3 % groups)] {
                        assert_eq!(e(c ^ d, g ^ h), e(c, g) ^ e(d, h), "{segment:?} c={c} d={d} g={g} h={h}");
                    }
                }
            }
        }
    }

    #[test]
    fn power_of_two_sorts_have_only_real_elements_in_their_cosets() {
        // glsl/unrolled/segment_merge.comp drops its bounds test where n is a power of two
        // (all_real): there the cosets of each segment pass's workgroups cover 0..n exactly once.
        for (log2, t) in [(16u32, 11u32), (20, 13), (12, 8), (9, 4), (14, 12), (17, 8)] {
            let n = 1u32 << log2;
            let plan = Plan::segmented(n, Geometry { tile_log2: t, global_wg: 256, fused: 5 }, 0).expect("valid");
            assert!(plan.passes.len() > 1, "n=2^{log2} t={t}");
            for pass in plan.passes.iter().skip(1) {
                assert_eq!(pass.kind, PassKind::SegmentMerge);
                let segment = Segment::decode(&pass.push);
                let mut seen = vec![false; n as usize];
                for group in 0..pass.workgroups {
                    for c in 0..1u32 << t {
                        let e = segment.element(t, group, c);
                        assert!(e < u64::from(n), "{segment:?} group {group} c {c}: {e}");
                        assert!(!std::mem::replace(&mut seen[e as usize], true), "{segment:?}: {e} twice");
                    }
                }
                assert!(seen.iter().all(|&s| s), "{segment:?}: not every element");
            }
        }
    }

    #[test]
    fn pass_count_matches_the_plan() {
        for tile_log2 in [1, 2, 5, 13] {
            for fused in 1..=MAX_FUSED {
                for n in (0..5000u32).chain([1 << 20, (1 << 20) + 1, 3 << 22]) {
                    let plan = Plan::new(n, Geometry { tile_log2, global_wg: 64, fused }, 0).expect("a valid geometry");
                    let count = pass_count(u64::from(n), tile_log2, fused);
                    assert_eq!(plan.passes.len() as u64, count, "n={n} t={tile_log2} f={fused}");
                }
            }
        }
    }

    #[test]
    fn pass_counts_with_8k_tiles() {
        assert_eq!(pass_count(1 << 20, 13, 1), 36);
        assert_eq!(pass_count(1 << 20, 13, 4), 18);
        // 2048 tiles: windowed local merges take the stride-T substage of every stage whose
        // global substages number 1 more than a multiple of the fusion (all of them unfused), and
        // windows of four tiles the strides 2T and T where they number 2 more.
        assert_eq!(pass_count(1 << 24, 13, 1), 78 - 11);
        assert_eq!(pass_count(1 << 24, 13, 4), 33 - 3 - 3);
        assert_eq!(pass_count(1 << 24, 13, 5), 30 - 3 - 2);
        // 512 tiles: windows of two tiles alone.
        assert_eq!(pass_count(1 << 22, 13, 5), 21);
        // 2^21 keys are 256 tiles of 8192, the fewest that take windows.
        assert_eq!(pass_count(1 << 21, 13, 5), 20 - 2);
        assert_eq!(pass_count(255 << 13, 13, 5), 20);
        assert_eq!(pass_count(1 << 13, 13, 4), 1);
        assert_eq!(pass_count((1 << 13) + 1, 13, 4), 3);
        // Six substages per global pass from 2048 tiles: one pass fewer at 2^24 and 2^25.
        assert_eq!(pass_count(1 << 20, 13, 6), 17);
        assert_eq!(pass_count(1 << 22, 13, 6), 21);
        assert_eq!(pass_count(1 << 23, 13, 6), 24);
        assert_eq!(pass_count(1 << 24, 13, 6), 24);
        assert_eq!(pass_count(1 << 25, 13, 5), 28);
        assert_eq!(pass_count(1 << 25, 13, 6), 27);
    }

    #[test]
    fn six_substages_per_global_pass_only_from_2048_tiles() {
        for tile_log2 in [1, 2, 4] {
            let geometry = Geometry { tile_log2, global_wg: 4, fused: 6 };
            let min = FUSED6_MIN_TILES << tile_log2;
            for (n, six) in [(min - (1 << tile_log2), false), (min - 1, true), (min, true), (3 * min + 5, true)] {
                let plan = Plan::new(n, geometry, 0).expect("a valid geometry");
                let most = plan.passes.iter().filter(|p| p.kind == PassKind::GlobalMerge).map(|p| p.substages).max();
                assert_eq!(most, Some(if six { 6 } else { 5 }), "n={n} t={tile_log2}");
                assert_eq!(plan.passes.len() as u64, pass_count(u64::from(n), tile_log2, 6), "n={n}");
            }
        }
    }

    #[test]
    fn fused_passes_cover_every_global_substage_once() {
        for fused in 1..=MAX_FUSED {
            let plan =
                Plan::new(1 << 20, Geometry { tile_log2: 10, global_wg: 64, fused }, 0).expect("a valid geometry");
            for stage in 11..=20 {
                // A windowed local merge runs the stride-T substage after the global passes.
                let strides: Vec<u32> = plan
                    .passes
                    .iter()
                    .filter(|p| p.stage == stage)
                    .flat_map(|p| match p.kind {
                        PassKind::GlobalMerge => (0..p.substages).map(|j| p.push.inc >> j).collect(),
                        PassKind::LocalMerge => (0..p.substages).map(|j| p.push.inc >> j).collect(),
                        _ => vec![],
                    })
                    .collect();
                let expect: Vec<u32> = (10..stage).rev().map(|j| 1 << j).collect();
                assert_eq!(strides, expect, "fused={fused} stage={stage}");
            }
        }
    }

    #[test]
    fn windows_take_the_stride_t_substage_only_where_that_saves_a_global_pass() {
        for fused in 1..=MAX_FUSED {
            for (n, windows) in [(255 << 10, false), (256 << 10, true), ((256 << 10) + 1, true)] {
                let geometry = Geometry { tile_log2: 10, global_wg: 64, fused };
                let plan = Plan::new(n, geometry, 0).expect("a valid geometry");
                // Fewer than FUSED6_MIN_TILES tiles: at most 5 substages per global pass.
                let fused = fused.min(5);
                for merge in plan.passes.iter().filter(|p| p.kind == PassKind::LocalMerge) {
                    let above = merge.stage - geometry.tile_log2;
                    let expect = windows && (above - 1) % fused == 0;
                    assert_eq!(merge.substages == 1, expect, "n={n} fused={fused} stage={}", merge.stage);
                    assert_eq!(merge.push.inc != 0, expect, "n={n} fused={fused} stage={}", merge.stage);
                    let span = if expect { 2 << geometry.tile_log2 } else { 1 << geometry.tile_log2 };
                    assert_eq!(merge.workgroups, n.div_ceil(span), "n={n} fused={fused} stage={}", merge.stage);
                    if expect {
                        assert_eq!(merge.push.inc, geometry.tile());
                    }
                    // The flip is the window's substage only in the stage with no global pass.
                    assert_eq!(merge.push.dir, u32::from(expect && above == 1));
                }
            }
        }
    }

    #[test]
    fn windows_of_four_tiles_take_the_strides_2t_and_t_where_two_tiles_save_nothing() {
        for fused in 1..=MAX_FUSED {
            let min = WINDOW4_MIN_TILES << 4;
            for (n, many) in
                [(min - 16, false), (min - 15, true), (min, true), (min + 1, true), (3 * min / 2 + 3, true)]
            {
                let geometry = Geometry { tile_log2: 4, global_wg: 64, fused };
                let plan = Plan::new(n, geometry, 0).expect("a valid geometry");
                let f = fused_for(n.div_ceil(geometry.tile()), fused);
                for merge in plan.passes.iter().filter(|p| p.kind == PassKind::LocalMerge) {
                    let above = merge.stage - geometry.tile_log2;
                    let two = (above - 1) % f == 0;
                    let four = many && !two && above >= 2 && (above - 2) % f == 0;
                    let at = format!("n={n} fused={fused} stage={}", merge.stage);
                    assert_eq!(merge.substages == 2, four, "{at}");
                    assert_eq!(merge.substages == 1, two, "{at}");
                    if four {
                        assert_eq!(merge.push.inc, 2 * geometry.tile(), "{at}");
                        assert_eq!(merge.workgroups, n.div_ceil(4 * geometry.tile()), "{at}");
                        // The flip is the window's first substage only in the stage with no
                        // global pass.
                        assert_eq!(merge.push.dir, u32::from(above == 2), "{at}");
                    }
                }
                assert_eq!(plan.passes.len() as u64, pass_count(u64::from(n), geometry.tile_log2, fused));
            }
        }
    }

    #[test]
    fn first_pass_maps_keys_in_and_only_the_last_maps_them_out() {
        for n in [2u32, 9, 100, 1000] {
            let plan = Plan::new(n, Geometry { tile_log2: 3, global_wg: 4, fused: 2 }, 0).expect("a valid geometry");
            let (first, last) = (plan.passes[0], plan.passes[plan.passes.len() - 1]);
            assert_eq!(first.kind, PassKind::TileSort);
            assert_ne!(first.push.flags & FLAG_TO_IMAGE_ON_LOAD, 0);
            assert_ne!(last.push.flags & FLAG_FROM_IMAGE_ON_STORE, 0);
            let loads = plan.passes.iter().filter(|p| p.push.flags & FLAG_TO_IMAGE_ON_LOAD != 0).count();
            let stores = plan.passes.iter().filter(|p| p.push.flags & FLAG_FROM_IMAGE_ON_STORE != 0).count();
            assert_eq!((loads, stores), (1, 1), "n={n}");
        }
    }

    #[test]
    fn invalid_geometries_and_lengths_are_errors_not_panics() {
        let valid = Geometry { tile_log2: 3, global_wg: 4, fused: 2 };
        // The first input fuzzing found: tiles of 2^196 elements overflowed a shift.
        let fuzzed = Geometry { tile_log2: 196, global_wg: 10948, fused: 196 };
        for geometry in [
            fuzzed,
            Geometry { tile_log2: 0, ..valid },
            Geometry { tile_log2: MAX_TILE.trailing_zeros() + 1, ..valid },
            Geometry { tile_log2: 32, ..valid },
            Geometry { global_wg: 0, ..valid },
            Geometry { fused: 0, ..valid },
            Geometry { fused: MAX_FUSED + 1, ..valid },
        ] {
            for n in [0, 1, 2, 1000, 3301229578] {
                let result = Plan::new(n, geometry, 0);
                assert!(matches!(result, Err(Error::InvalidOption { .. })), "{geometry:?} n={n}: {result:?}");
            }
        }
        for n in [MAX_ELEMENTS as u32 + 1, 3301229578, u32::MAX] {
            let result = Plan::new(n, valid, 0);
            assert!(matches!(result, Err(Error::TooLarge { .. })), "n={n}: {result:?}");
        }
        let largest = Plan::new(MAX_ELEMENTS as u32, valid, 0).expect("2^31 elements are within the limit");
        assert_eq!(largest.passes.len() as u64, pass_count(MAX_ELEMENTS, valid.tile_log2, valid.fused));
        for tile_log2 in 1..=MAX_TILE.trailing_zeros() {
            for fused in 1..=MAX_FUSED {
                assert!(Plan::new(100, Geometry { tile_log2, global_wg: 1, fused }, 0).is_ok());
            }
        }
    }

    #[test]
    fn group_count_is_the_number_of_lowest_elements_below_n() {
        for low in [1u32, 2, 4, 8, 16] {
            for m in 1..=MAX_FUSED {
                let span = low << m;
                for n in 0..300u32 {
                    // A group's lowest element has zeros in the m bits above log2(low).
                    let brute = (0..n).filter(|i| i % span < low).count() as u32;
                    assert_eq!(groups(n, low, m), brute, "n={n} low={low} m={m}");
                }
            }
        }
    }
}
