//! A CPU model of the recorded command stream. [`Recording`] captures what `record_passes` emits
//! (the same code that fills the Vulkan command buffer); [`Trace::expand`] turns each dispatch into
//! the exact comparators and element accesses the shaders make for it, using the shaders' index
//! rules. The trace then runs on CPU data, or is checked for accesses of one element by two
//! dispatches with no barrier between them.

use crate::abi::{stores_keys, DispatchRule, PassKind, PushConstants, FLAG_DESCENDING, FLAG_TO_IMAGE_ON_LOAD};
use crate::keys::{from_image, to_image};
use crate::segment::{ceil_log2, Segment};
use crate::tuning::Geometry;

use super::commands::Encoder;
use super::plan::Pass;

/// One recorded command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// A kernel's pipeline was bound (with the substages a global pass fuses).
    Bind(PassKind, u32),
    /// Push constants were set.
    Push(PushConstants),
    /// Workgroups were dispatched.
    Dispatch(u32),
    /// A compute-to-compute barrier.
    Barrier,
}

/// An [`Encoder`] that keeps the commands.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// The commands in recording order.
    pub commands: Vec<Command>,
}

impl Encoder for Recording {
    fn bind_pass(&mut self, pass: &Pass) {
        self.commands.push(Command::Bind(pass.kind, pass.substages));
    }
    fn push_constants(&mut self, push: &PushConstants) {
        self.commands.push(Command::Push(*push));
    }
    fn dispatch(&mut self, groups: u32) {
        self.commands.push(Command::Dispatch(groups));
    }
    fn compute_barrier(&mut self) {
        self.commands.push(Command::Barrier);
    }
}

/// One dispatch, expanded.
#[derive(Clone, Debug)]
pub struct Dispatch {
    /// The kernel it runs.
    pub kind: PassKind,
    /// Its push constants.
    pub push: PushConstants,
    /// The comparators it runs as (lower, upper) element indices, in an order a sequential run may
    /// take (workgroups touch disjoint elements; within one, substages run in order).
    pub comparators: Vec<(u32, u32)>,
    /// Every element it reads or writes.
    pub touched: Vec<u32>,
}

/// A step of the expanded command stream.
#[derive(Clone, Debug)]
pub enum Step {
    /// A compute-to-compute barrier.
    Barrier,
    /// A dispatch.
    Dispatch(Dispatch),
}

/// Two dispatches with no barrier between them that access one element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hazard {
    /// The element.
    pub element: u32,
    /// Index of the earlier dispatch among the dispatches.
    pub earlier: usize,
    /// Index of the later dispatch.
    pub later: usize,
}

/// The expanded command stream of one sort.
#[derive(Clone, Debug)]
pub struct Trace {
    /// Number of elements.
    pub n: u32,
    /// With a GPU-side count, the elements sorted: min(count, n).
    pub count: Option<u32>,
    /// The steps in order.
    pub steps: Vec<Step>,
}

/// `slot_index` of glsl/unrolled/fused.glsl (`slot_element` of glsl/global_merge.comp): the
/// element of slot s of group g, for m substages of smallest stride `low`; with `flip`, the slots
/// with the top bit set are the mirrors of the others.
fn slot_index(g: u32, s: u32, low: u32, m: u32, flip: bool) -> u32 {
    let half = 1 << (m - 1);
    let top = low << (m - 1);
    let i = (((g & !(low - 1)) << m) | (g & (low - 1))) + (s & (half - 1)) * low;
    match (s & half != 0, flip) {
        (false, _) => i,
        (true, true) => i ^ (2 * top - 1),
        (true, false) => i + top,
    }
}

impl Trace {
    /// Expands a recording for n elements and the geometry the kernels were specialised with.
    ///
    /// # Panics
    /// On a dispatch before any bind or push constants: the recorder must never emit one.
    pub fn expand(recording: &Recording, n: u32, geometry: Geometry) -> Trace {
        Trace::expand_with(recording, n, geometry, None)
    }

    /// [`Trace::expand`] for a sort through a binding with a GPU-side count: the first `direct`
    /// dispatches (the first pass's) run the workgroups recorded, and indirect dispatch i after
    /// them runs `rules[i].groups(count, n)`, as the arguments `dispatch_args` writes from the
    /// same rules; every kernel bounds its elements by min(count, n).
    ///
    /// # Panics
    /// As [`Trace::expand`], and where `rules` has another length than the indirect dispatches or
    /// a rule at count n gives other workgroups than were recorded.
    pub fn expand_counted(
        recording: &Recording,
        n: u32,
        geometry: Geometry,
        count: u32,
        direct: usize,
        rules: &[DispatchRule],
    ) -> Trace {
        Trace::expand_with(recording, n, geometry, Some((count, direct, rules)))
    }

    fn expand_with(
        recording: &Recording,
        n: u32,
        geometry: Geometry,
        counted: Option<(u32, usize, &[DispatchRule])>,
    ) -> Trace {
        let (mut kind, mut push) = (None, None);
        let mut steps = Vec::new();
        let mut index = 0;
        for command in &recording.commands {
            match *command {
                Command::Bind(k, m) => kind = Some((k, m)),
                Command::Push(p) => push = Some(p),
                Command::Barrier => steps.push(Step::Barrier),
                Command::Dispatch(recorded) => {
                    let (kind, substages) = kind.expect("dispatch before a pipeline was bound");
                    let push: PushConstants = push.expect("dispatch before push constants were set");
                    assert_eq!(push.n, n, "push constants name another element count");
                    let (groups, bound) = match counted {
                        None => (recorded, n),
                        Some((count, direct, _)) if index < direct => (recorded, count.min(n)),
                        Some((count, direct, rules)) => {
                            let rule = rules.get(index - direct).expect("a rule for every indirect dispatch");
                            assert_eq!(rule.groups(n, n), recorded, "dispatch {index}: the rule at count n");
                            (rule.groups(count, n), count.min(n))
                        }
                    };
                    index += 1;
                    steps.push(Step::Dispatch(expand_dispatch(kind, substages, push, groups, bound, geometry)));
                }
            }
        }
        if let Some((_, direct, rules)) = counted {
            assert_eq!(rules.len() + direct.min(index), index, "one rule per indirect dispatch");
        }
        Trace { n, count: counted.map(|(count, _, _)| count.min(n)), steps }
    }

