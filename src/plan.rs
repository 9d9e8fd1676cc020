//! The pass list of one sort, in pure Rust: which kernel runs each pass, with which push
//! constants and how many workgroups. It knows nothing of Vulkan, so it is tested exhaustively on
//! the CPU (see `model`).
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
//! fewer than [`FUSED6_MIN_TILES`] tiles), fused in registers, and then one
//! `LocalMerge` pass (strides T/2 down to 1, inside each tile). Where handing the substage of
//! stride T to the local merge saves a global pass (k - t - 1 a multiple of F) and the sort has at
//! least [`WINDOW_MIN_TILES`] tiles, that local merge takes windows of two tiles: it runs the
//! stride-T substage (the flip, in stage t+1) as it loads a window, then each tile's strides T/2
//! down to 1 in turn. Where handing it the strides 2T and T instead saves a pass (k - t - 2 a
//! multiple of F) and the sort has at least [`WINDOW2_MIN_TILES`] tiles, it takes windows of four
//! tiles the same way.
//!
//! [`Plan::segmented`] cuts the same network differently after the tile sort: into
//! `SegmentMerge` passes, each a run of consecutive substages (the end of one stage, the next
//! stage's flip and its largest strides) on cosets of a tile's size, about one pass per log2(tile)
//! substages ([`Segment`]).

use crate::error::{Error, Result};
use crate::push::{
    PushConstants, FLAG_FROM_IMAGE_ON_STORE, FLAG_TO_IMAGE_ON_LOAD, SEGMENT_HIGH_BIT_SHIFT, SEGMENT_HIGH_SHIFT,
    SEGMENT_TAIL,
};

/// The most elements one sort can take: the shaders index with 32-bit unsigned integers and the
/// flip of the last stage needs 2 * 2^30 to fit.
pub const MAX_ELEMENTS: u64 = 1 << 31;

/// The four kernels, one per kind of pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PassKind {
    /// Sorts each tile in shared memory (stages 1..=log2 tile); the first pass of every sort.
    TileSort,
    /// One substage with a stride of at least a tile, straight on the buffers.
    GlobalMerge,
    /// The substages with strides below a tile, in shared memory; the last pass of a stage.
    LocalMerge,
    /// A run of substages that may cross one stage boundary, on cosets of a tile's size in
    /// shared memory ([`Segment`]); every pass after the tile sort of a [`Plan::segmented`] plan.
    SegmentMerge,
}

impl PassKind {
    /// Every kind, in the order the pipelines are kept.
    pub const ALL: [PassKind; 4] =
        [PassKind::TileSort, PassKind::GlobalMerge, PassKind::LocalMerge, PassKind::SegmentMerge];

    /// The kernel's name as in `glsl/`.
    pub fn name(self) -> &'static str {
        match self {
            PassKind::TileSort => "tile_sort",
            PassKind::GlobalMerge => "global_merge",
            PassKind::LocalMerge => "local_merge",
            PassKind::SegmentMerge => "segment_merge",
        }
    }
}

/// The shapes the passes are cut to, from the device's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// log2 of the elements per tile of the local kernels.
    pub tile_log2: u32,
    /// Invocations per workgroup of `global_merge` (one group of 2^substages elements each).
    pub global_wg: u32,
    /// Most substages fused in registers per global pass, 1..=[`MAX_FUSED`]; 1 runs one substage
    /// per global pass, as the CUDA sample does. The local kernels' shared-memory chunks take up
    /// to `pipelines::local_chunk` substages each, never more than this.
    pub fused: u32,
}

/// The largest tile the local kernels use, whatever the shared memory: beyond it each invocation
/// loops over more comparators per substage and the gain from fewer global passes flattens.
pub const MAX_TILE: u32 = 1 << 14;

/// The most substages one invocation of a global pass fuses in registers (groups of 64 elements).
pub const MAX_FUSED: u32 = 6;

/// Sorts of at least this many tiles give a local merge windows of two tiles where that saves a
/// global pass (see the module's doc). A window's workgroup runs its two tiles one after the
/// other, so windows halve the workgroups of the pass: with fewer tiles than about twice the
/// multiprocessors that leaves some idle, and the local merge takes longer than the global pass
/// it saves. 256 tiles are 2^21 4-byte keys in tiles of 8192 (the H100 has 132 multiprocessors
/// and runs one local workgroup on each).
pub const WINDOW_MIN_TILES: u32 = 256;

/// Sorts of at least this many tiles give a local merge windows of four tiles where that saves a
/// global pass and windows of two do not. They take a quarter of the workgroups: on the H100 with
/// 1024 tiles (256 windows, about two per multiprocessor) 2^23 keys took 0.856 ms against 0.818
/// without, and 2^22 pairs 0.774 against 0.778; with 2048 tiles 2^24 keys tied (2.019 ms), 2^23
/// pairs took 1.90 against 1.96 ms and with 4096, 2^24 pairs 3.92 against 4.18 ms.
pub const WINDOW2_MIN_TILES: u32 = 2048;

/// The most substages per global pass of every build but 4-byte keys alone, and of those in sorts
/// of fewer than [`FUSED6_MIN_TILES`] tiles (groups of 32 elements).
pub const MAX_FUSED_NARROW: u32 = 5;

/// Sorts of fewer tiles than this fuse at most 5 substages per global pass even where the geometry
/// allows 6. A 6-substage pass has one invocation per 64 elements. On the H100 (4-byte keys in
/// tiles of 8192, `bench --max-fused 5` against 6, twice each): at 2^20 keys (128 tiles) its 16384
/// invocations ran at 59 to 61 % of a copy and the sort took 0.1115 against 0.1103 ms with 5; at
/// 2^21 0.194 against 0.192 ms; at 2^22 and 2^23 (512 and 1024 tiles) the two tied, and at 2^22 one
/// 6-substage pass ran at 62 % of a copy (`passes`); at 2^24 (2048 tiles) its passes ran at 81 to
/// 99 % and the sort took 1.971 against 2.000 ms.
pub const FUSED6_MIN_TILES: u32 = 2048;

/// The most substages per shared-memory chunk of the local kernels (groups of 32 elements); which
/// builds take that many is `pipelines::local_chunk`.
pub const MAX_CHUNK: u32 = 5;

impl Geometry {
    /// Elements per tile.
    ///
    /// # Panics
    /// If `tile_log2` is 32 or more (see [`Geometry::check`]).
    pub fn tile(&self) -> u32 {
        1 << self.tile_log2
    }

    /// Checks that the kernels can be built with this geometry and the planner can cut passes to
    /// it: tiles of 2 to [`MAX_TILE`] elements, at least one invocation per global workgroup, and
    /// 1 to [`MAX_FUSED`] fused substages. Every geometry `pipelines::geometry_for` makes passes.
    pub fn check(&self) -> Result<()> {
        let invalid = |name, value: u32, reason| Err(Error::InvalidOption { name, value: value.to_string(), reason });
        if !(1..=MAX_TILE.trailing_zeros()).contains(&self.tile_log2) {
            return invalid("tile_log2", self.tile_log2, "tiles must hold 2 to MAX_TILE (2^14) elements");
        }
        if self.global_wg == 0 {
            return invalid("global_wg", self.global_wg, "a global workgroup needs at least one invocation");
        }
        if !(1..=MAX_FUSED).contains(&self.fused) {
            return invalid("fused", self.fused, "must be 1 to 6");
        }
        Ok(())
    }
}

