//! The segment passes' shapes, in pure Rust and shared with `build.rs` (through `#[path]`, which
//! builds a module for each chain of chunks that [`chains`] finds): which run of the network's
//! substages each segment pass takes, the cosets it holds, and the chunks it runs them in.

/// The shortest run of consecutive elements a [`Segment`] pass moves at a time where it chooses
/// (its low run when it carries one): 8 elements, a 32-byte sector of 4-byte keys.
pub const SEGMENT_MIN_RUN_LOG2: u32 = 3;

/// ceil(log2(n)) for n >= 1 (0 for n <= 1): the stages of a sort of n elements.
pub fn ceil_log2(n: u64) -> u32 {
    u64::BITS - (n.max(1) - 1).leading_zeros()
}

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
    #[cfg(test)]
    pub fn substages(&self) -> u32 {
        u32::from(self.tail) * self.low + u32::from(self.flip) + self.high
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
    pub fn workgroups(&self, n: u32, tile_log2: u32, levels: u32) -> u32 {
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

    /// The chunk's kind and size without its strides, as the chain modules of segment_merge take
    /// them (`SHAPE_CODE0` .. in `chain_chunk`, one module per chain of codes: `CHAIN_BUILDS` in
    /// src/abi/table.rs): bits 0-1 the kind as in [`SegmentChunk::encode`], bits 2-4 m or a, bits
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
    #[cfg(test)]
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
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalSubstage {
    /// The flip of blocks of 2^k.
    Flip(u32),
    /// The half-cleaner of stride 2^j.
    HalfCleaner(u32),
}

/// The carried low runs of a segment plan (log2 elements, each capped at log2(tile) - 1): every
/// segment that carries a run carries 2^`short` or 2^`long` elements, chosen pass by pass for
/// the fewest passes, then the fewest that carry the short run ([`Plan::segmented_with_runs`](crate::network::Plan::segmented_with_runs)).
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
pub struct Cursor {
    /// The stage.
    pub stage: u32,
    /// Its half-cleaners left, or None before its flip.
    pub next: Option<u32>,
}

/// The segment that starts at `at`, in a sort of 2^`levels` elements in tiles of 2^`t`, carrying
/// a low run of 2^`run` (at most t - 1) where it carries one: its shape, the stage it ends in,
/// where the network stands after it, and whether it carried the run.
pub fn segment_step(at: Cursor, levels: u32, t: u32, run: u32) -> (Segment, u32, Cursor, bool) {
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
pub fn segment_shapes(levels: u32, t: u32, runs: SegmentRuns) -> Vec<(Segment, u32)> {
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
/// carried low runs `runs` ([`Plan::segmented_with_runs`](crate::network::Plan::segmented_with_runs)).
pub fn segment_passes(n: u32, tile_log2: u32, runs: SegmentRuns) -> usize {
    segment_shapes(ceil_log2(u64::from(n)), tile_log2, runs).len()
}

/// The chains of chunk codes ([`SegmentChunk::chain_code`]) of every segment pass of the sorts of
/// 2^`levels` elements in tiles of 2^`tile_log2` on local chunks of `chunk` substages, carrying the
/// shortest run ([`SEGMENT_MIN_RUN_LOG2`], as sorts of no more tiles than multiprocessors do):
/// what `build.rs` builds a chain module for, given `CHAIN_BUILDS` in `src/abi/table.rs`. Chains of more than
/// `max_chunks` chunks are left out (the shaped build holds at most that many).
#[allow(dead_code)] // build.rs builds a module for each.
pub fn chains(tile_log2: u32, levels: std::ops::RangeInclusive<u32>, chunk: u32, max_chunks: usize) -> Vec<Vec<u32>> {
    let mut chains: Vec<Vec<u32>> = Vec::new();
    for levels in levels {
        for (segment, _) in segment_shapes(levels, tile_log2, SegmentRuns::fixed(SEGMENT_MIN_RUN_LOG2)) {
            let chain: Vec<u32> = segment.chunks(chunk).iter().map(|c| c.chain_code(chunk)).collect();
            if chain.len() <= max_chunks && !chains.contains(&chain) {
                chains.push(chain);
            }
        }
    }
    chains.sort();
    chains
}

/// (passes, segments that carry the short run) of a list of shapes planned with `runs`.
#[cfg(test)]
pub(crate) fn passes_and_shorts(shapes: &[(Segment, u32)], runs: SegmentRuns) -> (usize, usize) {
    let shorts = shapes.iter().filter(|(s, _)| !s.tail && s.low == runs.short && runs.short < runs.long).count();
    (shapes.len(), shorts)
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
                        for fused in 1..=5 {
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
}