    /// The dispatches, in order.
    pub fn dispatches(&self) -> impl Iterator<Item = &Dispatch> {
        self.steps.iter().filter_map(|s| match s {
            Step::Dispatch(d) => Some(d),
            Step::Barrier => None,
        })
    }

    /// Every element accessed by two dispatches with no barrier between them (the first such pair
    /// per element). Empty when the barriers order every dependency.
    pub fn hazards(&self) -> Vec<Hazard> {
        // last[i] = 1 + index of the last dispatch that touched element i (0 = none yet).
        let mut last = vec![0usize; self.n as usize];
        let mut fence = 0; // dispatches with index < fence are ordered before what follows
        let mut hazards = Vec::new();
        let mut index = 0;
        for step in &self.steps {
            match step {
                Step::Barrier => fence = index,
                Step::Dispatch(d) => {
                    for &e in &d.touched {
                        let previous = last[e as usize];
                        if previous > fence && previous - 1 != index {
                            hazards.push(Hazard { element: e, earlier: previous - 1, later: index });
                        }
                        last[e as usize] = index + 1;
                    }
                    index += 1;
                }
            }
        }
        hazards
    }

    /// Whether dispatch `d` stores keys rather than images: the shaders' `stores_keys`, the same
    /// rule.
    fn stores_keys(&self, d: &Dispatch) -> bool {
        let (counted, count) = match self.count {
            Some(count) => (1, count),
            None => (0, self.n),
        };
        stores_keys(d.push.flags, counted, count) != 0
    }

    /// Runs the trace on key bits (and values), as the GPU would.
    pub fn run(&self, keys: &mut [u32], mut values: Option<&mut [u32]>) {
        for d in self.dispatches() {
            if d.push.flags & FLAG_TO_IMAGE_ON_LOAD != 0 {
                for &e in &d.touched {
                    keys[e as usize] = to_image(keys[e as usize], d.push.flags);
                }
            }
            for &(lo, hi) in &d.comparators {
                let (lo, hi) = (lo as usize, hi as usize);
                if keys[lo] > keys[hi] {
                    keys.swap(lo, hi);
                    if let Some(v) = values.as_deref_mut() {
                        v.swap(lo, hi);
                    }
                }
            }
            if self.stores_keys(d) {
                for &e in &d.touched {
                    keys[e as usize] = from_image(keys[e as usize], d.push.flags);
                }
            }
        }
    }

    /// Runs the trace on 64 inputs of 0/1 u32 keys at once: bit b of `lanes[i]` is element i of
    /// input b. A comparator is then (a & b, a | b); descending order complements the images.
    pub fn run_bitsliced(&self, lanes: &mut [u64]) {
        for d in self.dispatches() {
            let complement = d.push.flags & FLAG_DESCENDING != 0;
            if complement && d.push.flags & FLAG_TO_IMAGE_ON_LOAD != 0 {
                d.touched.iter().for_each(|&e| lanes[e as usize] = !lanes[e as usize]);
            }
            for &(lo, hi) in &d.comparators {
                let (a, b) = (lanes[lo as usize], lanes[hi as usize]);
                lanes[lo as usize] = a & b;
                lanes[hi as usize] = a | b;
            }
            if complement && self.stores_keys(d) {
                d.touched.iter().for_each(|&e| lanes[e as usize] = !lanes[e as usize]);
            }
        }
    }
}

/// One substage on the tile at `base`, whose elements at local index `limit` or past are virtual:
/// stride `inc`, or with `flip` the mirrors in blocks of 2 * inc (one group of two slots each).
fn tile_substage(comparators: &mut Vec<(u32, u32)>, base: u32, tile: u32, limit: u32, inc: u32, flip: bool) {
    for c in 0..tile / 2 {
        let (lo, hi) = (slot_index(c, 0, inc, 1, flip), slot_index(c, 1, inc, 1, flip));
        if hi < limit {
            comparators.push((base + lo, base + hi));
        }
    }
}

/// The half-cleaner substages of strides `top` .. 1 on the tile at `base` (none if `top` is 0).
fn half_cleaners(comparators: &mut Vec<(u32, u32)>, base: u32, tile: u32, limit: u32, top: u32) {
    let mut inc = top;
    while inc > 0 {
        tile_substage(comparators, base, tile, limit, inc, false);
        inc /= 2;
    }
}

/// The substages of a segment in local indices, as (lower, upper) local index pairs in the order
/// glsl/segment_merge.comp runs them: the tail's half-cleaners (strides 2^(low-1) .. 1), the
/// flip of blocks of 2^u (c against c ^ (2^u - 1)), the high run's half-cleaners (strides
/// 2^(low+high-1) .. 2^low); over every local element of a tile of `tile`.
fn segment_local_comparators(segment: &Segment, tile: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let half_cleaner = |out: &mut Vec<(u32, u32)>, stride: u32| {
        out.extend((0..tile).filter(|c| c & stride == 0).map(|c| (c, c | stride)));
    };
    if segment.tail {
        for j in (0..segment.low).rev() {
            half_cleaner(&mut out, 1 << j);
        }
    }
    if segment.flip {
        let u = segment.used_bits();
        out.extend((0..tile).filter(|c| c & (1 << (u - 1)) == 0).map(|c| (c, c ^ ((1 << u) - 1))));
    }
    for j in (segment.low..segment.low + segment.high).rev() {
        half_cleaner(&mut out, 1 << j);
    }
    out
}