/// One pass: one kernel over the whole array, separated from its neighbours by barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Which kernel.
    pub kind: PassKind,
    /// `GlobalMerge`: how many consecutive substages it runs (strides `push.inc` down to
    /// `push.inc >> (substages - 1)`). `LocalMerge`: w when it takes windows of 2^w tiles (w = 1
    /// or 2) and runs the w substages of strides `push.inc` (the tile << (w-1)) down to the tile
    /// itself, else 0. `TileSort` and `SegmentMerge`: 1 where its workgroups loop over tiles or
    /// cosets (`push.inc` > 0, the PERSISTENT build of the kernel: [`Plan::persistent_merges`]),
    /// else 0 (a segment's shape is in the push constants: [`Segment::decode`]).
    pub substages: u32,
    /// log2 of the block size of the stage this pass belongs to.
    pub stage: u32,
    /// Workgroups the pass needs (it may be split over several dispatches).
    pub workgroups: u32,
    /// Push constants, `group_offset` left at 0 for the recorder to fill. A windowed `LocalMerge`
    /// has `inc` = its largest stride, and `dir` = 1 where its first substage is the stage's flip.
    pub push: PushConstants,
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

/// ceil(log2(n)) for n >= 1.
pub(crate) fn ceil_log2(n: u64) -> u32 {
    u64::BITS - (n.max(1) - 1).leading_zeros()
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
                    log_block: sorted,
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
    /// (`push.inc` = `groups`, the loop's stride; 0 means one tile per workgroup; a looping tile
    /// sort or segment pass has `substages` 1, for the kernel build that loops). With one local
    /// workgroup resident per multiprocessor a workgroup that owns one tile waits for all of its
    /// loads before it works and leaves the memory idle while it does; on the H100 at 2^24 u32
    /// keys (2048 tiles, 132 workgroups) each such local merge took 62 to 73 us instead of 86 to
    /// 96, and the tile sort 270 us instead of 284 (`passes --n 2^24`).
    ///
    /// `max_loop_tiles(kind)` bounds the tiles one workgroup of a pass of that kind loops over:
    /// where `groups` workgroups would each take more, the pass takes as many more workgroups as
    /// that needs (see [`max_loop_tiles`]; `u32::MAX` for no bound).
    pub fn persistent_merges(mut self, groups: u32, max_loop_tiles: impl Fn(PassKind) -> u32) -> Plan {
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
                    pass.push.inc = capped;
                    if pass.kind != PassKind::LocalMerge {
                        pass.substages = 1;
                    }
                }
            }
        }
        self
    }

    /// Index of the first pass of the last stage: the pass that reads, in its first workgroup, what
    /// the last workgroup of the pass before it wrote. Dropping the barrier before it is the
    /// surest way to expose a missing barrier on a real GPU.
    pub fn last_flip_pass(&self) -> Option<usize> {
        self.passes.iter().rposition(|p| p.kind != PassKind::TileSort && p.push.dir == 1)
    }
}

/// The shortest run of consecutive elements a [`Segment`] pass moves at a time where it chooses
/// (its low run when it carries one): 8 elements, a 32-byte sector of 4-byte keys.
pub const SEGMENT_MIN_RUN_LOG2: u32 = 3;

/// The shape of a `SegmentMerge` pass. The network's substages, in order, each compare element i
/// with i ^ v for one vector v over the index bits: the flip of stage k takes v = 2^k - 1, a
/// half-cleaner of stride 2^j takes v = 2^j. A segment runs a run of consecutive substages whose
/// vectors span at most log2(TILE) dimensions, so that each workgroup can hold one coset of their
/// span (2^u elements, u = `low` + `high` + `flip`; 2^(log2 TILE - u) such cosets) in shared memory:
///
/// - local bits 0 .. `low`: element bits 0 .. `low` (the low run; `tail`: its half-cleaners,
///   strides 2^(low-1) .. 1, run first, the end of a stage);
/// - local bits `low` .. `low` + `high`: element bits `high_bit` .. `high_bit` + `high` (the high
///   run), whose half-cleaners run last, from the largest stride down;
/// - with `flip`, local bit u - 1 applies the vector 2^P + (2^high_bit - 2^low), with P =
///   `high_bit` + `high`: the flip of the stage of blocks 2^(P+1), run after the tail and before
///   the high run. Every element bit between the two runs is complemented with it, so that in
///   local indices the flip pairs c with c ^ (2^u - 1), as a tile's flip does;
/// - the other element bits (between the runs, and above) number the cosets: from the workgroup
///   and the local bits at or above u.
///
/// Each basis vector has its own highest bit and no other basis vector sets it, so of two
/// elements that differ by one substage's vector the one at the lower local index is at the lower
/// element index: every comparator in local indices puts the smaller image first, as in a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Length of the low run (element bits 0 .. low).
    pub low: u32,
    /// The low run's half-cleaners run first (the last substages of a stage).
    pub tail: bool,
    /// A stage's flip runs after the tail.
    pub flip: bool,
    /// Lowest element bit of the high run.
    pub high_bit: u32,
    /// Length of the high run.
    pub high: u32,
}

impl Segment {
    /// Local index bits the substages use: u; the cosets of one workgroup take the rest.
    pub fn used_bits(&self) -> u32 {
        self.low + self.high + u32::from(self.flip)
    }

    /// Substages the segment runs.
    pub fn substages(&self) -> u32 {
        u32::from(self.tail) * self.low + u32::from(self.flip) + self.high
    }

    /// The push constants' `dir` and `log_block` for this shape (`inc` is the loop's stride of a
    /// persistent pass: [`Plan::persistent_merges`]).
    fn encode(&self) -> (u32, u32) {
        let tail = if self.tail { SEGMENT_TAIL } else { 0 };
        let log_block = self.low | self.high << SEGMENT_HIGH_SHIFT | tail | self.high_bit << SEGMENT_HIGH_BIT_SHIFT;
        (u32::from(self.flip), log_block)
    }

    /// The shape a pass's push constants carry.
    pub fn decode(push: &PushConstants) -> Segment {
        Segment {
            low: push.log_block & 31,
            tail: push.log_block & SEGMENT_TAIL != 0,
            flip: push.dir != 0,
            high_bit: (push.log_block >> SEGMENT_HIGH_BIT_SHIFT) & 31,
            high: (push.log_block >> SEGMENT_HIGH_SHIFT) & 31,
        }
    }

    /// Element index of local element `c` of workgroup `group`, with tiles of 2^`tile_log2`
    /// (`element_of` in glsl/segment_merge.comp).
    pub fn element(&self, tile_log2: u32, group: u32, c: u32) -> u64 {
        let (a, m, q) = (self.low, self.high, self.high_bit);
        let u = self.used_bits();
        let coset = (u64::from(c) >> u) | (u64::from(group) << (tile_log2 - u));
        let gap = q - a;
        let c = u64::from(c);
        let mut e = (c & ((1 << a) - 1))
            | (((c >> a) & ((1 << m) - 1)) << q)
            | ((coset & ((1 << gap) - 1)) << a)
            | ((coset >> gap) << (q + m + u32::from(self.flip)));
        if self.flip && (c >> (u - 1)) & 1 != 0 {
            e ^= (1 << (q + m)) | (((1 << q) - 1) ^ ((1 << a) - 1));
        }
        e
    }

    /// Workgroups whose lowest element (local element 0) is below n: the ones a pass of n
    /// elements runs. That element grows with the workgroup.
    fn workgroups(&self, n: u32, tile_log2: u32, levels: u32) -> u32 {
        let (mut lo, mut hi) = (0u64, 1u64 << levels.saturating_sub(tile_log2));
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.element(tile_log2, mid as u32, 0) < u64::from(n) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        u32::try_from(lo).expect("at most 2^31 / 2 workgroups")
    }

    /// The chunks the segment runs in local indices with up to `fused` substages per chunk, in
    /// order: what `run_segment` and `segment_chain` in glsl/segment_merge.comp work out from the
    /// push constants, and what the SHAPED build takes as specialization constants instead.
    pub fn chunks(&self, fused: u32) -> Vec<SegmentChunk> {
        let (a, u) = (self.low, self.used_bits());
        // Where the chain starts, in local stages (local stage k merges blocks of 2^k): stage
        // k, its flip next (`flip`) or `rest` of its half-cleaners left (strides 2^(rest-1) .. 1).
        let (mut k, mut rest, mut flip, mut left) = match (self.flip, self.tail) {
            // The last `a` half-cleaners of stage u-1, then stage u's flip and the high run.
            (true, true) => (u - 1, a, false, a + 1 + self.high),
            (true, false) => (u, 0, true, 1 + self.high),
            (false, true) => (a, a, false, a),
            // Strides 2^(u-1) .. 2^a of a stage: the last u - a half-cleaners of stage u + 1.
            (false, false) => (u + 1, u, false, self.high),
        };
        let mut chunks = Vec::new();
        while left > 0 {
            let mut m = fused.min(left);
            if flip {
                m = m.min(k);
                chunks.push(SegmentChunk::Run { low: k - m, m, flip: true });
                rest = k - m;
                flip = false;
            } else if rest == 0 {
                k += 1;
                flip = true;
                continue;
            } else if m <= rest {
                chunks.push(SegmentChunk::Run { low: rest - m, m, flip: false });
                rest -= m;
            } else if m == fused && fused - 1 <= k {
                // The last `rest` half-cleaners of stage k, the flip of stage k+1 and its first
                // fused - 1 - rest half-cleaners.
                chunks.push(SegmentChunk::Cross { k, a: rest });
                rest = k - (fused - 1 - rest);
                k += 1;
            } else {
                m = rest;
                chunks.push(SegmentChunk::Run { low: 0, m, flip: false });
                rest = 0;
            }
            left -= m;
        }
        chunks
    }
}

/// One chunk of a segment pass, in local indices ([`Segment::chunks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentChunk {
    /// `m` substages of smallest stride 2^`low`: with `flip`, the flip of blocks of 2^(low+m),
    /// then the half-cleaners of strides 2^(low+m-2) .. 2^low; else the half-cleaners of strides
    /// 2^(low+m-1) .. 2^low.
    Run {
        /// log2 of the smallest stride.
        low: u32,
        /// Substages.
        m: u32,
        /// The first substage is a flip.
        flip: bool,
    },
    /// Across a stage boundary, `fused` substages in all: the last `a` half-cleaners of stage `k`
    /// (strides 2^(a-1) .. 1), the flip of stage k+1 and its first fused - 1 - a half-cleaners
    /// (strides 2^(k-1) ..).
    Cross {
        /// The local stage whose end it runs.
        k: u32,
        /// Half-cleaners of stage k it runs.
        a: u32,
    },
}

impl SegmentChunk {
    /// The descriptor the SHAPED build of segment_merge takes (`shaped_chunk`): bits 0-1 the
    /// kind (1 half-cleaners, 2 a flip first, 3 across a stage boundary), bits 2-4 m or a, bits
    /// 5-9 low or k; never 0, which stands for no chunk.
    pub fn encode(&self) -> u32 {
        match *self {
            SegmentChunk::Run { low, m, flip } => (1 + u32::from(flip)) | m << 2 | low << 5,
            SegmentChunk::Cross { k, a } => 3 | a << 2 | k << 5,
        }
    }

    /// The chunk's kind and size without its strides, as the chain builds of segment_merge take
    /// them (`SHAPE_CODE0` .. in `chain_chunk`, one module per chain of codes: build.rs's
    /// `SHAPED_CHAIN_BUILDS`): bits 0-1 the kind as in [`SegmentChunk::encode`], bits 2-4 m or a, bits
    /// 5-7 a cross chunk's head, fused - 1 - a; never 0. `fused` as for [`Segment::chunks`].
    pub fn chain_code(&self, fused: u32) -> u32 {
        match *self {
            SegmentChunk::Run { m, flip, .. } => (1 + u32::from(flip)) | m << 2,
            SegmentChunk::Cross { a, .. } => 3 | a << 2 | (fused - 1 - a) << 5,
        }
    }

    /// The substages the chunk runs, in order, as local comparator vectors: a flip of blocks of
    /// 2^k pairs c with c ^ (2^k - 1) inside each block, a half-cleaner of stride 2^j c with
    /// c ^ 2^j; `fused` as for [`Segment::chunks`].
    pub fn substages(&self, fused: u32) -> Vec<LocalSubstage> {
        match *self {
            SegmentChunk::Run { low, m, flip: true } => std::iter::once(LocalSubstage::Flip(low + m))
                .chain((low..low + m - 1).rev().map(LocalSubstage::HalfCleaner))
                .collect(),
            SegmentChunk::Run { low, m, flip: false } => (low..low + m).rev().map(LocalSubstage::HalfCleaner).collect(),
            SegmentChunk::Cross { k, a } => (0..a)
                .rev()
                .map(LocalSubstage::HalfCleaner)
                .chain(std::iter::once(LocalSubstage::Flip(k + 1)))
                .chain((k + a + 1 - fused..k).rev().map(LocalSubstage::HalfCleaner))
                .collect(),
        }
    }
}

/// One substage of a segment in local indices ([`SegmentChunk::substages`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalSubstage {
    /// The flip of blocks of 2^k.
    Flip(u32),
    /// The half-cleaner of stride 2^j.
    HalfCleaner(u32),
}

impl Plan {
    /// Plans the sort of `n` elements as [`Plan::new`] does up to the tile sort, then in
    /// [`Segment`] passes: each runs as many of the following substages as one coset of a tile's
    /// size holds, crossing a stage boundary where it falls inside (the last substages of a stage,
    /// the next stage's flip, the first of its half-cleaners). About (substages left) / log2(tile)
    /// passes instead of two or more per stage: at 2^16 elements in tiles of 2048, 8 passes
    /// instead of 11; at 2^20 in tiles of 8192, 11 instead of 17. Where a segment starts with a
    /// stage's flip or inside its strides of a tile and more, it carries a low run of
    /// [`SEGMENT_MIN_RUN_LOG2`] bits that it does not compare, so that it moves runs of 8
    /// consecutive elements, and it leaves at least that many substages to the next segment's tail.
    pub fn segmented(n: u32, geometry: Geometry, key_flags: u32) -> Result<Plan> {
        Plan::segmented_with_runs(n, geometry, key_flags, SegmentRuns::fixed(SEGMENT_MIN_RUN_LOG2))
    }