/// The comparators and accesses of one dispatch, following the shaders' index rules.
/// Elements at `bound` or past are virtual (the count, or push.n).
fn expand_dispatch(
    kind: PassKind,
    substages: u32,
    push: PushConstants,
    groups: u32,
    bound: u32,
    geometry: Geometry,
) -> Dispatch {
    let n = bound;
    let mut comparators = Vec::new();
    let mut touched = Vec::new();
    for group in push.group_offset..push.group_offset + groups {
        match kind {
            PassKind::GlobalMerge => {
                let m = substages;
                let low = push.inc >> (m - 1);
                let flip = push.dir != 0;
                for invocation in 0..geometry.global_wg {
                    let g = group * geometry.global_wg + invocation;
                    let index: Vec<u32> = (0..1 << m).map(|s| slot_index(g, s, low, m, flip)).collect();
                    // The register network of fused.glsl: substage j pairs slots differing in bit
                    // m-1-j; every comparator puts the smaller image at the lower index.
                    for j in 0..m {
                        let bit = (1 << (m - 1)) >> j;
                        for s in (0..1 << m).filter(|s| s & bit == 0) {
                            let (a, b) = (index[s as usize], index[(s | bit) as usize]);
                            let (lo, hi) = (a.min(b), a.max(b));
                            if hi < n {
                                comparators.push((lo, hi));
                            }
                        }
                    }
                    touched.extend(index.into_iter().filter(|&i| i < n));
                }
            }
            PassKind::LocalMerge if substages > 0 => {
                // A window of 2^w tiles: its w substages of strides push.inc = T << (w-1) down to
                // T (with push.dir the first is the flip: element c against span - 1 - c), then
                // each tile's strides T/2 .. 1, the lowest tile first.
                let tile = geometry.tile();
                let span = tile << substages;
                assert_eq!(
                    push.inc,
                    tile << (substages - 1),
                    "a windowed local merge starts at the stride of its half"
                );
                let base = group * span;
                for j in 0..substages {
                    let stride = push.inc >> j;
                    for c in (0..span).filter(|c| c & stride == 0) {
                        let hi = if j == 0 && push.dir != 0 { base + span - 1 - c } else { base + c + stride };
                        if hi < n {
                            comparators.push((base + c, hi));
                        }
                    }
                }
                for t in 0..1 << substages {
                    let half = base + t * tile;
                    if half < n {
                        half_cleaners(&mut comparators, half, tile, n - half, tile / 2);
                    }
                }
                touched.extend(base..n.min(base + span));
            }
            PassKind::SegmentMerge => {
                // Workgroup `group` holds the elements Segment::element names; one whose lowest
                // element is virtual returns at once. The looping build (substages 1) then takes
                // group + loop_stride, group + 2 loop_stride, ... while their lowest element is real.
                let segment = Segment::decode(&push);
                let loops = push.loop_stride > 0 && substages > 0;
                let mut coset = group;
                loop {
                    let index: Vec<u64> =
                        (0..geometry.tile()).map(|c| segment.element(geometry.tile_log2, coset, c)).collect();
                    if index[0] >= u64::from(n) {
                        break;
                    }
                    for (lo, hi) in segment_local_comparators(&segment, geometry.tile()) {
                        let (a, b) = (index[lo as usize], index[hi as usize]);
                        assert!(a < b, "{segment:?}: local {lo} < {hi} but elements {a} >= {b}");
                        if b < u64::from(n) {
                            comparators.push((a as u32, b as u32));
                        }
                    }
                    touched.extend(index.into_iter().filter(|&i| i < u64::from(n)).map(|i| i as u32));
                    if !loops {
                        break;
                    }
                    coset += push.loop_stride;
                }
            }
            PassKind::TileSort | PassKind::LocalMerge => {
                // Workgroup `group` sorts or merges tile `group`; a looping one then tiles
                // group + loop_stride, group + 2 loop_stride, ...: a local merge with loop_stride >
                // 0, the tile sort's looping build (substages 1) alone, as in the shaders (the
                // plain tile sort ignores loop_stride).
                let loops = push.loop_stride > 0 && (kind == PassKind::LocalMerge || substages > 0);
                let tile = geometry.tile();
                let mut base = group * tile;
                while base < n {
                    let limit = n - base;
                    if kind == PassKind::TileSort {
                        // tile_shape(): with a count, no stage past the count's.
                        let shape = push.shape.min(ceil_log2(u64::from(n)));
                        let mut block = 2;
                        while block <= 1 << shape {
                            tile_substage(&mut comparators, base, tile, limit, block / 2, true);
                            half_cleaners(&mut comparators, base, tile, limit, block / 4);
                            block *= 2;
                        }
                    } else {
                        half_cleaners(&mut comparators, base, tile, limit, tile / 2);
                    }
                    touched.extend(base..n.min(base + tile));
                    if !loops {
                        break;
                    }
                    base += push.loop_stride * tile;
                }
            }
        }
    }
    Dispatch { kind, push, comparators, touched }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{key_flags, KeyKind, Order};
    use crate::network::{record_passes, Plan, RecordOptions};
    use crate::segment::SegmentRuns;
    use crate::tuning::{FUSED6_MIN_TILES, MAX_FUSED, WINDOW4_MIN_TILES, WINDOW_MIN_TILES};
    use rand::{Rng, SeedableRng};

    const ALL_GROUPS: RecordOptions =
        RecordOptions { max_groups_per_dispatch: u32::MAX, drop_barrier_before_pass: None };

    fn trace(n: u32, geometry: Geometry, flags: u32, options: RecordOptions) -> (Plan, Trace) {
        trace_of(Plan::new(n, geometry, flags).expect("a valid geometry"), options)
    }

    fn trace_of(plan: Plan, options: RecordOptions) -> (Plan, Trace) {
        let (n, geometry) = (plan.n, plan.geometry);
        let mut recording = Recording::default();
        record_passes(&mut recording, &plan, &options);
        (plan.clone(), Trace::expand(&recording, n, geometry))
    }

    fn geometries() -> Vec<(Geometry, RecordOptions)> {
        let mut v = Vec::new();
        for tile_log2 in [1, 2, 3] {
            for global_wg in [1, 2, 4] {
                for fused in [1, 2, 3, 4, 5] {
                    v.push((Geometry { tile_log2, global_wg, fused }, ALL_GROUPS));
                }
            }
        }
        // Split dispatches: one or two workgroups per dispatch.
        for max in [1, 2] {
            let split = RecordOptions { max_groups_per_dispatch: max, drop_barrier_before_pass: None };
            v.push((Geometry { tile_log2: 2, global_wg: 2, fused: 3 }, split));
        }
        v
    }

    #[test]
    fn sorts_every_zero_one_input_up_to_20_elements_in_both_orders() {
        for (geometry, options) in geometries() {
            for order in [Order::Ascending, Order::Descending] {
                for n in 0..=20u32 {
                    let (_, trace) = trace(n, geometry, key_flags(KeyKind::U32, order), options);
                    let inputs = 1u64 << n;
                    let mut first = 0u64;
                    while first < inputs {
                        let live = (inputs - first).min(64);
                        let mut lanes: Vec<u64> =
                            (0..n).map(|i| (0..live).fold(0u64, |w, b| w | ((((first + b) >> i) & 1) << b))).collect();
                        trace.run_bitsliced(&mut lanes);
                        let what = || format!("{geometry:?} {options:?} {order:?} n={n} inputs from {first:#b}");
                        check_zero_one(&lanes, order, first, live, what);
                        first += 64;
                    }
                }
            }
        }
    }

    /// Checks the bitsliced result of inputs `first .. first + live` (bit b of `lanes[i]` is
    /// element i of input first + b): each lane sorted, and holding its input's number of ones.
    fn check_zero_one(lanes: &[u64], order: Order, first: u64, live: u64, what: impl Fn() -> String) {
        let live_lanes = if live == 64 { u64::MAX } else { (1 << live) - 1 };
        // In order: no lane has a 1 before a 0 (ascending) or a 0 before a 1.
        for i in 1..lanes.len() {
            let (a, b) = (lanes[i - 1], lanes[i]);
            let out_of_order = match order {
                Order::Ascending => a & !b,
                Order::Descending => !a & b,
            };
            assert_eq!(out_of_order & live_lanes, 0, "{}: unsorted at {i}", what());
        }
        // Nothing lost or invented: each lane keeps its input's number of ones.
        for b in 0..live {
            let ones = lanes.iter().map(|w| (w >> b) & 1).sum::<u64>();
            assert_eq!(ones, u64::from((first + b).count_ones()), "{}: lane {b}", what());
        }
    }

    fn check_pairs(kind: KeyKind, order: Order, input: &[u32], keys: &[u32], values: &[u32], what: &str) {
        let cmp = |a: &u32, b: &u32| match kind {
            KeyKind::U32 => a.cmp(b),
            KeyKind::I32 => (*a as i32).cmp(&(*b as i32)),
            KeyKind::F32 => f32::from_bits(*a).total_cmp(&f32::from_bits(*b)),
            // The model runs on 4-byte words: 8-byte keys are checked on the GPU (tests/gpu.rs).
            KeyKind::U64 | KeyKind::I64 | KeyKind::F64 => unreachable!("the model sorts 4-byte keys"),
        };
        let mut expect = input.to_vec();
        expect.sort_by(cmp);
        if order == Order::Descending {
            expect.reverse();
        }
        assert_eq!(keys, &expect[..], "{what}");
        let mut seen = vec![false; input.len()];
        for (i, &v) in values.iter().enumerate() {
            assert!(!std::mem::replace(&mut seen[v as usize], true), "{what}: value {v} twice");
            assert_eq!(keys[i], input[v as usize], "{what}: pair {i} split");
        }
    }

    #[test]
    fn sorts_random_pairs_of_every_length_up_to_several_tiles() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        for (geometry, options) in [
            (Geometry { tile_log2: 4, global_wg: 8, fused: 4 }, ALL_GROUPS),
            (Geometry { tile_log2: 2, global_wg: 2, fused: 1 }, ALL_GROUPS),
            (
                Geometry { tile_log2: 3, global_wg: 4, fused: 3 },
                RecordOptions { max_groups_per_dispatch: 3, drop_barrier_before_pass: None },
            ),
        ] {
            for n in 0..=(5 << geometry.tile_log2) + 3 {
                for kind in [KeyKind::U32, KeyKind::I32, KeyKind::F32] {
                    for order in [Order::Ascending, Order::Descending] {
                        let (_, trace) = trace(n, geometry, key_flags(kind, order), options);
                        // Few distinct keys, so equal keys are common.
                        let input: Vec<u32> = (0..n)
                            .map(|_| [0, 1, 0x8000_0000, u32::MAX, rng.random()][rng.random_range(0..5)])
                            .collect();
                        let (mut keys, mut values) = (input.clone(), (0..n).collect::<Vec<u32>>());
                        trace.run(&mut keys, Some(&mut values));
                        check_pairs(
                            kind,
                            order,
                            &input,
                            &keys,
                            &values,
                            &format!("{geometry:?} {kind:?} {order:?} n={n}"),
                        );
                    }
                }
            }
        }
    }

    /// Sorts of the sizes `sizes(tile)` take local merges with windows of 2^`window` tiles exactly
    /// from `min_tiles` tiles up, with no hazard, and sort random keys and pairs (split dispatches
    /// of 7 workgroups).
    fn sorts_with_windows(
        seed: u64,
        window: u32,
        min_tiles: u32,
        tile_logs: std::ops::RangeInclusive<u32>,
        fusions: std::ops::RangeInclusive<u32>,
        sizes: impl Fn(u32) -> Vec<u32>,
    ) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for tile_log2 in tile_logs {
            for fused in fusions.clone() {
                let geometry = Geometry { tile_log2, global_wg: 4, fused };
                let tile = geometry.tile();
                let options = RecordOptions { max_groups_per_dispatch: 7, drop_barrier_before_pass: None };
                for n in sizes(tile) {
                    let (plan, trace) = trace(n, geometry, key_flags(KeyKind::U32, Order::Ascending), options);
                    let windowed = plan.passes.iter().any(|p| p.kind == PassKind::LocalMerge && p.substages == window);
                    assert_eq!(windowed, n > (min_tiles - 1) * tile, "{geometry:?} n={n}");
                    assert_eq!(trace.hazards(), vec![], "{geometry:?} n={n}");
                    let input: Vec<u32> =
                        (0..n).map(|_| [0, 1, u32::MAX, rng.random()][rng.random_range(0..4)]).collect();
                    let (mut keys, mut values) = (input.clone(), (0..n).collect::<Vec<u32>>());
                    trace.run(&mut keys, Some(&mut values));
                    check_pairs(KeyKind::U32, Order::Ascending, &input, &keys, &values, &format!("{geometry:?} n={n}"));
                }
            }
        }
    }

    #[test]
    fn sorts_with_looping_local_merges() {
        // The tile sort and the local merges capped at 1 to 5 workgroups, each looping over tiles
        // (any number of them, or at most 1 to 3, as on a device whose loops stop early, the
        // bound per kind of pass): every length up to several tiles (a partial last tile
        // included), windows and split dispatches of 2 workgroups too, no hazard, random keys and
        // pairs sorted.
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x9e25);
        let bounds = [(u32::MAX, u32::MAX), (2, 1), (1, 3)];
        for tile_log2 in 1..=3 {
            let geometry = Geometry { tile_log2, global_wg: 2, fused: 3 };
            let tile = geometry.tile();
            for (groups, (merge_loop, sort_loop)) in (1..=5).flat_map(|g| bounds.map(|b| (g, b))) {
                for max_groups_per_dispatch in [2, u32::MAX] {
                    let options = RecordOptions { max_groups_per_dispatch, drop_barrier_before_pass: None };
                    let mut sizes: Vec<u32> = (0..=9 * tile + 1).collect();
                    sizes.extend([WINDOW_MIN_TILES * tile - 1, WINDOW_MIN_TILES * tile + 3]);
                    for n in sizes {
                        let flags = key_flags(KeyKind::U32, Order::Ascending);
                        let bound = |kind| if kind == PassKind::TileSort { sort_loop } else { merge_loop };
                        let plan =
                            Plan::new(n, geometry, flags).expect("a valid geometry").looping_passes(groups, bound);
                        let tiles = n.div_ceil(tile);
                        let what =
                            format!("{geometry:?} groups={groups} loops<={merge_loop}/{sort_loop} {options:?} n={n}");
                        let looping = |p: &&Pass| {
                            p.kind == PassKind::TileSort || (p.kind == PassKind::LocalMerge && p.substages == 0)
                        };
                        for pass in plan.passes.iter().filter(looping) {
                            let max_loop = bound(pass.kind);
                            let wanted = groups.max(tiles.div_ceil(max_loop)).min(tiles);
                            assert_eq!(pass.workgroups, wanted, "{what} {:?}", pass.kind);
                            assert_eq!(pass.push.loop_stride, if tiles > wanted { wanted } else { 0 }, "{what}");
                            assert!(tiles.div_ceil(pass.workgroups) <= max_loop, "{what}");
                            if pass.kind == PassKind::TileSort {
                                // The looping build where it loops, the plain one elsewhere.
                                assert_eq!(pass.substages, u32::from(pass.push.loop_stride > 0), "{what}");
                            }
                        }
                        let mut recording = Recording::default();
                        record_passes(&mut recording, &plan, &options);
                        let trace = Trace::expand(&recording, n, geometry);
                        assert_eq!(trace.hazards(), vec![], "{what}");
                        // No two workgroups of a local kernel share an element.
                        for d in trace.dispatches().filter(|d| d.kind != PassKind::GlobalMerge) {
                            let mut seen = vec![false; n as usize];
                            for &i in &d.touched {
                                assert!(!std::mem::replace(&mut seen[i as usize], true), "{what}: {i} twice");
                            }
                        }
                        let input: Vec<u32> =
                            (0..n).map(|_| [0, 1, u32::MAX, rng.random()][rng.random_range(0..4)]).collect();
                        let (mut keys, mut values) = (input.clone(), (0..n).collect::<Vec<u32>>());
                        trace.run(&mut keys, Some(&mut values));
                        check_pairs(KeyKind::U32, Order::Ascending, &input, &keys, &values, &what);
                    }
                }
            }
        }
    }

    #[test]
    fn sorts_with_windowed_local_merges() {
        // From WINDOW_MIN_TILES tiles up, some local merges take windows of two tiles; partial
        // windows (one tile and a part, or a part of one) and split dispatches included.
        sorts_with_windows(0x91d0, 1, WINDOW_MIN_TILES, 1..=3, 1..=MAX_FUSED, |tile| {
            let min = WINDOW_MIN_TILES * tile;
            vec![min - tile, min - 1, min, min + 1, min + tile + 1, 2 * min + tile / 2 + 1, 3 * min - 1]
        });
    }

    #[test]
    fn sorts_with_windows_of_four_tiles() {
        // From WINDOW4_MIN_TILES tiles up, local merges take windows of four tiles where two
        // would save no pass; partial windows and split dispatches included.
        sorts_with_windows(0x4a1d, 2, WINDOW4_MIN_TILES, 1..=2, 2..=MAX_FUSED, |tile| {
            let min = WINDOW4_MIN_TILES * tile;
            vec![min - 1, min, min + 1, min + 2 * tile + 1, min + 3 * tile - 1, 2 * min + tile / 2 + 1]
        });
    }

    #[test]
    fn sorts_with_six_fused_substages_from_2048_tiles() {
        // Global passes of 64-element groups (with windows of two and four tiles beside them),
        // partial last groups and split dispatches included.
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x6f06);
        for tile_log2 in [1, 2] {
            let geometry = Geometry { tile_log2, global_wg: 4, fused: 6 };
            let min = FUSED6_MIN_TILES << tile_log2;
            let options = RecordOptions { max_groups_per_dispatch: 7, drop_barrier_before_pass: None };
            for n in [min - 1, min, min + 3, 2 * min + 1, 3 * min - 5] {
                let (plan, trace) = trace(n, geometry, key_flags(KeyKind::U32, Order::Descending), options);
                assert!(plan.passes.iter().any(|p| p.kind == PassKind::GlobalMerge && p.substages == 6), "n={n}");
                assert_eq!(trace.hazards(), vec![], "{geometry:?} n={n}");
                let input: Vec<u32> = (0..n).map(|_| [0, 1, u32::MAX, rng.random()][rng.random_range(0..4)]).collect();
                let (mut keys, mut values) = (input.clone(), (0..n).collect::<Vec<u32>>());
                trace.run(&mut keys, Some(&mut values));
                check_pairs(KeyKind::U32, Order::Descending, &input, &keys, &values, &format!("{geometry:?} n={n}"));
            }
        }
    }

    #[test]
    fn sorts_around_the_real_tile_size() {
        let geometry = Geometry { tile_log2: 13, global_wg: 256, fused: 4 };
        let mut rng = rand::rngs::StdRng::seed_from_u64(99);
        for n in [8191u32, 8192, 8193, 16383, 16385, 3 * 8192 + 7] {
            let (_, trace) = trace(n, geometry, key_flags(KeyKind::F32, Order::Ascending), ALL_GROUPS);
            let input: Vec<u32> = (0..n).map(|_| rng.random()).collect();
            let (mut keys, mut values) = (input.clone(), (0..n).collect::<Vec<u32>>());
            trace.run(&mut keys, Some(&mut values));
            check_pairs(KeyKind::F32, Order::Ascending, &input, &keys, &values, &format!("n={n}"));
            assert!(trace.hazards().is_empty());
        }
    }

    #[test]
    fn every_pass_that_reads_an_earlier_write_is_behind_a_barrier() {
        for (geometry, options) in geometries() {
            for n in (0..300).chain([511, 512, 513, 1000]) {
                let (plan, trace) = trace(n, geometry, 0, options);
                assert_eq!(trace.hazards(), vec![], "{geometry:?} {options:?} n={n}");
                // Every pass after the first reads elements an earlier pass wrote.
                let barriers = trace.steps.iter().filter(|s| matches!(s, Step::Barrier)).count();
                assert_eq!(barriers, plan.passes.len().saturating_sub(1));
            }
        }
    }

    #[test]
    fn a_dropped_barrier_is_reported_as_a_hazard() {
        let geometry = Geometry { tile_log2: 2, global_wg: 2, fused: 2 };
        for n in [5u32, 9, 17, 100, 257] {
            let plan = Plan::new(n, geometry, 0).expect("a valid geometry");
            for dropped in 1..plan.passes.len() {
                let options =
                    RecordOptions { max_groups_per_dispatch: u32::MAX, drop_barrier_before_pass: Some(dropped) };
                let (_, trace) = trace(n, geometry, 0, options);
                assert!(!trace.hazards().is_empty(), "n={n}: dropping the barrier before pass {dropped} went unseen");
            }
        }
    }

    #[test]
    fn each_dispatch_of_a_split_pass_covers_distinct_workgroups() {
        let geometry = Geometry { tile_log2: 2, global_wg: 2, fused: 2 };
        let n = 200;
        let (_, whole) = trace(n, geometry, 0, ALL_GROUPS);
        let split = RecordOptions { max_groups_per_dispatch: 3, drop_barrier_before_pass: None };
        let (_, parts) = trace(n, geometry, 0, split);
        let all = |t: &Trace| t.dispatches().flat_map(|d| d.comparators.clone()).collect::<Vec<_>>();
        assert_eq!(all(&whole), all(&parts));
        assert!(parts.dispatches().count() > whole.dispatches().count());
    }

    #[test]
    fn segmented_plans_sort_every_zero_one_input_up_to_18_elements() {
        // Every carried low run the tiles allow (capped at log2(tile) - 1), alone and with each
        // longer one.
        let runs =
            |t: u32| (0..t.max(2)).flat_map(move |s| (s..t.max(2)).map(move |l| SegmentRuns { short: s, long: l }));
        for (tile_log2, runs) in (1..=4).flat_map(|t| runs(t).map(move |r| (t, r))) {
            let (run_log2, long) = (runs.short, runs.long);
            let geometry = Geometry { tile_log2, global_wg: 2, fused: 3 };
            for n in 0..=18u32 {
                let flags = key_flags(KeyKind::U32, Order::Ascending);
                let plan = Plan::segmented_with_runs(n, geometry, flags, runs).expect("valid");
                let (plan, trace) = trace_of(plan, ALL_GROUPS);
                assert_eq!(trace.hazards(), vec![], "t={tile_log2} run={run_log2}/{long} n={n}");
                for first in (0..1u64 << n).step_by(64) {
                    let live = ((1u64 << n) - first).min(64);
                    let mut lanes: Vec<u64> =
                        (0..n).map(|i| (0..live).fold(0u64, |w, b| w | ((((first + b) >> i) & 1) << b))).collect();
                    trace.run_bitsliced(&mut lanes);
                    let live_lanes = if live == 64 { u64::MAX } else { (1 << live) - 1 };
                    for i in 1..n as usize {
                        let unsorted = lanes[i - 1] & !lanes[i] & live_lanes;
                        assert_eq!(
                            unsorted, 0,
                            "t={tile_log2} run={run_log2}/{long} n={n} from {first:#b}: unsorted at {i} ({plan:?})"
                        );
                    }
                    for b in 0..live {
                        let ones = lanes.iter().map(|w| (w >> b) & 1).sum::<u64>();
                        assert_eq!(
                            ones,
                            u64::from((first + b).count_ones()),
                            "t={tile_log2} run={run_log2}/{long} n={n} lane {b}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn segmented_plans_sort_random_pairs_and_cover_each_element_once_per_pass() {
        // Every length up to 20 tiles and a few larger ones, split dispatches of 3 workgroups,
        // carried low runs of 8 (the default) and of 2, 4 and 16 where the tile allows, and runs
        // of 2 or 8 and of 8 or 16 chosen pass by pass: no hazard, no element in two workgroups
        // of a segment pass, every real element in one, keys and pairs sorted in both orders.
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5e9);
        let fixed = [1, 2, 3, 4].map(SegmentRuns::fixed);
        let mixed = [SegmentRuns { short: 1, long: 3 }, SegmentRuns { short: 3, long: 4 }];
        for (tile_log2, runs) in (1..=5).flat_map(|t| {
            fixed.into_iter().chain(mixed).filter(move |r| r.short == 3 || r.long < t).map(move |r| (t, r))
        }) {
            let (run_log2, long) = (runs.short, runs.long);
            let geometry = Geometry { tile_log2, global_wg: 2, fused: 4 };
            let tile = geometry.tile();
            let options = RecordOptions { max_groups_per_dispatch: 3, drop_barrier_before_pass: None };
            let sizes = (0..=20 * tile).chain([100 * tile + 3, 129 * tile - 1, 256 * tile]);
            for n in sizes.filter(|n| *n < 1 << 14) {
                for order in [Order::Ascending, Order::Descending] {
                    let flags = key_flags(KeyKind::I32, order);
                    let plan = Plan::segmented_with_runs(n, geometry, flags, runs).expect("valid");
                    let what = format!("t={tile_log2} run={run_log2}/{long} n={n} {order:?}");
                    let (plan, trace) = trace_of(plan, options);
                    assert_eq!(trace.hazards(), vec![], "{what}");
                    for pass in plan.passes.iter().skip(1) {
                        assert_eq!(pass.kind, PassKind::SegmentMerge, "{what}");
                        assert!(Segment::decode(&pass.push).used_bits() <= tile_log2, "{what}");
                    }
                    let mut seen = vec![0u32; n as usize];
                    for (index, d) in trace.dispatches().enumerate().filter(|(_, d)| d.kind == PassKind::SegmentMerge) {
                        for &i in &d.touched {
                            assert!(seen[i as usize] <= index as u32, "{what}: {i} twice in one pass");
                            seen[i as usize] = index as u32 + 1;
                        }
                    }
                    let input: Vec<u32> =
                        (0..n).map(|_| [0, 1, 0x8000_0000, u32::MAX, rng.random()][rng.random_range(0..5)]).collect();
                    let (mut keys, mut values) = (input.clone(), (0..n).collect::<Vec<u32>>());
                    trace.run(&mut keys, Some(&mut values));
                    check_pairs(KeyKind::I32, order, &input, &keys, &values, &what);
                }
            }
        }
    }

    #[test]
    fn looping_segment_passes_sort_and_loop_over_every_coset_once() {
        // Segment passes capped at 1 to 3 workgroups, each looping over cosets (any number, or at
        // most 2 as on a device whose loops stop early), with the tile sort looping beside them:
        // every length up to 12 tiles and a few larger, split dispatches of 2 workgroups too;
        // the looping build where a pass has more cosets than workgroups, no hazard, each real
        // element in exactly one workgroup's cosets per pass, random pairs sorted.
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5e9c);
        for tile_log2 in 1..=3 {
            let geometry = Geometry { tile_log2, global_wg: 2, fused: 3 };
            let tile = geometry.tile();
            for (groups, max_loop) in [(1, u32::MAX), (2, u32::MAX), (3, u32::MAX), (1, 2), (3, 2)] {
                for max_groups_per_dispatch in [2, u32::MAX] {
                    let options = RecordOptions { max_groups_per_dispatch, drop_barrier_before_pass: None };
                    for n in (0..=12 * tile + 1).chain([37 * tile + 5, 64 * tile]) {
                        let flags = key_flags(KeyKind::U32, Order::Descending);
                        let what = format!("t={tile_log2} groups={groups} loops<={max_loop} {options:?} n={n}");
                        let plain = Plan::segmented(n, geometry, flags).expect("valid");
                        let plan = plain.clone().looping_passes(groups, |_| max_loop);
                        for (pass, before) in plan.passes.iter().zip(&plain.passes).skip(1) {
                            let cosets = before.workgroups;
                            let wanted = groups.max(cosets.div_ceil(max_loop)).min(cosets);
                            assert_eq!(pass.workgroups, wanted, "{what}");
                            assert_eq!(pass.push.loop_stride, if cosets > wanted { wanted } else { 0 }, "{what}");
                            assert_eq!(pass.substages, u32::from(pass.push.loop_stride > 0), "{what}");
                            assert_eq!(Segment::decode(&pass.push), Segment::decode(&before.push), "{what}");
                        }
                        let (plan, trace) = trace_of(plan, options);
                        assert_eq!(trace.hazards(), vec![], "{what}");
                        // Per segment pass (its dispatches, in order), every real element in one
                        // coset of one workgroup.
                        let mut dispatches = trace.dispatches();
                        for pass in &plan.passes {
                            let mut seen = vec![0u32; n as usize];
                            for d in
                                dispatches.by_ref().take(pass.workgroups.div_ceil(max_groups_per_dispatch) as usize)
                            {
                                for &i in &d.touched {
                                    seen[i as usize] += 1;
                                }
                            }
                            if pass.kind == PassKind::SegmentMerge {
                                assert!(seen.iter().all(|&c| c == 1), "{what}: {pass:?}");
                            }
                        }
                        let input: Vec<u32> =
                            (0..n).map(|_| [0, 1, u32::MAX, rng.random()][rng.random_range(0..4)]).collect();
                        let (mut keys, mut values) = (input.clone(), (0..n).collect::<Vec<u32>>());
                        trace.run(&mut keys, Some(&mut values));
                        check_pairs(KeyKind::U32, Order::Descending, &input, &keys, &values, &what);
                    }
                }
            }
        }
    }

    #[test]
    fn segmented_plans_take_about_one_pass_per_tile_of_substages() {
        // After the tile sort, every segment but a stage's last runs log2(tile) substages or
        // carries its low run; at the sizes the planner's doc names: 8 and 11 passes.
        let plan = |n: u32, tile_log2| {
            Plan::segmented(n, Geometry { tile_log2, global_wg: 256, fused: 5 }, 0).expect("valid").passes.len()
        };
        assert_eq!(plan(1 << 16, 11), 8);
        assert_eq!(plan(1 << 20, 13), 11);
        let classic = Plan::new(1 << 16, Geometry { tile_log2: 11, global_wg: 256, fused: 5 }, 0).expect("valid");
        assert_eq!(classic.passes.len(), 11);
        // No more substages than the network has, none fewer.
        for (n, t) in [(1u32 << 16, 11), (1 << 20, 13), (1 << 24, 13), (3 << 20, 12), (1 << 31, 13)] {
            let plan = Plan::segmented(n, Geometry { tile_log2: t, global_wg: 256, fused: 5 }, 0).expect("valid");
            let levels = 32 - (n - 1).leading_zeros();
            let run: u32 = plan.passes.iter().skip(1).map(|p| Segment::decode(&p.push).substages()).sum();
            assert_eq!(run, (t + 1..=levels).sum::<u32>(), "n={n} t={t}");
        }
    }

    /// The trace of `plan` through a binding with a GPU-side count: each dispatch trimmed by its
    /// rule, as the indirect arguments `dispatch_args` writes are.
    fn counted_trace(plan: &Plan, options: RecordOptions, count: u32) -> Trace {
        let mut recording = Recording::default();
        record_passes(&mut recording, plan, &options);
        let max = options.max_groups_per_dispatch;
        let rules = crate::network::dispatch_rules(plan, max);
        let direct = crate::network::direct_dispatches(plan, max);
        Trace::expand_counted(&recording, plan.n, plan.geometry, count, direct, &rules)
    }

    /// A capacity's plans of every kind: global and local merges, segment passes, each also
    /// looping on few workgroups.
    fn counted_plans(capacity: u32, geometry: Geometry, flags: u32) -> Vec<Plan> {
        let merges = Plan::new(capacity, geometry, flags).expect("a valid geometry");
        let segments = Plan::segmented(capacity, geometry, flags).expect("a valid geometry");
        vec![
            merges.clone(),
            merges.looping_passes(2, |_| u32::MAX),
            segments.clone(),
            segments.looping_passes(1, |_| 2),
        ]
    }

    /// What every counted trace must keep: no hazard, and no element at the count or past it
    /// read or written.
    fn check_counted_trace(trace: &Trace, count: u32, what: &str) {
        assert_eq!(trace.hazards(), vec![], "{what}");
        for d in trace.dispatches() {
            assert!(d.touched.iter().all(|&e| e < count), "{what}: {:?} touches past the count", d.kind);
        }
    }

    #[test]
    fn counted_sorts_sort_exactly_the_count_for_every_zero_one_input() {
        // The 0-1 principle over every capacity up to 20 and every count up to it (and one past
        // it, which is clamped): the passes planned for the capacity, each dispatch trimmed by its
        // rule, sort the first min(count, capacity) elements and leave every later one as it was.
        let split = RecordOptions { max_groups_per_dispatch: 2, drop_barrier_before_pass: None };
        let cases = [
            (Geometry { tile_log2: 1, global_wg: 1, fused: 1 }, ALL_GROUPS),
            (Geometry { tile_log2: 2, global_wg: 2, fused: 2 }, split),
            (Geometry { tile_log2: 2, global_wg: 1, fused: 3 }, ALL_GROUPS),
            (Geometry { tile_log2: 3, global_wg: 2, fused: 4 }, split),
        ];
        for (geometry, options) in cases {
            for order in [Order::Ascending, Order::Descending] {
                let flags = key_flags(KeyKind::U32, order);
                for capacity in 0..=20u32 {
                    for plan in counted_plans(capacity, geometry, flags) {
                        for count in 0..=capacity + 1 {
                            let what =
                                format!("{geometry:?} {order:?} capacity {capacity} count {count}: {:?}", plan.passes);
                            let trace = counted_trace(&plan, options, count);
                            let c = count.min(capacity);
                            check_counted_trace(&trace, c, &what);
                            let inputs = 1u64 << c;
                            let mut first = 0u64;
                            while first < inputs {
                                let live = (inputs - first).min(64);
                                // Elements past the count hold a pattern that must survive.
                                let past = |i: u32| 0x9e37_79b9_7f4a_7c15u64.rotate_left(i);
                                let mut lanes: Vec<u64> = (0..capacity)
                                    .map(|i| {
                                        if i < c {
                                            (0..live).fold(0u64, |w, b| w | ((((first + b) >> i) & 1) << b))
                                        } else {
                                            past(i)
                                        }
                                    })
                                    .collect();
                                trace.run_bitsliced(&mut lanes);
                                check_zero_one(&lanes[..c as usize], order, first, live, || what.clone());
                                for i in c..capacity {
                                    assert_eq!(lanes[i as usize], past(i), "{what}: element {i} changed");
                                }
                                first += 64;
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn counted_sorts_of_several_tiles_sort_random_pairs_up_to_the_count() {
        // Capacities of up to 40 tiles and random counts (with the edges: 0, 1, 2, a tile and
        // either side of it, the capacity and either side of it), every key kind and order, pairs:
        // the first min(count, capacity) elements sorted with their values, the rest untouched.
        let mut rng = rand::rngs::StdRng::seed_from_u64(0xc0_47);
        for (geometry, options) in [
            (Geometry { tile_log2: 2, global_wg: 2, fused: 2 }, ALL_GROUPS),
            (
                Geometry { tile_log2: 3, global_wg: 4, fused: 3 },
                RecordOptions { max_groups_per_dispatch: 3, drop_barrier_before_pass: None },
            ),
        ] {
            let tile = geometry.tile();
            for capacity in (0..=40 * tile).step_by(3).chain([64 * tile, 64 * tile + 1]) {
                for kind in [KeyKind::U32, KeyKind::I32, KeyKind::F32] {
                    for order in [Order::Ascending, Order::Descending] {
                        let flags = key_flags(kind, order);
                        let mut counts = vec![0, 1, 2, tile - 1, tile, tile + 1, capacity.saturating_sub(1), capacity];
                        counts.extend([capacity + 5, rng.random_range(0..=capacity), rng.random_range(0..=capacity)]);
                        for plan in counted_plans(capacity, geometry, flags) {
                            for &count in &counts {
                                let what = format!("{geometry:?} {kind:?} {order:?} capacity {capacity} count {count}");
                                let trace = counted_trace(&plan, options, count);
                                let c = count.min(capacity) as usize;
                                check_counted_trace(&trace, c as u32, &what);
                                let input: Vec<u32> = (0..capacity)
                                    .map(|_| [0, 1, 0x8000_0000, u32::MAX, rng.random()][rng.random_range(0..5)])
                                    .collect();
                                let (mut keys, mut values) = (input.clone(), (0..capacity).collect::<Vec<u32>>());
                                trace.run(&mut keys, Some(&mut values));
                                check_pairs(kind, order, &input[..c], &keys[..c], &values[..c], &what);
                                assert_eq!(&keys[c..], &input[c..], "{what}: keys past the count");
                                assert_eq!(
                                    values[c..],
                                    (c as u32..capacity).collect::<Vec<u32>>(),
                                    "{what}: values past the count"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_dispatch_rule_counts_the_workgroups_whose_first_element_is_below_the_count() {
        // Against the shaders' index rules, workgroup by workgroup: for every pass of every plan
        // kind and every count, the rule gives the workgroups whose first element lies below
        // min(count, n) (at most the loop stride of a looping pass), none where the count needs no
        // substage of the pass; at count n, the recorded workgroups (expand_counted asserts it).
        for tile_log2 in 1..=4 {
            let geometry = Geometry { tile_log2, global_wg: 2, fused: 3 };
            let t = geometry.tile();
            for n in (0..=150).chain([1 << 11, (1 << 11) + 7]) {
                for plan in counted_plans(n, geometry, 0) {
                    counted_trace(
                        &plan,
                        RecordOptions { max_groups_per_dispatch: 2, drop_barrier_before_pass: None },
                        n,
                    );
                    for pass in &plan.passes {
                        let first = |w: u32| -> u64 {
                            match pass.kind {
                                PassKind::TileSort => u64::from(w * t),
                                PassKind::LocalMerge => u64::from(w * (t << pass.substages)),
                                PassKind::GlobalMerge => {
                                    let low = pass.push.inc >> (pass.substages - 1);
                                    u64::from(slot_index(w * geometry.global_wg, 0, low, pass.substages, false))
                                }
                                PassKind::SegmentMerge => Segment::decode(&pass.push).element(tile_log2, w, 0),
                            }
                        };
                        let rule = pass.rule(&plan.geometry, 0, u32::MAX);
                        for c in 0..=n + 1 {
                            let bound = u64::from(c.min(n));
                            let below = (0..).take_while(|&w| first(w) < bound).count() as u32;
                            let needed = pass.first_stage() <= crate::segment::ceil_log2(bound);
                            let expect = if needed { below.min(pass.workgroups) } else { 0 };
                            assert_eq!(rule.groups(c, n), expect, "t={tile_log2} n={n} count {c}: {pass:?}");
                        }
                    }
                }
            }
        }
    }
}