    /// [`Plan::segmented`] with carried low runs of `runs` (each at most log2(tile) - 1;
    /// [`segment_runs`] picks them): a longer run moves longer stretches of consecutive elements
    /// per request to memory and leaves fewer bits of the coset to the substages, so it may take
    /// more passes ([`segment_passes`]); with two runs each segment that carries one takes the
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
            let (dir, log_block) = segment.encode();
            // The sort's last pass maps order images back to keys as it stores.
            let last = index + 1 == count;
            plan.passes.push(Pass {
                kind: PassKind::SegmentMerge,
                substages: 0,
                stage: ends_in,
                workgroups: segment.workgroups(n, t, levels),
                push: PushConstants {
                    dir,
                    log_block,
                    flags: key_flags | if last { FLAG_FROM_IMAGE_ON_STORE } else { 0 },
                    ..base
                },
            });
        }
        Ok(plan)
    }
}

/// The carried low runs of a segment plan (log2 elements, each capped at log2(tile) - 1): every
/// segment that carries a run carries 2^`short` or 2^`long` elements, chosen pass by pass for
/// the fewest passes, then the fewest that carry the short run ([`Plan::segmented_with_runs`]).
/// `short` = `long` gives every such segment the same run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRuns {
    /// log2 of the shorter run.
    pub short: u32,
    /// log2 of the longer run (at least `short`).
    pub long: u32,
}

impl SegmentRuns {
    /// Every segment that carries a run carries 2^`run_log2` elements.
    pub fn fixed(run_log2: u32) -> SegmentRuns {
        SegmentRuns { short: run_log2, long: run_log2 }
    }
}

/// Where the network stands after some segments: stage `stage`, its flip next (`next` None) or
/// its half-cleaners of strides 2^p .. 1 (Some(p)); past the sort's end where `stage` > levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Cursor {
    stage: u32,
    next: Option<u32>,
}

/// The segment that starts at `at`, in a sort of 2^`levels` elements in tiles of 2^`t`, carrying
/// a low run of 2^`run` (at most t - 1) where it carries one: its shape, the stage it ends in,
/// where the network stands after it, and whether it carried the run.
fn segment_step(at: Cursor, levels: u32, t: u32, run: u32) -> (Segment, u32, Cursor, bool) {
    let stage = at.stage;
    match at.next {
        None => {
            // The flip and the largest strides of `stage`, over a carried low run.
            let high = (t - 1 - run).min(stage - 1 - run);
            let high_bit = stage - 1 - high;
            let shape = Segment { low: run, tail: false, flip: true, high_bit, high };
            (shape, stage, Cursor { stage, next: Some(high_bit - 1) }, true)
        }
        Some(p) if p + 1 > t => {
            // Strides of a tile and more, within a stage, over a carried low run.
            let high = t - run;
            let high_bit = p + 1 - high;
            let shape = Segment { low: run, tail: false, flip: false, high_bit, high };
            (shape, stage, Cursor { stage, next: Some(high_bit - 1) }, true)
        }
        Some(p) if stage == levels || p + 1 == t => {
            // The stage's last strides alone: the last pass of the sort, or a tail that fills the
            // tile.
            let low = p + 1;
            let shape = Segment { low, tail: true, flip: false, high_bit: low, high: 0 };
            (shape, stage, Cursor { stage: stage + 1, next: None }, false)
        }
        Some(p) => {
            // The stage's last strides, then the next stage's flip and largest strides.
            let low = p + 1;
            let high = (t - 1 - low).min(stage - low);
            let high_bit = stage - high;
            let shape = Segment { low, tail: true, flip: true, high_bit, high };
            (shape, stage + 1, Cursor { stage: stage + 1, next: Some(high_bit - 1) }, false)
        }
    }
}

/// The segments after the tile sort of a sort of 2^`levels` elements in tiles of 2^`t` with
/// carried low runs `runs`, each with the stage it ends in.
///
/// Every segment's shape depends only on where the network stands and the run it carries, so
/// the fewest passes (then the fewest short runs) from each standpoint is a shortest path over
/// the few standpoints a sort has (at most 31 stages by 32 strides), found from the end.
fn segment_shapes(levels: u32, t: u32, runs: SegmentRuns) -> Vec<(Segment, u32)> {
    let mut shapes = Vec::new();
    if levels <= t {
        return shapes;
    }
    let (short, long) = (runs.short.min(t - 1), runs.long.min(t - 1));
    let mut best = std::collections::HashMap::new();
    let start = Cursor { stage: t + 1, next: None };
    cost_from(start, levels, t, (short, long), &mut best);
    let mut at = start;
    while at.stage <= levels {
        let (_, _, run) = best[&at];
        let (shape, ends_in, after, _) = segment_step(at, levels, t, run);
        shapes.push((shape, ends_in));
        at = after;
    }
    shapes
}

/// (passes, passes carrying the short run) of the best segments from `at` to the end of the sort,
/// for [`segment_shapes`]; `best` keeps each standpoint's with the run its first segment takes
/// (the long one where the two tie).
fn cost_from(
    at: Cursor,
    levels: u32,
    t: u32,
    (short, long): (u32, u32),
    best: &mut std::collections::HashMap<Cursor, (u32, u32, u32)>,
) -> (u32, u32) {
    if at.stage > levels {
        return (0, 0);
    }
    if let Some(&(passes, shorts, _)) = best.get(&at) {
        return (passes, shorts);
    }
    let mut chosen: Option<(u32, u32, u32)> = None;
    for run in [long, short] {
        let (_, _, after, carried) = segment_step(at, levels, t, run);
        let (passes, shorts) = cost_from(after, levels, t, (short, long), best);
        let cost = (passes + 1, shorts + u32::from(carried && run < long), run);
        if chosen.is_none_or(|c| (cost.0, cost.1) < (c.0, c.1)) {
            chosen = Some(cost);
        }
        if !carried || short == long {
            // The run makes no difference to this segment.
            break;
        }
    }
    let chosen = chosen.expect("one run at least");
    best.insert(at, chosen);
    (chosen.0, chosen.1)
}

/// Segment passes after the tile sort of a sort of `n` elements in tiles of 2^`tile_log2` with
/// carried low runs `runs` ([`Plan::segmented_with_runs`]).
pub fn segment_passes(n: u32, tile_log2: u32, runs: SegmentRuns) -> usize {
    segment_shapes(ceil_log2(u64::from(n)), tile_log2, runs).len()
}

/// The carried low run (log2 elements) that [`segment_runs`] gives some segments instead of
/// [`SEGMENT_MIN_RUN_LOG2`]: 16 elements, 64 bytes of 4-byte keys.
pub const SEGMENT_LONG_RUN_LOG2: u32 = 4;

/// The carried low runs of a segment plan by default, for `n` elements in `geometry`'s tiles,
/// keys of `key_bytes`, elements (key and value) of `element_bytes`, on a device of
/// `multiprocessors`: in sorts of more tiles than multiprocessors, runs of 16
/// ([`SEGMENT_LONG_RUN_LOG2`]) for 4-byte keys where that takes no more passes than runs of 8,
/// and for 4-byte keys with values there whatever it takes; runs of 8 ([`SEGMENT_MIN_RUN_LOG2`])
/// everywhere else. Every carrying segment of a sort takes the same run: runs chosen pass by
/// pass ([`SegmentRuns`] with two lengths) did not pay.
///
/// An empirical rule, from the H100 (132 multiprocessors; `bench --reps 20 --warmup 5`, two
/// processes each, alternating; docs/PERFORMANCE.md). Builds with runs of 8, 16 and 32 elements
/// (`--sizes 2^20,2^22,2^24 --payload keys,pairs`): runs of 16 took u32 keys at 2^22 from 0.3564
/// to 0.3486 ms and pairs from 0.7118 to 0.6691 ms (15 and 18 passes either way), u32 pairs at
/// 2^24 from 3.440 to 3.290 ms with one pass more (23), and tied at 2^20 pairs (14 passes
/// against 13); with one pass more u32 keys lost at 2^24 (1.571 -> 1.596 ms) and 2^20 (0.0902 ->
/// 0.0944 ms, one tile per multiprocessor). Runs of 32 lost to runs of 16 everywhere. Runs of 8
/// or 16 pass by pass, 16 wherever that adds no pass (`--segment-run-long 16`): u32 keys at 2^24
/// (18 passes, 4 of 7 carrying 16) took 1.578 ms against 1.557 / 1.567 with runs of 8, at 12 M
/// 1.245 against 1.222 / 1.230, at 2^23 0.727 against 0.728 / 0.733, at 2^20 tied; u32 pairs at
/// 2^23 (20 passes, 6 of 8 carrying 16) 1.549 against 1.573 ms with runs of 16 (21 passes), at
/// 2^24 (22 passes, 3 of 9) 3.313 against 3.303. Wider keys move 64 bytes per run of 8 already
/// and were not measured.
pub fn segment_runs(
    n: u32,
    geometry: &Geometry,
    key_bytes: u32,
    element_bytes: u32,
    multiprocessors: u32,
) -> SegmentRuns {
    let tiles = n.div_ceil(geometry.tile());
    if key_bytes != 4 || multiprocessors == 0 || tiles <= multiprocessors {
        return SegmentRuns::fixed(SEGMENT_MIN_RUN_LOG2);
    }
    let t = geometry.tile_log2;
    let (short, long) = (SegmentRuns::fixed(SEGMENT_MIN_RUN_LOG2), SegmentRuns::fixed(SEGMENT_LONG_RUN_LOG2));
    let pairs = element_bytes > key_bytes;
    if pairs || segment_passes(n, t, long) <= segment_passes(n, t, short) {
        long
    } else {
        short
    }
}

/// The smallest tile a segment plan is given by default ([`segment_tile`]).
pub const SEGMENT_MIN_TILE: u32 = 2048;

/// The most bytes of a tile's elements with which a segment plan pays on few tiles: in sorts
/// of more tiles than half the multiprocessors it pays with any tile ([`segments_pay`]). On the
/// H100, 32 tiles of 32 KiB lost (2^18 u32 keys, 2^17 u32 pairs) and 32 of 24 KiB won (2^16
/// u64 pairs).
const SEGMENT_SMALL_TILE_BYTES: u32 = 24 * 1024;

/// The bytes per element from which a sort takes segments beyond the multiprocessors even where
/// its segment passes do not loop ([`segments_pay`]): on the H100, one coset per workgroup over
/// more tiles than multiprocessors paid for u64 pairs (2^20 in 256 tiles of 4096: 13 passes
/// against 18, -11 %), while u32 pairs lost 12 % at 2^20 and u64 keys tied.
const SEGMENT_WIDE_ELEMENT_BYTES: u32 = 12;

/// Whether segment passes of elements of `element_bytes` (key and value) loop over cosets where
/// they have more than the merge workgroups ([`Plan::persistent_merges`]): not for 12-byte
/// elements (u64 pairs), whose looping build, with its next coset ahead in registers, lost on the
/// H100 to the build before it (one coset per workgroup, element indices spread bit by bit): u64
/// pairs 2^20 0.3408 -> 0.3481 ms, 2^22 1.674 -> 1.774 ms (`bench --type u64 --payload pairs`, one
/// process each). Their local kernels already spill registers without the ahead slots.
pub fn segments_loop(element_bytes: u32) -> bool {
    element_bytes < SEGMENT_WIDE_ELEMENT_BYTES
}

/// The smallest tile with which a sort takes segments beyond the multiprocessors
/// ([`segments_pay`]): the tiles measured there were the largest that 48 KiB of shared memory
/// holds (8192 u32 keys, 4096 u32 pairs, u64 keys and u64 pairs); u32 pairs in 512 tiles of 2048
/// lost 12 % with one coset per workgroup, and smaller tiles were not measured looping.
const SEGMENT_BEYOND_MIN_TILE: u32 = 4096;

/// The tile a sort of `n` elements takes where it may run on segment passes: the smallest power
/// of two from [`SEGMENT_MIN_TILE`] up to `max_tile` that cuts n into 3 to `multiprocessors`
/// tiles, so that every pass after the tile sort has as many workgroups as it can while each
/// still holds one coset; None where no tile does (then the sort takes the other plan's tiles).
/// On the H100 (132 multiprocessors) a segment pass of 2^18 keys took 5.5 to 6.1 us in 128 tiles
/// of 2048 against 8.2 to 9.1 us in 32 tiles of 8192 (`passes --n 2^18`, separate runs), and the
/// sort took 57.5 us against 68.0 (12 passes against 11; `bench --max-tile 2048 --segments on`
/// against the default, two processes each, docs/PERFORMANCE.md).
pub fn segment_tile(n: u32, max_tile: u32, multiprocessors: u32) -> Option<u32> {
    let mut tile = SEGMENT_MIN_TILE;
    while tile <= max_tile {
        let tiles = n.div_ceil(tile);
        if tiles <= 2 {
            return None;
        }
        if tiles <= multiprocessors {
            return Some(tile);
        }
        tile = tile.checked_mul(2)?;
    }
    None
}

/// Whether a sort takes [`Plan::segmented`] by default (`SorterDesc::segment_merges` unset), on
/// a device that reports its `multiprocessors`, for the `merge_groups` of
/// [`Plan::persistent_merges`] (0: no pass loops):
/// - in sorts of 3 to `multiprocessors` tiles (one coset per workgroup) whose tiles hold at most
///   24 KiB (`element_bytes`: key and value, 4 to 12 bytes) or number more than half the
///   multiprocessors;
/// - in sorts of more tiles than that, in tiles of at least `SEGMENT_BEYOND_MIN_TILE` (4096),
///   where the segment passes loop over cosets (`merge_groups` > 0 and [`segments_loop`]), and
///   for 12-byte elements (u64 pairs), which take one coset per workgroup there.
///
/// An empirical rule, from the H100 (132 multiprocessors; `bench --payload keys,pairs --reps 20
/// --warmup 5` with and without segments and at several tiles, two processes each, alternating;
/// docs/PERFORMANCE.md).
/// With the tiles of [`segment_tile`], u32 keys gained from 2^14 to 2^20 (2^16 -13 %, 2^18 -15 %,
/// 2^19 -13 %, 2^20 -11 %) and tied at 2^13 (4 tiles); u32 pairs from 2^14 to 2^19 (2^16 -8 %,
/// 2^18 -15 %, 2^19 -6 %); u64 keys from 2^14 to 2^19 (2^17 -23 %, 2^18 -25 %) and u64 pairs from
/// 2^16 to 2^19 (2^17 -27 %, 2^18 -28 %). They lost at 2^12 (2 tiles, 3 passes either way: +10 %)
/// and with few tiles of 32 KiB (2^18 u32 keys in 32 tiles of 8192: +6 %; 2^17 u32 pairs in 32 of
/// 4096: +2 %). Sorts of 4 tiles of 2048 u32 pairs (2^13) and 8 of u64 pairs (2^14) read 0.7 %
/// slower, within the spread of the runs.
///
/// Beyond the multiprocessors, segment passes with one coset per workgroup lost for u32 (1.5 M
/// keys and up: +4 to +7 %; 2^20 pairs: +12 %) and gained for u64 pairs in tiles of 4096 (2^20
/// -11 %, 1.5 M -10 %, 2^21 -6 %, 2^22 -7 %, 2^23 -3 %, 2^24 -1.3 %). Looping over cosets with the
/// next loaded ahead, and with element indices taken as XORs, they gained for u32 keys (2^21
/// -5.9 %, 2^22 -5.9 %, 2^24 -10.6 %; 2^23 tied in its fast runs), u32 pairs (2^21 -2.9 %, 2^23
/// -6 %, 2^24 -4.5 %; 2^22 lost 2.5 %) and u64 keys (2^21 -4.6 %, 2^23 -3.4 %).
pub fn segments_pay(n: u32, geometry: &Geometry, element_bytes: u32, multiprocessors: u32, merge_groups: u32) -> bool {
    let tiles = n.div_ceil(geometry.tile());
    let small = geometry.tile().saturating_mul(element_bytes) <= SEGMENT_SMALL_TILE_BYTES;
    let within = tiles <= multiprocessors && (small || 2 * tiles > multiprocessors);
    let looping = merge_groups > 0 && segments_loop(element_bytes);
    let wide = element_bytes >= SEGMENT_WIDE_ELEMENT_BYTES;
    let beyond = tiles > multiprocessors && geometry.tile() >= SEGMENT_BEYOND_MIN_TILE && (looping || wide);
    tiles > 2 && multiprocessors > 0 && (within || beyond)
}

/// The most iterations Mesa's llvmpipe (lavapipe, Mesa 22.3 on Debian 12) runs one loop of a
/// shader invocation for: it ends the loop silently after 65535, counting every iteration since
/// the invocation began, so an inner loop's count adds up over every pass of the loop around it.
/// A persistent local merge or tile sort that looped over too many tiles on it stopped partway and
/// left the rest unsorted (`bench --merge-groups 1 --max-tile 256 --sizes 2^20` without this bound,
/// and a one-loop probe shader that stopped after exactly 65535 iterations).
pub const CPU_LOOP_LIMIT: u32 = 65535;

/// The most tiles (cosets) one workgroup of a persistent tile sort, local merge or segment pass
/// (`kind`, [`Plan::persistent_merges`]) may loop over on a device with a loop limit such as
/// [`CPU_LOOP_LIMIT`] (`cpu`: the device is a CPU implementation; GPUs get `u32::MAX`). Each tile
/// costs the kernel's loops at most about 2 x (elements per invocation + 1) x (substages + 4)
/// iterations, a local merge or segment pass log2(tile) substages (a segment runs at most as
/// many as its coset has index bits) and the tile sort log2(tile) (log2(tile) + 1) / 2, with at
/// least 2 elements per invocation counted: a bound with room over what lavapipe's failures imply
/// (the first loop count that failed, against the limit): 18 to 32 iterations per tile for the
/// local merge at tiles of 256 and 1024, 64 to 85, 120 to 126 and 171 to 256 for the tile sort at
/// tiles of 64, 256 and 1024. A workgroup wider than its tile costs about as much
/// per tile as a narrower one (tiles of 64 with 1024 invocations: 64 to 80 for the tile sort),
/// hence the floor; without it that case counted 50 and sorted wrongly.
pub fn max_loop_tiles(cpu: bool, geometry: &Geometry, local_wg: u32, kind: PassKind) -> u32 {
    if !cpu {
        return u32::MAX;
    }
    let log2 = geometry.tile_log2;
    let substages = if kind == PassKind::TileSort { log2 * (log2 + 1) / 2 } else { log2 };
    let per_invocation = (geometry.tile() / local_wg.max(1)).max(2);
    let per_tile = 2 * (per_invocation + 1) * (substages + 4);
    (CPU_LOOP_LIMIT / per_tile).max(1)
}

/// Tiles per window (log2) of the local merge of a stage with `left` global substages (strides of
/// a tile and more), for a sort of `tiles` tiles: 1 where handing the stride-T substage to the
/// local merge saves a global pass (left - 1 a multiple of `fused`, from [`WINDOW_MIN_TILES`]
/// tiles), else 2 where handing it the strides 2T and T does (left - 2 a multiple of `fused`,
/// from [`WINDOW2_MIN_TILES`]), else 0.
fn window_log2(tiles: u32, left: u32, fused: u32) -> u32 {
    if tiles >= WINDOW_MIN_TILES && (left - 1) % fused == 0 {
        1
    } else if tiles >= WINDOW2_MIN_TILES && left >= 2 && (left - 2) % fused == 0 {
        2
    } else {
        0
    }
}

/// The most substages a global pass of a sort of `tiles` tiles fuses, for a geometry's `fused`:
/// 6 only from [`FUSED6_MIN_TILES`] tiles.
fn fused_for(tiles: u32, fused: u32) -> u32 {
    if tiles < FUSED6_MIN_TILES {
        fused.min(MAX_FUSED_NARROW)
    } else {
        fused
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_chunks_run_the_segments_substages_in_order() {
        // Every shape of every segment plan from tiles of 2^2 to 2^14, carried runs of 2 to
        // 2^(t-1), against the substages the shape names (model.rs compares elements the same
        // way), for each chunk size a kernel may take.
        let mut checked = 0;
        for t in 2..=14 {
            for levels in t + 1..=26 {
                for run in 1..t {
                    for (segment, _) in segment_shapes(levels, t, SegmentRuns::fixed(run)) {
                        let u = segment.used_bits();
                        let tail =
                            (0..if segment.tail { segment.low } else { 0 }).rev().map(LocalSubstage::HalfCleaner);
                        let flip = segment.flip.then_some(LocalSubstage::Flip(u));
                        let high = (segment.low..segment.low + segment.high).rev().map(LocalSubstage::HalfCleaner);
                        let want: Vec<LocalSubstage> = tail.chain(flip).chain(high).collect();
                        for fused in 1..=MAX_CHUNK {
                            let chunks = segment.chunks(fused);
                            let got: Vec<LocalSubstage> = chunks.iter().flat_map(|c| c.substages(fused)).collect();
                            assert_eq!(got, want, "{segment:?} fused {fused}: {chunks:?}");
                            for c in &chunks {
                                let d = c.encode();
                                assert!(d != 0 && d < 1 << 10, "{c:?} encodes as {d:#x}");
                                if let SegmentChunk::Run { m, .. } = c {
                                    assert!((1..=fused).contains(m), "{c:?} fused {fused}");
                                }
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 1000, "{checked} shapes checked");
    }

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
        let plan = Plan::new(1 << 20, geometry, 0).expect("a valid geometry").persistent_merges(1, bound);
        let sort = plan.passes.iter().find(|p| p.kind == TileSort).expect("a tile sort");
        assert_eq!((sort.workgroups, sort.push.inc), (7, 7));
        let merges: Vec<_> = plan.passes.iter().filter(|p| p.kind == LocalMerge && p.substages == 0).collect();
        assert!(!merges.is_empty());
        for merge in merges {
            assert_eq!((merge.workgroups, merge.push.inc), (2, 2));
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
        // glsl/segment_merge.comp drops its bounds test where n is a power of two (all_real):
        // there the cosets of each segment pass's workgroups cover 0..n exactly once.
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
            let min = WINDOW2_MIN_TILES << 4;
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

    /// (passes, segments that carry the short run) of a list of shapes planned with `runs`.
    fn passes_and_shorts(shapes: &[(Segment, u32)], runs: SegmentRuns) -> (usize, usize) {
        let shorts = shapes.iter().filter(|(s, _)| !s.tail && s.low == runs.short && runs.short < runs.long).count();
        (shapes.len(), shorts)
    }

    /// The best (passes, short runs) over every sequence of run choices from `at`, tried in full.
    fn best_by_trying_all(at: Cursor, levels: u32, t: u32, runs: SegmentRuns) -> (usize, usize) {
        if at.stage > levels {
            return (0, 0);
        }
        let (short, long) = (runs.short.min(t - 1), runs.long.min(t - 1));
        [long, short]
            .into_iter()
            .map(|run| {
                let (_, _, after, carried) = segment_step(at, levels, t, run);
                let (passes, shorts) = best_by_trying_all(after, levels, t, runs);
                (passes + 1, shorts + usize::from(carried && run < long))
            })
            .min()
            .expect("two choices")
    }

    #[test]
    fn mixed_runs_take_the_fewest_passes_then_the_fewest_short_runs() {
        let pairs = [(3, 4), (2, 4), (1, 3), (3, 5), (0, 2)];
        let small = (4..=8).flat_map(|t| (t + 1..=t + 5).map(move |levels| (t, levels)));
        let large = (11..=13).flat_map(|t| (t + 1..=24).map(move |levels| (t, levels)));
        for ((t, levels), (short, long)) in small.chain(large).flat_map(|c| pairs.map(move |r| (c, r))) {
            let runs = SegmentRuns { short, long };
            let what = format!("t={t} levels={levels} runs {short}/{long}");
            let shapes = segment_shapes(levels, t, runs);
            // Capped at t - 1 as the planner caps them.
            let capped = SegmentRuns { short: short.min(t - 1), long: long.min(t - 1) };
            let got = passes_and_shorts(&shapes, capped);
            assert_eq!(got, best_by_trying_all(Cursor { stage: t + 1, next: None }, levels, t, runs), "{what}");
            for fixed in [short, long] {
                assert!(got.0 <= segment_shapes(levels, t, SegmentRuns::fixed(fixed)).len(), "{what}");
            }
            // Every carrying segment takes one of the two runs, the rest none.
            for (s, _) in &shapes {
                assert!(s.tail || s.low == capped.short || s.low == capped.long, "{what}: {s:?}");
            }
        }
        // Equal runs plan what a fixed run plans.
        assert_eq!(
            segment_shapes(24, 13, SegmentRuns { short: 3, long: 3 }),
            segment_shapes(24, 13, SegmentRuns::fixed(3))
        );
    }

    #[test]
    fn segments_carry_runs_of_16_only_where_they_paid_on_the_h100() {
        let runs = |n: u32, tile_log2, key_bytes, element_bytes, sms| {
            segment_runs(n, &Geometry { tile_log2, global_wg: 256, fused: 6 }, key_bytes, element_bytes, sms)
        };
        let fixed = SegmentRuns::fixed;
        let mixed = SegmentRuns { short: SEGMENT_MIN_RUN_LOG2, long: SEGMENT_LONG_RUN_LOG2 };
        // (n, log2 of the tile, key bytes, element bytes, the runs) on 132 multiprocessors, with
        // the tiles the sorter gives these sizes.
        for (n, t, key, element, wanted) in [
            // u32 keys: 2^22 (14 segment passes either way) paid, 2^24 (19 against 18) lost.
            (1 << 22, 13, 4, 4, fixed(4)),
            (1 << 24, 13, 4, 4, fixed(3)),
            (1 << 23, 13, 4, 4, fixed(3)),
            (1 << 21, 13, 4, 4, fixed(4)),
            // One tile per multiprocessor or fewer: 2^20 keys lost with one pass more.
            (1 << 20, 13, 4, 4, fixed(3)),
            (1 << 18, 11, 4, 4, fixed(3)),
            // u32 pairs beyond the multiprocessors, whatever the passes.
            (1 << 20, 12, 4, 8, fixed(4)),
            (1 << 22, 12, 4, 8, fixed(4)),
            (1 << 24, 12, 4, 8, fixed(4)),
            (1 << 16, 11, 4, 8, fixed(3)),
            // 8-byte keys were not measured.
            (1 << 22, 12, 8, 8, fixed(3)),
            (1 << 22, 12, 8, 12, fixed(3)),
        ] {
            assert_eq!(runs(n, t, key, element, 132), wanted, "n={n} tile 2^{t} {key}/{element} bytes");
            assert_eq!(runs(n, t, key, element, 0), fixed(SEGMENT_MIN_RUN_LOG2), "no multiprocessor count: n={n}");
        }
        // segment_passes counts what segmented_with_runs plans after the tile sort.
        for (n, t) in [(1u32 << 22, 13), (1 << 24, 13), (1 << 24, 12), (3_000_000, 12), (1 << 16, 11), (5, 4)] {
            for r in (1..=5).map(fixed).chain([mixed, SegmentRuns { short: 2, long: 5 }]) {
                let plan = Plan::segmented_with_runs(n, Geometry { tile_log2: t, global_wg: 256, fused: 5 }, 0, r);
                assert_eq!(plan.expect("valid").passes.len() - 1, segment_passes(n, t, r), "n={n} t={t} {r:?}");
            }
        }
        let count = |n, t, r| segment_passes(n, t, r);
        assert_eq!((count(1 << 22, 13, fixed(3)), count(1 << 22, 13, fixed(4))), (14, 14));
        assert_eq!((count(1 << 24, 12, fixed(3)), count(1 << 24, 12, fixed(4))), (21, 22));
        // The planner's choice at 2^24 u32 keys: as few passes as runs of 8 (one fewer than
        // runs of 16), 4 of the 7 that carry a run carrying 16.
        let shapes = segment_shapes(24, 13, mixed);
        assert_eq!(passes_and_shorts(&shapes, mixed), (18, 3));
        assert_eq!((count(1 << 24, 13, fixed(3)), count(1 << 24, 13, fixed(4))), (18, 19));
        // A long run shorter than the short one is refused.
        let refused = Plan::segmented_with_runs(
            1 << 20,
            Geometry { tile_log2: 13, global_wg: 256, fused: 5 },
            0,
            SegmentRuns { short: 4, long: 3 },
        );
        assert!(matches!(refused, Err(Error::InvalidOption { name: "segment_run_long", .. })));
    }

    #[test]
    fn segments_are_the_default_only_where_they_paid_on_the_h100() {
        // The sizes measured on the H100 (132 multiprocessors), with the tiles the sorter gives
        // them: segment_tile's where there is one, else 32 tiles wanted, at least 2048.
        let on_with = |n: u32, tile_log2, bytes, sms, merge_groups| {
            segments_pay(n, &Geometry { tile_log2, global_wg: 256, fused: 6 }, bytes, sms, merge_groups)
        };
        // The default merge workgroups: one per multiprocessor.
        let on = |n: u32, tile_log2, bytes, sms| on_with(n, tile_log2, bytes, sms, sms);
        // (n, log2 of the tile, bytes per element: u32 keys 4, u32 pairs and u64 keys 8, u64
        // pairs 12, whether segments are the default).
        let cases = [
            (1 << 12, 11, 4, false),
            (1 << 13, 11, 4, true),
            (1 << 15, 11, 4, true),
            (100_000, 11, 4, true),
            (1 << 16, 11, 4, true),
            (1 << 17, 11, 4, true),
            (1 << 18, 11, 4, true),
            (393_216, 12, 4, true),
            (1 << 19, 12, 4, true),
            (786_432, 13, 4, true),
            (1 << 20, 13, 4, true),
            // Beyond the multiprocessors, where the segment passes loop.
            (1_500_000, 13, 4, true),
            (1 << 21, 13, 4, true),
            (1 << 24, 13, 4, true),
            // The other plan's tiles, where segments lost.
            (1 << 18, 13, 4, false),
            (1 << 19, 13, 4, false),
            // u32 pairs.
            (1 << 12, 11, 8, false),
            (1 << 14, 11, 8, true),
            (1 << 16, 11, 8, true),
            (100_000, 11, 8, true),
            (1 << 17, 11, 8, true),
            (1 << 18, 11, 8, true),
            (1 << 19, 12, 8, true),
            (786_432, 12, 8, true),
            (1 << 20, 12, 8, true),
            (1 << 24, 12, 8, true),
            // 32 tiles of 32 KiB lost.
            (1 << 17, 12, 8, false),
            // u64 keys.
            (1 << 14, 11, 8, true),
            (1 << 16, 11, 8, true),
            (1 << 17, 11, 8, true),
            (1 << 18, 11, 8, true),
            (1 << 19, 12, 8, true),
            (1 << 20, 12, 8, true),
            // u64 pairs.
            (1 << 14, 11, 12, true),
            (1 << 16, 11, 12, true),
            (1 << 17, 11, 12, true),
            (1 << 18, 11, 12, true),
            (1 << 19, 12, 12, true),
            (1 << 20, 12, 12, true),
            (1_572_864, 12, 12, true),
            (1 << 21, 12, 12, true),
            (1 << 22, 12, 12, true),
            (1 << 23, 12, 12, true),
            (1 << 24, 12, 12, true),
            // Two tiles; 3 tiles of 48 KiB (within the multiprocessors the rule above holds);
            // tiles below 4096 (not measured beyond the multiprocessors).
            (1 << 12, 11, 12, false),
            (12_288, 12, 12, false),
            (1 << 20, 11, 12, false),
            (1 << 20, 10, 12, false),
            (100_000, 8, 12, false),
        ];
        for (n, t, bytes, pays) in cases {
            assert_eq!(on(n, t, bytes, 132), pays, "n={n} tile 2^{t}, {bytes} bytes per element");
            assert!(!on(n, t, bytes, 0), "a device without a multiprocessor count: n={n}");
        }
        // Without loops (merge workgroups 0), beyond the multiprocessors only u64 pairs take
        // segments; within them nothing changes.
        for (n, t, bytes, pays) in [
            (1 << 21, 13, 4, false),
            (1 << 24, 13, 4, false),
            (1 << 20, 12, 8, false),
            (1 << 21, 12, 12, true),
            (1 << 20, 13, 4, true),
            (1 << 16, 11, 8, true),
        ] {
            assert_eq!(on_with(n, t, bytes, 132, 0), pays, "n={n} tile 2^{t}, {bytes} bytes, no loops");
        }
        // Segment passes of u64 pairs never loop; those of 4- and 8-byte elements do.
        assert!(segments_loop(4) && segments_loop(8) && !segments_loop(12));
    }

    #[test]
    fn a_segment_tile_is_the_smallest_that_leaves_no_more_tiles_than_multiprocessors() {
        let tile = |n, max| segment_tile(n, max, 132);
        // Too few tiles for segments at any size (2 or fewer).
        assert_eq!(tile(1 << 12, 8192), None);
        assert_eq!(tile(4096, 8192), None);
        assert_eq!(tile(4097, 8192), Some(2048));
        assert_eq!(tile(1 << 16, 8192), Some(2048));
        assert_eq!(tile(1 << 18, 8192), Some(2048));
        assert_eq!(tile(132 * 2048, 8192), Some(2048));
        assert_eq!(tile(132 * 2048 + 1, 8192), Some(4096));
        assert_eq!(tile(393_216, 8192), Some(4096));
        assert_eq!(tile(1 << 19, 8192), Some(4096));
        assert_eq!(tile(1 << 20, 8192), Some(8192));
        // More tiles than multiprocessors at the largest tile: the other plan.
        assert_eq!(tile(1 << 20, 4096), None);
        assert_eq!(tile(1_500_000, 8192), None);
        assert_eq!(tile(u32::MAX, u32::MAX), Some(1 << 25));
        assert_eq!(segment_tile(u32::MAX, u32::MAX, 1), None);
        // A cap below the smallest segment tile leaves it to the other plan's tiles.
        assert_eq!(tile(1 << 16, 1024), None);
        // Every tile given leaves 3 to 132 tiles and halving it would leave more than 132.
        for n in (0..=1u32 << 21).step_by(4099) {
            if let Some(t) = tile(n, 8192) {
                let tiles = n.div_ceil(t);
                assert!(t.is_power_of_two() && (SEGMENT_MIN_TILE..=8192).contains(&t), "n={n}");
                assert!(tiles > 2 && tiles <= 132, "n={n}: {tiles} tiles of {t}");
                assert!(t == SEGMENT_MIN_TILE || n.div_ceil(t / 2) > 132, "n={n}: {t} is not the smallest");
            }
        }
    }
}
