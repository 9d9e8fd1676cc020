//! Sorts on the default Vulkan device (lavapipe in CI) with the validation layer and
//! synchronization validation on, against an independent reference: the standard library's sort
//! (`total_cmp` for floats, `tests/common`'s `Reference`). Every result is compared bit for bit;
//! pairs are checked as `out_key[i] == in_key[out_value[i]]` with the values a permutation. Inputs
//! are made as 64-bit patterns; 4-byte key types take their low half.
//!
//! Sizes: on a CPU device (lavapipe) the tests run at the smallest sizes that still reach each code
//! path: tile caps put multi-tile sorts, windowed local merges (256 tiles or more), windows of four
//! (2048 or more), looping passes, segment passes and split dispatches within reach of small n,
//! and the plans are checked to take them. Most of lavapipe's time goes into compiling pipelines
//! (one set per sorter, kernel build and tile shape), so a size that would need a shape of its own
//! only to repeat a path is left to the GPU runs, and sizes that need one for a single path sort
//! only the build that path is about. A GPU runs the full sizes by default.
//!
//! Environment, for runs on a real GPU:
//! - `BITONIC_VK_TEST_SCALE=full` (or `small`): the full sizes and cases (or the small ones) on any
//!   device; by default full on a GPU, small on a CPU device;
//! - `BITONIC_VK_TEST_LARGE_LOG2` (default 20 at full scale, 16 at small): log2 of the size of the
//!   large-n test;
//! - `BITONIC_VK_TEST_REPEAT` (default 3): how often the large-n test sorts fresh data;
//! - `BITONIC_VK_TEST_DROP_BARRIER=last-flip` (or a pass index): the large-n test leaves that
//!   barrier out and must then fail on a GPU that runs dispatches concurrently;
//! - `BITONIC_VK_TEST_SEED`: the seed of every test's inputs (each test prints the one it drew).

mod common;
use common::*;
use std::sync::{Mutex, MutexGuard, OnceLock};

use bitonic_vk::hooks::{self, Payload, Segment, SMALL_SORT};
use bitonic_vk::{DeviceType, Error, KeyKind, KeyWidth, Order, PassSync, Sorter, SorterDesc, WarmUp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KINDS: [KeyKind; 6] = KeyKind::ALL;
const ORDERS: [Order; 2] = [Order::Ascending, Order::Descending];

/// A sorter of `desc`, on the kernels `BITONIC_VK_TEST_KERNELS` asks for where `desc` picks none.
fn new_sorter(desc: &SorterDesc) -> Sorter {
    let mut desc = desc.clone();
    desc.tuning.kernels = desc.tuning.kernels.or_else(kernels_from_env);
    Sorter::new(context(), &desc).unwrap_or_else(|e| panic!("creating the sorter {desc:?}: {e}"))
}

/// The shared sorter with default options, one test at a time.
fn sorter() -> MutexGuard<'static, Sorter> {
    static SORTER: OnceLock<Mutex<Sorter>> = OnceLock::new();
    SORTER.get_or_init(|| Mutex::new(new_sorter(&SorterDesc::default()))).lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared sorter whose local workgroups are a quarter of `tile` (1024 or 2048, the default
/// tiles of sorts of up to [`SMALL_SORT`] elements): the workgroup the SMALL tile sort takes, which
/// a CPU device's default (capped at 32 invocations) is not.
fn quarter_sorter(tile: u32) -> MutexGuard<'static, Sorter> {
    static SORTERS: Mutex<Vec<(u32, &'static Mutex<Sorter>)>> = Mutex::new(Vec::new());
    let slot = {
        let mut sorters = SORTERS.lock().unwrap_or_else(|e| e.into_inner());
        match sorters.iter().find(|(t, _)| *t == tile) {
            Some((_, slot)) => *slot,
            None => {
                let desc = sorter_desc(|d| d.tuning.local_workgroup_size = Some(tile / 4));
                let slot: &'static Mutex<Sorter> = Box::leak(Box::new(Mutex::new(new_sorter(&desc))));
                sorters.push((tile, slot));
                slot
            }
        }
    };
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

fn assert_validation_clean() {
    let errors = context().validation_errors();
    assert!(errors.is_empty(), "validation errors:\n{}", errors.join("\n"));
}

fn rng(name: &str) -> StdRng {
    let seed =
        std::env::var("BITONIC_VK_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    eprintln!("{name}: seed {seed} (set BITONIC_VK_TEST_SEED to repeat)");
    StdRng::seed_from_u64(seed)
}

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The reference order of key bits of a kind (4-byte kinds: the low half).
fn compare(kind: KeyKind, a: u64, b: u64) -> std::cmp::Ordering {
    match kind {
        KeyKind::U32 => (a as u32).cmp(&(b as u32)),
        KeyKind::I32 => (a as i32).cmp(&(b as i32)),
        KeyKind::F32 => f32::from_bits(a as u32).total_cmp(&f32::from_bits(b as u32)),
        KeyKind::U64 => a.cmp(&b),
        KeyKind::I64 => (a as i64).cmp(&(b as i64)),
        KeyKind::F64 => f64::from_bits(a).total_cmp(&f64::from_bits(b)),
    }
}

/// Whether the kind's keys are 4 bytes.
fn narrow(kind: KeyKind) -> bool {
    kind.width() == KeyWidth::Bits32
}

/// Sorts key bits as the given kind on the GPU (4-byte kinds: the low halves, which must be all
/// there is).
fn gpu_sort(
    sorter: &mut Sorter,
    kind: KeyKind,
    order: Order,
    keys: &mut [u64],
    values: Option<&mut [u32]>,
) -> bitonic_vk::Result<usize> {
    fn typed<K: bitonic_vk::SortKey, W: bytemuck::Pod>(
        s: &mut Sorter,
        k: &mut [W],
        v: Option<&mut [u32]>,
        o: Order,
    ) -> bitonic_vk::Result<usize> {
        let k: &mut [K] = bytemuck::cast_slice_mut(k);
        Ok(match v {
            Some(v) => s.sort_pairs(k, v, o)?.passes,
            None => s.sort(k, o)?.passes,
        })
    }
    if narrow(kind) {
        let mut words: Vec<u32> = keys.iter().map(|&k| k as u32).collect();
        let passes = match kind {
            KeyKind::U32 => typed::<u32, u32>(sorter, &mut words, values, order),
            KeyKind::I32 => typed::<i32, u32>(sorter, &mut words, values, order),
            _ => typed::<f32, u32>(sorter, &mut words, values, order),
        }?;
        keys.iter_mut().zip(words).for_each(|(k, w)| *k = u64::from(w));
        Ok(passes)
    } else {
        match kind {
            KeyKind::U64 => typed::<u64, u64>(sorter, keys, values, order),
            KeyKind::I64 => typed::<i64, u64>(sorter, keys, values, order),
            _ => typed::<f64, u64>(sorter, keys, values, order),
        }
    }
}

/// Sorts `input` on the GPU (keys alone, or with values 0..n) and checks it against the reference.
fn verify(
    sorter: &mut Sorter,
    kind: KeyKind,
    order: Order,
    pairs: bool,
    input: &[u64],
    what: &str,
) -> Result<(), String> {
    let input: Vec<u64> = input.iter().map(|&b| if narrow(kind) { u64::from(b as u32) } else { b }).collect();
    let mut keys = input.clone();
    let mut values: Vec<u32> = (0..input.len() as u32).collect();
    let what = format!("{what}: {kind:?} {order:?} {} n={}", if pairs { "pairs" } else { "keys" }, input.len());
    gpu_sort(sorter, kind, order, &mut keys, pairs.then_some(&mut values[..])).map_err(|e| format!("{what}: {e}"))?;
    Reference::new(&input, order, |a, b| compare(kind, *a, *b))
        .check(&keys, pairs.then_some(&values[..]))
        .map_err(|e| format!("{what}: {e}"))
}

/// [`verify`], failing the test on any difference.
fn check(sorter: &mut Sorter, kind: KeyKind, order: Order, pairs: bool, input: &[u64], what: &str) {
    if let Err(message) = verify(sorter, kind, order, pairs, input, what) {
        panic!("{message}");
    }
}

/// A knob of a row of a table of sorter descriptions: a `Tuning` or `Hooks` field.
type Knob = Option<u32>;

/// Which kernel builds (key width and payload) a row of a test sorts at a size: every one, those
/// of 4-byte keys (alone and with values), or 4-byte keys alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Builds {
    All,
    Narrow,
    Keys32,
}

/// What a row of a test sorts: sizes, each with its builds.
type Work = [(usize, Builds)];

/// Runs `check` for every key type, order and payload of `builds`.
fn check_builds(sorter: &mut Sorter, builds: Builds, input_for: impl Fn(KeyKind) -> Vec<u64>, what: &str) {
    for kind in KINDS.into_iter().filter(|&k| builds == Builds::All || narrow(k)) {
        let input = input_for(kind);
        for order in ORDERS {
            for pairs in [false, true].into_iter().filter(|&p| !(p && builds == Builds::Keys32)) {
                check(sorter, kind, order, pairs, &input, what);
            }
        }
    }
}

/// Runs `check` for every key type, order and payload.
fn check_all(sorter: &mut Sorter, input_for: impl Fn(KeyKind) -> Vec<u64>, what: &str) {
    check_builds(sorter, Builds::All, input_for, what);
}

/// Runs `check` for the 4-byte key types alone, in both orders: one kernel build.
fn check_keys32(sorter: &mut Sorter, input: &[u64], what: &str) {
    check_builds(sorter, Builds::Keys32, |_| input.to_vec(), what);
}

/// [`check`] on `sorter` (the shared default sorter), then, for 4-byte keys of a sort of at most
/// [`SMALL_SORT`] elements that its tile sort does not run on the SMALL build (a CPU device's
/// default workgroups are below a quarter of the tile), again on the quarter-workgroup sorter,
/// which must take the SMALL build: the SMALL tile sort stays covered on every device with
/// subgroup shuffles.
fn check_small_too(sorter: &mut Sorter, kind: KeyKind, order: Order, pairs: bool, input: &[u64], what: &str) {
    check(sorter, kind, order, pairs, input, what);
    let n = input.len();
    if !narrow(kind) || !(2..=SMALL_SORT as usize).contains(&n) || !context().device_info().limits.subgroup_shuffle {
        return;
    }
    let shape = hooks::shape(sorter, n, pairs, KeyWidth::Bits32).expect("a shape");
    if shape.small_tile_sort {
        return;
    }
    let mut quarter = quarter_sorter(shape.tile);
    let small = hooks::shape(&quarter, n, pairs, KeyWidth::Bits32).expect("a shape");
    assert!(small.small_tile_sort && small.tile == shape.tile, "{what} n={n}: not the SMALL build: {small:?}");
    check(&mut quarter, kind, order, pairs, input, &format!("{what} (SMALL tile sort)"));
}

/// [`check_all`] on the shared default sorter, with [`check_small_too`].
fn check_all_small_too(sorter: &mut Sorter, input_for: impl Fn(KeyKind) -> Vec<u64>, what: &str) {
    for kind in KINDS {
        let input = input_for(kind);
        for order in ORDERS {
            for pairs in [false, true] {
                check_small_too(sorter, kind, order, pairs, &input, what);
            }
        }
    }
}

/// Whether sorts of n elements through `a` and `b` take the same kernels and passes, for every
/// payload and key width: one of them sorting n checks the other's work too.
fn alike(a: &Sorter, b: &Sorter, n: usize) -> bool {
    [false, true].into_iter().all(|pairs| {
        [KeyKind::U32, KeyKind::U64].into_iter().all(|kind| {
            let plan = |s: &Sorter| hooks::plan(s, n, pairs, kind, Order::Ascending).expect("a plan");
            let shape = |s: &Sorter| hooks::shape(s, n, pairs, kind.width()).expect("a shape");
            plan(a) == plan(b) && shape(a) == shape(b)
        })
    })
}

/// The kinds of a plan's passes with their windows (`local_merge/1`: windows of two tiles, `/2`:
/// of four) or fused substages (`global_merge/6`), and whether any loops or is split over more
/// dispatches than `max_groups` workgroups allow.
fn plan_features(sorter: &Sorter, n: usize, pairs: bool, max_groups: Option<u32>) -> Vec<String> {
    let plan = hooks::plan(sorter, n, pairs, KeyKind::U32, Order::Ascending).expect("a plan");
    let mut features: Vec<String> = plan
        .passes
        .iter()
        .map(|p| match p.kind.name() {
            "local_merge" | "global_merge" if p.substages > 0 => format!("{}/{}", p.kind.name(), p.substages),
            name => name.to_string(),
        })
        .collect();
    if plan.passes.iter().any(|p| p.push.loop_stride > 0) {
        features.push("loops".into());
    }
    if plan.passes.iter().any(|p| max_groups.is_some_and(|g| p.workgroups > g)) {
        features.push("split".into());
    }
    features.sort();
    features.dedup();
    features
}

/// The bits of a small integer as a key of `kind`.
fn num(kind: KeyKind, x: i64) -> u64 {
    match kind {
        KeyKind::F32 => u64::from((x as f32).to_bits()),
        KeyKind::F64 => (x as f64).to_bits(),
        KeyKind::U64 | KeyKind::I64 => x as u64,
        _ => u64::from(x as i32 as u32),
    }
}

/// The largest tiles (keys, pairs) the sorter uses, those of large sorts.
fn tiles(sorter: &Sorter) -> (u32, u32) {
    let tile = |pairs| {
        hooks::plan(sorter, 1 << 20, pairs, KeyKind::U32, Order::Ascending)
            .map(|p| p.geometry.tile())
            .unwrap_or_else(|e| panic!("plan: {e}"))
    };
    (tile(false), tile(true))
}

#[test]
fn small_sorts_take_the_subgroup_tile_sort_here() {
    // The tile sort's SMALL build (registers and subgroup shuffles) runs where the rule
    // (tuning::small_tile_sort) says: 4-byte keys, with or without values, on a device with
    // shuffles in compute shaders (lavapipe and the H100 have them), in a tile of up to 1024 or in
    // tiles of 2048 with the small sorts' chunks of 3, on local workgroups of a quarter of the tile.
    // That is the default workgroup on a GPU; a CPU device's default is capped at 32 invocations
    // (tuning::CPU_LOCAL_WG), so there the sorts of up to 2^15 4-byte keys in this suite (awkward
    // sizes, distributions, specials, extreme keys, many ties) run again on sorters whose
    // workgroups are a quarter of the tile (`check_small_too`), and take the SMALL build there.
    // Sorts just above 2^15 in tiles of 2048 keep the plain build on either, but for 4-byte keys
    // on a device that reports its multiprocessors (the H100; lavapipe reports none): they take
    // chunks of 3 in their segment tiles of 2048 (sorter::segment_chunk_for), and the SMALL build
    // again. Small tiles of the tile-cap tests (16 and 64 elements) take it too wherever their
    // quarter-of-the-tile default fits under the cap. This test keeps that coverage from going
    // away unnoticed.
    let info = context().device_info();
    assert!(info.limits.subgroup_shuffle, "the test device has no subgroup shuffles in compute shaders");
    let cpu = info.device_type == DeviceType::Cpu;
    let sorter = sorter();
    for pairs in [false, true] {
        let payload = if pairs { Payload::Pairs } else { Payload::Keys };
        let sizes =
            [(1000usize, true), (1025, true), (3000, true), (1 << 14, true), (1 << 15, true), ((1 << 15) + 1, false)];
        for (n, small) in sizes {
            let default = hooks::shape(&sorter, n, pairs, KeyWidth::Bits32).expect("a shape");
            let (tile, local_wg, chunk) = (default.tile, default.local_wg, default.chunk);
            assert_eq!(default.payload, payload);
            let small = small || chunk == 3;
            let what = format!("pairs {pairs}, n {n}: a tile of {tile} on {local_wg} invocations, chunks of {chunk}");
            if small {
                assert!(tile <= 2048, "{what}: the small sorts' tiles grew");
            }
            // The default workgroup: a quarter of the tile on a GPU, which takes the SMALL build
            // where the sort is small; fewer invocations on a CPU device, which never does.
            if cpu {
                assert!(local_wg < tile / 4, "{what}: a CPU device's default workgroup is not capped");
                assert!(!default.small_tile_sort, "{what}: the SMALL build on fewer than a quarter of the tile");
            } else {
                assert_eq!(local_wg, tile / 4, "{what}: the default workgroup is not a quarter of the tile");
                assert_eq!(default.small_tile_sort, small, "{what}: SMALL build {}", default.small_tile_sort);
            }
            // A quarter of the tile asked for: the SMALL build wherever the sort is small, on any
            // device.
            let quarter = hooks::shape(&quarter_sorter(tile), n, pairs, KeyWidth::Bits32).expect("a shape");
            let what = format!("{what}; asked for {} invocations", tile / 4);
            assert_eq!((quarter.tile, quarter.local_wg, quarter.chunk), (tile, tile / 4, chunk), "{what}");
            assert_eq!(quarter.small_tile_sort, small, "{what}: SMALL build {}", quarter.small_tile_sort);
            for s in [&*sorter, &*quarter_sorter(tile)] {
                let wide = hooks::shape(s, n, pairs, KeyWidth::Bits64).expect("a shape");
                assert!(!wide.small_tile_sort, "{what}: 8-byte keys keep the plain tile sort");
            }
        }
    }
}

#[test]
fn pairs_of_small_tiles_stay_together_through_many_ties() {
    // Sorts of one SMALL tile (stages 1..log2 of the size rounded up: partners in registers, in
    // other lanes of a subgroup, and from strides of 64 on the H100 or 16 on lavapipe in shared
    // memory, pairs taking two elements per invocation) on both sides of the powers of two, and of
    // several SMALL tiles of 2048 with the merges after them, whole and partial, with inputs where
    // most keys have equals (u32 keys of -1 are u32::MAX, the image of the padding) and with few
    // ties: pairs, whose values must follow their keys through every tie. On a CPU device each sort
    // runs on the default workgroups and again on the SMALL build's (`check_small_too`).
    let mut rng = rng("small ties");
    let mut sorter = sorter();
    let sizes = [
        2usize, 3, 4, 5, 8, 9, 31, 100, 127, 128, 129, 255, 256, 257, 383, 513, 777, 1023, 1024, 1025, 1500, 2048,
        2049, 6000, 16383, 20000,
    ];
    for n in sizes {
        let random: Vec<i64> = (0..n).map(|_| rng.random_range(-500_000..500_000)).collect();
        let inputs: [(&str, Vec<i64>); 4] = [
            ("all equal", vec![5; n]),
            ("three keys", random.iter().map(|r| r.rem_euclid(3) - 1).collect()),
            ("zero-one", random.iter().map(|r| r & 1).collect()),
            ("random", random.clone()),
        ];
        for (name, input) in &inputs {
            for kind in [KeyKind::U32, KeyKind::F32] {
                let input: Vec<u64> = input.iter().map(|&x| num(kind, x) & 0xFFFF_FFFF).collect();
                for order in ORDERS {
                    check_small_too(&mut sorter, kind, order, true, &input, name);
                }
            }
        }
    }
    assert_validation_clean();
}

#[test]
fn sorts_awkward_sizes_for_every_key_type_order_and_payload() {
    let mut rng = rng("awkward sizes");
    let mut sorter = sorter();
    let (keys_tile, pairs_tile) = tiles(&sorter);
    // Both sides of the powers of two, of SMALL_SORT (2^15) and of the large sorts' tiles; at
    // small scale no power of two above 2^15 and random sizes in the tiles of 2048 (below 2^17),
    // whose kernels the sizes above already take.
    let mut sizes: Vec<usize> = vec![0, 1, 2, 3, 5, 7, 11, 13, 17, 31, 97, 251, 1021];
    let powers: &[u32] = scaled(&[4, 7, 10, 11, 12, 13, 14, 15], &[4, 7, 10, 11, 12, 13, 14, 15, 16]);
    for k in powers {
        sizes.extend([(1 << k) - 1, 1 << k, (1 << k) + 1]);
    }
    for tile in [keys_tile as usize, pairs_tile as usize] {
        sizes.extend([tile - 1, tile, tile + 1, 2 * tile - 1, 2 * tile + 1]);
    }
    let largest = scaled(100_000, 200_000);
    sizes.extend((0..4).map(|_| rng.random_range(2..largest)));
    sizes.sort_unstable();
    sizes.dedup();
    for n in sizes {
        let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
        check_all_small_too(&mut sorter, |_| input.clone(), "random bits");
    }
    assert_validation_clean();
}

/// Makes the key bits of one distribution for a key kind.
type Distribution<'a> = Box<dyn Fn(KeyKind) -> Vec<u64> + 'a>;

#[test]
fn sorts_every_distribution() {
    let mut rng = rng("distributions");
    let mut sorter = sorter();
    let (tile, _) = tiles(&sorter);
    for n in [1000usize, tile as usize + 1, 3 * tile as usize + 17, scaled(40_009, 100_003)] {
        let pool: Vec<i64> = (0..4).map(|_| rng.random_range(-1000..1000)).collect();
        let random: Vec<u64> = (0..n).map(|_| rng.random()).collect();
        let distributions: Vec<(&str, Distribution)> = vec![
            ("random", Box::new(|_| random.clone())),
            ("all equal", Box::new(|k| vec![num(k, pool[0]); n])),
            ("few distinct", Box::new(|k| random.iter().map(|r| num(k, pool[*r as usize % 4])).collect())),
            (
                "sorted",
                Box::new(|k| {
                    let mut v = random.clone();
                    v.sort_by(|a, b| compare(k, *a, *b));
                    v
                }),
            ),
            (
                "reversed",
                Box::new(|k| {
                    let mut v = random.clone();
                    v.sort_by(|a, b| compare(k, *b, *a));
                    v
                }),
            ),
            ("sawtooth", Box::new(|k| (0..n).map(|i| num(k, (i % 97) as i64 - 48)).collect())),
            ("zero-one", Box::new(|k| random.iter().map(|r| num(k, (r & 1) as i64)).collect())),
            (
                "min, max and zero",
                Box::new(|k| {
                    let extremes = match k {
                        KeyKind::U32 => [0, u64::from(u32::MAX), 0],
                        KeyKind::I32 => [u64::from(i32::MIN as u32), i32::MAX as u64, 0],
                        KeyKind::F32 => [u64::from(f32::MIN.to_bits()), u64::from(f32::MAX.to_bits()), 0],
                        KeyKind::U64 => [0, u64::MAX, 0],
                        KeyKind::I64 => [i64::MIN as u64, i64::MAX as u64, 0],
                        KeyKind::F64 => [f64::MIN.to_bits(), f64::MAX.to_bits(), 0],
                    };
                    random.iter().map(|r| extremes[*r as usize % 3]).collect()
                }),
            ),
        ];
        for (name, make) in &distributions {
            check_all_small_too(&mut sorter, make, name);
        }
    }
    assert_validation_clean();
}

#[test]
fn f32_specials_sort_in_total_order() {
    let mut rng = rng("f32 specials");
    let mut sorter = sorter();
    let specials: Vec<u32> = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::EPSILON,
        1.0,
        -1.0,
    ]
    .iter()
    .map(|f| f.to_bits())
    .chain([
        0x7fc0_0000, // quiet NaN
        0xffc0_0000, // negative quiet NaN
        0x7f80_0001, // signalling NaN
        0xff80_0001, // negative signalling NaN
        0x7fff_ffff, // the largest +NaN
        0xffff_ffff, // the smallest -NaN
        0x0000_0001, // smallest subnormal
        0x8000_0001, // its negative
        0x007f_ffff, // largest subnormal
        0x807f_ffff,
    ])
    .collect();
    for n in [specials.len(), 100, 4097, 50_001] {
        let input: Vec<u64> = (0..n)
            .map(|i| if i < specials.len() { specials[i] } else { specials[rng.random_range(0..specials.len())] })
            .map(u64::from)
            .collect();
        for order in ORDERS {
            for pairs in [false, true] {
                check_small_too(&mut sorter, KeyKind::F32, order, pairs, &input, "f32 specials");
            }
        }
    }
    assert_validation_clean();
}

#[test]
fn f64_specials_sort_in_total_order() {
    let mut rng = rng("f64 specials");
    let mut sorter = sorter();
    let specials: Vec<u64> = [
        0.0f64,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        f64::EPSILON,
        1.0,
        -1.0,
        // Equal high words: only the low word orders these.
        1.0 + f64::EPSILON,
        -1.0 - f64::EPSILON,
    ]
    .iter()
    .map(|f| f.to_bits())
    .chain([
        0x7ff8_0000_0000_0000, // quiet NaN
        0xfff8_0000_0000_0000, // negative quiet NaN
        0x7ff0_0000_0000_0001, // signalling NaN
        0xfff0_0000_0000_0001, // negative signalling NaN
        0x7fff_ffff_ffff_ffff, // the largest +NaN
        0xffff_ffff_ffff_ffff, // the smallest -NaN
        0x0000_0000_0000_0001, // smallest subnormal
        0x8000_0000_0000_0001, // its negative
        0x0000_0001_0000_0000, // a subnormal with an empty low word
        0x000f_ffff_ffff_ffff, // largest subnormal
        0x800f_ffff_ffff_ffff,
    ])
    .collect();
    for n in [specials.len(), 100, 4097, 50_001] {
        let input: Vec<u64> = (0..n)
            .map(|i| if i < specials.len() { specials[i] } else { specials[rng.random_range(0..specials.len())] })
            .collect();
        for order in ORDERS {
            for pairs in [false, true] {
                check(&mut sorter, KeyKind::F64, order, pairs, &input, "f64 specials");
            }
        }
    }
    assert_validation_clean();
}

#[test]
fn keeps_pairs_together_when_many_keys_equal_the_extreme_key() {
    let mut rng = rng("extreme keys");
    let mut sorter = sorter();
    let (tile, pairs_tile) = tiles(&sorter);
    // The largest key of each kind in ascending order, and the smallest for descending: the values
    // a sentinel-padding sort would confuse with its padding.
    let extremes = [
        (KeyKind::U32, Order::Ascending, u64::from(u32::MAX)),
        (KeyKind::I32, Order::Ascending, i32::MAX as u64),
        (KeyKind::F32, Order::Ascending, u64::from(f32::INFINITY.to_bits())),
        (KeyKind::F32, Order::Ascending, 0x7fc0_0000),
        (KeyKind::F32, Order::Ascending, 0x7fff_ffff),
        (KeyKind::U32, Order::Descending, 0),
        (KeyKind::I32, Order::Descending, u64::from(i32::MIN as u32)),
        (KeyKind::F32, Order::Descending, u64::from(f32::NEG_INFINITY.to_bits())),
        (KeyKind::F32, Order::Descending, 0xffff_ffff),
        (KeyKind::U64, Order::Ascending, u64::MAX),
        (KeyKind::I64, Order::Ascending, i64::MAX as u64),
        (KeyKind::F64, Order::Ascending, 0x7fff_ffff_ffff_ffff),
        (KeyKind::U64, Order::Descending, 0),
        (KeyKind::I64, Order::Descending, i64::MIN as u64),
        (KeyKind::F64, Order::Descending, u64::MAX),
    ];
    // Tiles of 16 put windowed local merges (256 tiles or more, windows of four from 2048) and,
    // for 4-byte keys alone, global passes of six substages (2048 tiles or more) within reach of
    // small sizes.
    // At small scale with the small sorts' chunks of 3 throughout: the sizes with windows of four
    // lie above 2^15, where chunks of 4 would make a second set of pipelines for the same paths.
    let mut small_tiles = new_sorter(&sorter_desc(|d| {
        d.tuning.max_tile = Some(16);
        if !full_scale() {
            d.tuning.local_chunk_substages = Some(3);
        }
    }));
    // 16 * 512 + 5 ends in a window with a partial lower tile and none above, 16 * 300 + 21 in one
    // with a full lower tile and a partial upper one; the last three take windows of four tiles
    // and end in one whose only real tile is partial, one whose second is, and one whose fourth is.
    let cases = [
        1000usize,
        pairs_tile as usize * 2 + 1,
        tile as usize * 3 - 1,
        70_001,
        16 * 512 + 5,
        16 * 300 + 21,
        16 * 2100 + 7,
        16 * 2051 + 40,
        16 * 2100 + 60,
    ];
    for (index, n) in cases.into_iter().enumerate() {
        if index >= 4 {
            // Windows of two tiles for the first two cases, of four for the last three, where
            // 4-byte keys alone also take global passes of six substages.
            let window = if index < 6 { "local_merge/1" } else { "local_merge/2" };
            for pairs in [false, true] {
                let features = plan_features(&small_tiles, n, pairs, None);
                assert!(features.iter().any(|f| f == window), "n={n} pairs {pairs}: {features:?}");
                let six = features.iter().any(|f| f == "global_merge/6");
                assert_eq!(six, index >= 6 && !pairs, "n={n} pairs {pairs}: {features:?}");
            }
        }
        for (e, (kind, order, extreme)) in extremes.into_iter().enumerate() {
            // At small scale one share of extreme keys per case and key, taking turns.
            let percents = if full_scale() { vec![10, 30, 50] } else { vec![[10, 30, 50][(index + e) % 3]] };
            for percent in percents {
                let input: Vec<u64> =
                    (0..n).map(|_| if rng.random_range(0..100) < percent { extreme } else { rng.random() }).collect();
                let what = format!("{percent}% = {extreme:#x}");
                if index < 4 {
                    check_small_too(&mut sorter, kind, order, true, &input, &what);
                    check_small_too(&mut sorter, kind, order, false, &input, &what);
                } else {
                    check(&mut small_tiles, kind, order, true, &input, &what);
                    check(&mut small_tiles, kind, order, false, &input, &what);
                }
            }
        }
    }
    assert_validation_clean();
}

#[test]
fn split_dispatches_small_tiles_and_every_fusion_sort_correctly() {
    let mut rng = rng("split dispatches");
    // The last two rows take local workgroups other than the default (which depends on the key
    // width): with 1024 invocations a 64-element tile leaves most of them idle (and its windowed
    // local merges run with fewer elements per window than invocations). The last column but one
    // caps the workgroups of the local merges, so that each loops over tiles and loads the next
    // ahead (lavapipe reports no multiprocessor count, so by default it never does); with 64
    // invocations a tile of 8192 does not fit in the registers ahead and is loaded as it comes.
    // lavapipe runs a workgroup's invocations one after another between barriers, so 1024
    // invocations on a tile of 64 cost it seconds per sort: that row takes the sizes that reach
    // its windows, in one key type and order per key width. What it covers is the plan and the
    // indexing of a wide workgroup, which does not depend on the key type or order; every other
    // row checks them all.
    // The sizes: tiles of 16 and 64 take windowed local merges from 256 tiles on (4112 and 16_448:
    // an odd count, the last window's upper tile empty; 4121 and 16_481: the upper tile partial;
    // at full scale also 10_007 for tiles of 16, 40_000 and 40_033), and tiles of 64 windows of four with global
    // passes of six substages from 2048 tiles (140_001, whose last window's fourth tile is
    // partial); the fusion caps take as many substages as they allow (32_001: 16 tiles of 2048).
    // Each row checks that its plans take what it is there for (`features`, over all its sizes).
    // At small scale: 140_001 sorts 4-byte keys alone (its chunks of 4 would make every build a
    // second set of pipelines; windows of four in every build are the extreme-key test's); the
    // rows of the default tiles leave single tiles (2, 65, 1000) to full scale, since their tiles
    // of 2048 run the same kernels, which a single tile would make again for tiles of 1024; the
    // rows of fusion caps on the default tiles sort 4-byte keys alone, since what they are there
    // for is the planner's cut of the global passes, whose kernels of 1 to 6 substages every build
    // runs in the other rows and tests; the wide row takes 4-byte keys alone and with values.
    use Builds::{All, Keys32, Narrow};
    struct Row<'a> {
        /// max_tile, max_workgroups_per_dispatch, max_fused_substages, local_workgroup_size,
        /// merge_workgroups.
        knobs: (Knob, Knob, Knob, Knob, Knob),
        sizes: &'a [usize],
        /// Sizes added at full scale.
        full: &'a [usize],
        /// Sizes of `full` sorted at small scale too, with 4-byte keys alone.
        keys32: &'a [usize],
        /// The builds of `sizes` at small scale.
        builds: Builds,
        /// What the row's plans must take.
        features: &'a [&'a str],
    }
    let windows = &["local_merge/1", "loops", "split"];
    let rows = [
        Row {
            knobs: (Some(64), Some(3), None, None, Some(3)),
            sizes: &[2, 65, 1000, 10_007, 16_448, 16_481],
            full: &[40_000, 40_033, 140_001],
            keys32: &[140_001],
            builds: All,
            features: &["local_merge/1", "local_merge/2", "global_merge/6", "loops", "split"],
        },
        Row {
            knobs: (Some(2), None, None, None, None),
            sizes: &[3, 100, 1025],
            full: &[],
            keys32: &[],
            builds: All,
            features: &["local_merge/1"],
        },
        Row {
            knobs: (Some(8), None, None, None, None),
            sizes: &[2, 9, 65, 1000, 10_007],
            full: &[],
            keys32: &[],
            builds: All,
            features: &["local_merge/1"],
        },
        Row {
            knobs: (Some(16), Some(1), Some(1), None, Some(2)),
            sizes: &[2, 65, 1000, 4112, 4121],
            full: &[10_007, 40_000, 40_033],
            keys32: &[],
            builds: All,
            features: windows,
        },
        Row {
            // Three looping workgroups, more than a dispatch takes: every device splits them.
            knobs: (None, Some(2), Some(2), None, Some(3)),
            sizes: &[10_007, 40_033],
            full: &[2, 65, 1000, 40_000],
            keys32: &[],
            builds: Keys32,
            features: &["loops", "split"],
        },
        Row {
            knobs: (Some(256), None, Some(3), None, None),
            sizes: &[2, 65, 1000, 10_007, 40_033],
            full: &[40_000],
            keys32: &[],
            builds: Keys32,
            features: &["global_merge/3"],
        },
        Row {
            knobs: (None, None, Some(1), None, Some(0)),
            sizes: &[10_007, 40_033],
            full: &[2, 65, 1000, 40_000],
            keys32: &[],
            builds: Keys32,
            features: &["global_merge/1"],
        },
        Row {
            knobs: (None, None, Some(4), Some(64), Some(2)),
            sizes: &[10_007, 32_001],
            full: &[2, 65, 1000, 40_000, 40_033],
            keys32: &[],
            builds: Keys32,
            features: &["global_merge/4", "loops"],
        },
        Row {
            knobs: (Some(64), Some(2), None, Some(1024), Some(5)),
            sizes: &[2, 65, 1000, 16_481],
            full: &[10_007, 40_033],
            keys32: &[],
            builds: Narrow,
            features: windows,
        },
    ];
    for Row {
        knobs: (max_tile, max_groups, max_fused, local_wg, merge_groups),
        sizes,
        full,
        keys32,
        builds,
        features,
    } in rows
    {
        let desc = sorter_desc(|d| {
            d.tuning.max_tile = max_tile;
            d.hooks.max_workgroups_per_dispatch = max_groups;
            d.tuning.max_fused_substages = max_fused;
            d.tuning.local_workgroup_size = local_wg;
            d.tuning.merge_workgroups = merge_groups;
        });
        let mut sorter = new_sorter(&desc);
        let wide = local_wg == Some(1024);
        let mut sizes = sizes.to_vec();
        sizes.extend(if full_scale() { full } else { keys32 });
        sizes.sort_unstable();
        sizes.dedup();
        let mut taken = Vec::new();
        for &n in &sizes {
            let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
            let only_keys32 = !full_scale() && keys32.contains(&n);
            for pairs in [false, true].into_iter().filter(|&p| !(only_keys32 && p)) {
                taken.extend(plan_features(&sorter, n, pairs, max_groups));
            }
            let what = format!("{desc:?}");
            if only_keys32 || (!full_scale() && builds == Keys32) {
                check_keys32(&mut sorter, &input, &what);
            } else if wide {
                let kinds = if !full_scale() && builds == Narrow {
                    [(KeyKind::U32, Order::Ascending), (KeyKind::F32, Order::Descending)]
                } else {
                    [(KeyKind::U32, Order::Ascending), (KeyKind::F64, Order::Descending)]
                };
                for (kind, order) in kinds {
                    for pairs in [false, true] {
                        check(&mut sorter, kind, order, pairs, &input, &what);
                    }
                }
            } else {
                check_all(&mut sorter, |_| input.clone(), &what);
            }
        }
        for feature in features {
            assert!(taken.iter().any(|f| f == feature), "{desc:?} sizes {sizes:?}: no {feature} in {taken:?}");
        }
    }
    assert_validation_clean();
}

#[test]
fn segment_passes_sort_every_key_type_order_and_payload() {
    // Every pass after the tile sort a segment pass (Plan::segmented): the default tiles, small
    // tiles with split dispatches, chunks of 3 substages (cross chunks with a tail of two), of 2
    // and of 1 (no cross chunk), and a looping tile sort before the segments. Sizes with a
    // partial last tile put virtual elements among a segment's real ones; in those of a power of
    // two the looping build of 4-byte keys skips its bounds test (all_real). Where the merge
    // workgroups are capped below the cosets (the second and third rows, with the default tiles,
    // and the sixth), the segment passes loop over cosets and load the next ahead too (lavapipe
    // reports no multiprocessor count, so by default nothing loops there). The carried low run:
    // 8 by default there (no multiprocessor count); 16 (the third row), as sorts of more tiles
    // than multiprocessors take on the H100; 8 or 16 pass by pass (the fourth, whose plan takes
    // both); 32 (the sixth) and 2 (the last).
    // At small scale each row sorts the builds (`Builds`) it is about at its smallest sizes: every
    // build where a plain (the split row) or a looping (the second) segment pass first runs, the
    // 4-byte builds (chains on pipelines of their own) with the default tiles; elsewhere 4-byte keys
    // alone, whose looping build also skips its bounds test in sizes of a power of two; sizes of
    // one default tile (no segment pass) are only checked to run as the default sorter's, which
    // the suite sorts at those sizes; the looping rows take 8 and 10 tiles of 2048 (16_384, 20_003)
    // and 20 with chunks of 4 (40_009) rather than up to 49; the split row's tiles of 64 stay below
    // 2^15. Every build at every size at full scale.
    use Builds::{All, Keys32, Narrow};
    let mut rng = rng("segments");
    let default = new_sorter(&SorterDesc::default());
    type Knobs = (Knob, Knob, Knob, Knob, (Knob, Knob));
    let rows: [(Knobs, &Work, &[usize]); 8] = [
        (
            (None, None, None, None, (None, None)),
            &[(2, All), (1000, All), (8193, Narrow), (65_536, Keys32)],
            &[2, 1000, 8193, 65_536, 100_003],
        ),
        ((None, None, None, Some(3), (None, None)), &[(16_384, All), (20_003, Keys32)], &[65_536, 100_003]),
        ((None, None, None, Some(3), (Some(16), None)), &[(40_009, Keys32)], &[100_003]),
        ((Some(256), None, None, Some(3), (None, Some(16))), &[(10_007, Keys32)], &[10_007]),
        (
            (Some(64), Some(3), None, None, (None, None)),
            &[(65, Keys32), (1000, All), (16_481, Keys32)],
            &[65, 1000, 40_033],
        ),
        (
            (Some(256), None, Some(3), Some(2), (Some(32), None)),
            &[(1000, Keys32), (4096, Keys32), (10_007, Keys32)],
            &[1000, 4096, 10_007],
        ),
        ((Some(16), Some(2), Some(2), None, (None, None)), &[(17, Keys32), (1000, Keys32)], &[17, 1000]),
        ((Some(128), None, Some(1), None, (Some(2), None)), &[(10_007, Keys32)], &[10_007]),
    ];
    for ((max_tile, max_groups, max_fused, merge_groups, (run, run_long)), small, full) in rows {
        let sizes: Vec<(usize, Builds)> =
            if full_scale() { full.iter().map(|&n| (n, All)).collect() } else { small.to_vec() };
        let desc = sorter_desc(|d| {
            d.tuning.max_tile = max_tile;
            d.hooks.max_workgroups_per_dispatch = max_groups;
            d.tuning.max_fused_substages = max_fused;
            d.tuning.merge_workgroups = merge_groups;
            d.tuning.segment_merges = Some(true);
            d.tuning.segment_run = run;
            d.tuning.segment_run_long = run_long;
        });
        let mut sorter = new_sorter(&desc);
        let mut split = false;
        for (n, builds) in sizes {
            let plan = hooks::plan(&sorter, n, false, KeyKind::U32, Order::Ascending).expect("a plan");
            let kinds: Vec<&str> = plan.passes.iter().skip(1).map(|p| p.kind.name()).collect();
            assert!(kinds.iter().all(|k| *k == "segment_merge"), "{desc:?} n={n}: {kinds:?}");
            split |= plan.passes.iter().any(|p| max_groups.is_some_and(|g| p.workgroups > g));
            if merge_groups.is_some_and(|g| n.div_ceil(plan.geometry.tile() as usize) > g as usize) {
                assert!(plan.passes.iter().skip(1).any(|p| p.push.loop_stride > 0), "{desc:?} n={n}: no pass loops");
            }
            if run_long.is_some() {
                // Both runs, each where it leaves the fewest passes.
                let mut carried: Vec<u32> = plan
                    .passes
                    .iter()
                    .skip(1)
                    .map(|p| Segment::decode(&p.push))
                    .filter(|s| !s.tail)
                    .map(|s| s.low)
                    .collect();
                carried.sort_unstable();
                carried.dedup();
                assert_eq!(carried, [3, 4], "{desc:?} n={n}");
            }
            if !full_scale() && plan.passes.len() == 1 && alike(&sorter, &default, n) {
                eprintln!("{desc:?} n={n}: one tile, as the default sorter's, which the suite sorts");
                continue;
            }
            let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
            check_builds(&mut sorter, builds, |_| input.clone(), &format!("{desc:?} n={n}"));
        }
        assert!(split || max_groups.is_none(), "{desc:?}: no pass split over dispatches");
    }
    assert_validation_clean();
}

#[test]
fn tiles_of_origins_keep_pairs_together_in_every_plan() {
    // Pairs of 4-byte keys whose tiles hold 16-bit origins (SorterDesc::tile_origins, taken here
    // always; on the H100 and H200 by default only where that larger tile gives segment passes of
    // one coset per workgroup): every kernel that fills or empties a tile, each putting the values
    // in place through shared memory. By default on lavapipe (no multiprocessor count): the tile
    // sort, local merges and global merges; looping tile sorts and local merges (merge
    // workgroups capped); small tiles with split dispatches; local merges with windows of two and
    // four tiles (tiles of 16, more than 256 of them); a tile sort whose loads make whole groups
    // of 16 (16 elements per invocation: load_sorted); segment passes, plain, looping over cosets
    // and on pipelines per shape. Sizes with a partial last tile put virtual elements among real
    // ones; many ties put equal keys with distinct values.
    let mut rng = rng("origins");
    if !context().device_info().shader_int16 {
        eprintln!("skipped: the device has no shaderInt16");
        return;
    }
    // At small scale: the default tiles of 2048 below 2^15 (a single tile of 1024 runs the same
    // kernels; chunks of 4 are left to the tiles of 16 and to the looping segments' 65_536), the
    // looping rows without segments at 8 and 10 tiles (16_384, 20_003), 40_000 tiles of 16 alone
    // (2500: windows of two and four), segments on pipelines per shape at 8193 alone.
    for (max_tile, local_wg, max_groups, merge_groups, segments, shaped, small, full) in [
        (None, None, None, None, None, None, &[4097usize, 20_003][..], &[2, 1000, 4097, 65_536, 100_003][..]),
        (None, None, None, Some(3), None, None, &[16_384, 20_003], &[65_536, 100_003]),
        (Some(256), None, Some(3), None, None, None, &[1000, 10_007], &[1000, 10_007]),
        (Some(16), None, None, None, None, None, &[40_000], &[40_000, 1 << 16]),
        (Some(256), Some(16), None, None, None, None, &[4096, 10_007], &[4096, 10_007]),
        (None, None, None, None, Some(true), None, &[8193, 20_003], &[8193, 65_536, 100_003]),
        (None, None, None, Some(3), Some(true), None, &[65_536], &[65_536, 100_003]),
        (None, None, None, None, Some(true), Some(true), &[8193], &[8193, 100_003]),
        (Some(512), None, None, Some(2), Some(true), None, &[10_007], &[10_007]),
    ] {
        let sizes = scaled(small, full);
        let desc = sorter_desc(|d| {
            d.tuning.max_tile = max_tile;
            d.tuning.local_workgroup_size = local_wg;
            d.hooks.max_workgroups_per_dispatch = max_groups;
            d.tuning.merge_workgroups = merge_groups;
            d.tuning.segment_merges = segments;
            d.tuning.shaped_segments = shaped;
            d.tuning.tile_origins = Some(true);
        });
        let mut sorter = Sorter::new(context(), &desc).unwrap_or_else(|e| panic!("sorter {desc:?}: {e}"));
        // The local merges' windows (log2 tiles) the row's plans take.
        let mut windows: Vec<u32> = Vec::new();
        for &n in sizes {
            assert!(sorter.tile_origins(n, KeyKind::U32).expect("a size in range"), "{desc:?} n={n}");
            assert!(!sorter.tile_origins(n, KeyKind::U64).expect("a size in range"), "{desc:?} n={n}");
            let plan = hooks::plan(&sorter, n, true, KeyKind::U32, Order::Ascending).expect("a plan");
            windows.extend(plan.passes.iter().filter(|p| p.kind.name() == "local_merge").map(|p| p.substages));
            let random: Vec<u64> = (0..n).map(|_| rng.random()).collect();
            let ties: Vec<u64> = (0..n).map(|_| rng.random_range(0..4u64)).collect();
            for kind in [KeyKind::U32, KeyKind::I32, KeyKind::F32] {
                for order in ORDERS {
                    check(&mut sorter, kind, order, true, &random, &format!("{desc:?} random"));
                    let tied: Vec<u64> = ties.iter().map(|&t| num(kind, t as i64)).collect();
                    check(&mut sorter, kind, order, true, &tied, &format!("{desc:?} ties"));
                }
            }
        }
        if max_tile == Some(16) {
            assert!(windows.contains(&1) && windows.contains(&2), "{desc:?}: windows {windows:?}");
        }
    }
    // Never where asked for none; by default not where the pairs' own tiles serve (1000 pairs
    // take one small tile), and at 2^20 pairs exactly where only tiles of 8192 cut them into one
    // tile per multiprocessor at most, on 48 KiB of shared memory (8192 pairs with values would
    // take 64 KiB): on 128 to 255 multiprocessors, such as the H100's 132. Lavapipe reports no
    // multiprocessors, so no segment tile needs origins there.
    let limits = context().device_info().limits;
    let at_2e20 = limits.max_compute_shared_memory_size == 48 * 1024 && (128..256).contains(&limits.multiprocessors);
    for (choice, n, expect) in [(Some(false), 1 << 20, false), (None, 1000, false), (None, 1 << 20, at_2e20)] {
        let sorter = Sorter::new(context(), &sorter_desc(|d| d.tuning.tile_origins = choice))
            .unwrap_or_else(|e| panic!("sorter: {e}"));
        assert_eq!(sorter.tile_origins(n, KeyKind::U32).expect("a size in range"), expect, "{choice:?} n={n}");
    }
    assert_validation_clean();
}

#[test]
fn shaped_segment_passes_sort_every_key_type_order_and_payload() {
    // Segment passes on a pipeline per shape (SorterDesc::shaped_segments): the shape and its
    // chunks as specialization constants. The default tiles (whole-tile chunks of up to five
    // substages, cross chunks); tiles of 2048 (the default tiles of 8193 and 65536 on lavapipe
    // too), whose 4-byte keys, and pairs up to 2^15, run the modules built for their chains of
    // chunks (build.rs SHAPED_CHAIN_BUILDS: local chunks of 3 up to 2^15, and for 4-byte keys in
    // segment tiles of 2048 above where the device reports its multiprocessors, else 4; 8-byte
    // keys, and pairs on chunks of 4, take the chains from specialization constants); the same
    // tiles with chunks of 4 below 2^15 (a recorder binding's shorter sorts) and at 19 levels
    // (270000: 132 tiles, with passes of one coset per workgroup, as the H100 runs them), and
    // with chunks of 3 at 16 and 19 levels (as 4-byte keys take them in tiles of 2048 above 2^15
    // on the H100, sorter::segment_chunk_for; lavapipe reports no multiprocessors, so only asked
    // for); tiles of 256 with three substages per chunk and a carried run of 32; tiles of 64 with
    // one (every chunk a single substage: the most chunks a shape has), and a dispatch cap that
    // splits the passes. Sizes of a power of two, where every coset is real, and others, where the
    // last ones hold virtual elements.
    // At small scale, where each shape's pipeline costs lavapipe a second or more to compile (most
    // where it takes its chain from specialization constants), each row sorts the builds it is
    // about: the rows of tiles of 2048 the modules built for their chains (4-byte keys, and pairs
    // on chunks of 3 up to 15 levels; 270_000 reaches the chains of 17 to 19 levels), the rows of
    // smaller tiles the chains from specialization constants (4-byte keys alone, and every build
    // at 257: five tiles, single-substage chunks and every pass split); every build and shape at
    // full scale.
    // The default tiles' row is left to the rows that sort its sizes through the same kernels and
    // passes (on lavapipe, tiles of 2048 with chunks of 4 above 2^15) wherever they do.
    use Builds::{All, Keys32, Narrow};
    type Knobs = (Knob, Knob, Knob, Knob, Knob, Knob);
    let rows: [(Knobs, &[usize], &Work); 6] = [
        ((None, None, None, None, None, None), &[8193, 65_536], &[(8193, Narrow), (65_536, Keys32)]),
        (
            (Some(2048), None, None, None, None, None),
            &[16_384, 30_000, 65_536],
            &[(8193, Narrow), (16_384, Narrow), (30_000, Narrow)],
        ),
        (
            (Some(2048), None, Some(4), Some(0), None, None),
            &[5000, 12_000, 20_000, 270_000],
            &[(5000, Keys32), (12_000, Keys32), (20_000, Keys32), (65_536, Keys32), (270_000, Keys32)],
        ),
        ((Some(2048), None, Some(3), Some(0), None, None), &[40_000, 270_000], &[(40_000, Keys32), (270_000, Keys32)]),
        ((Some(256), Some(3), None, None, None, Some(32)), &[1000, 16_384], &[(1000, Keys32)]),
        ((Some(64), Some(1), None, None, Some(3), None), &[65, 4093], &[(257, All)]),
    ];
    let mut rng = rng("shaped segments");
    let mut sorters: Vec<Sorter> = rows
        .iter()
        .map(|((max_tile, max_fused, chunk, merge_groups, max_groups, run), _, _)| {
            new_sorter(&sorter_desc(|d| {
                d.tuning.max_tile = *max_tile;
                d.tuning.max_fused_substages = *max_fused;
                d.tuning.local_chunk_substages = *chunk;
                d.tuning.merge_workgroups = *merge_groups;
                d.hooks.max_workgroups_per_dispatch = *max_groups;
                d.tuning.segment_merges = Some(true);
                d.tuning.segment_run = *run;
                d.tuning.shaped_segments = Some(true);
            }))
        })
        .collect();
    // What each row sorts.
    let work: Vec<Vec<(usize, Builds)>> = if full_scale() {
        rows.iter().map(|(_, sizes, _)| sizes.iter().map(|&n| (n, All)).collect()).collect()
    } else {
        // The first row's sizes where no other row sorts them alike.
        let mut first = Vec::new();
        for &(n, builds) in rows[0].2 {
            let other =
                (1..rows.len()).find(|&j| rows[j].2.contains(&(n, builds)) && alike(&sorters[0], &sorters[j], n));
            match other {
                Some(j) => eprintln!("row 0 n={n}: runs as row {j} does, which sorts it"),
                None => first.push((n, builds)),
            }
        }
        std::iter::once(first).chain(rows.iter().skip(1).map(|(_, _, small)| small.to_vec())).collect()
    };
    for (i, (sorter, work)) in sorters.iter_mut().zip(work).enumerate() {
        for (n, builds) in work {
            let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
            check_builds(sorter, builds, |_| input.clone(), &format!("row {i} {:?} n={n}", rows[i].0));
        }
    }
    assert_validation_clean();
}

#[test]
fn looping_tile_sorts_and_merges_never_outrun_a_cpu_drivers_loop_limit() {
    // One workgroup for 4096 tiles of 256: a workgroup of the tile sort or of a local merge
    // looping over all of them ran its inner loops past the 65535 iterations after which lavapipe
    // ends a loop, and left the later tiles unsorted (plan::CPU_LOOP_LIMIT). On a CPU device the
    // plan spreads the tiles over as many workgroups as keep each loop short; a GPU loops over
    // all of them in one.
    // Then 4096 tiles of 64 with 1024 invocations per workgroup: a workgroup wider than its tile,
    // whose loops cost about as much per tile as a narrower one's (lavapipe cut the tile sort's
    // loop at 1024 tiles per workgroup there while the bound allowed 1310).
    // At small scale 1024 tiles of 256 and 2048 of 64: a single workgroup would still loop well
    // past the limit (hundreds of iterations a tile of 256; lavapipe's cut came at 1024 tiles of
    // 64), so the plan must still spread them.
    let mut rng = rng("loop limit");
    let wide = sorter_desc(|d| {
        d.tuning.max_tile = Some(64);
        d.tuning.local_workgroup_size = Some(1024);
    });
    let cases = [
        (sorter_desc(|d| d.tuning.max_tile = Some(256)), scaled(1 << 18, 1 << 20), [false, true].as_slice()),
        (wide, scaled(1 << 17, 1 << 18), &[false]),
    ];
    let cpu = context().device_info().device_type == DeviceType::Cpu;
    for (desc, n, payloads) in cases {
        let desc = {
            let mut d = desc.clone();
            d.tuning.merge_workgroups = Some(1);
            d
        };
        let mut sorter = new_sorter(&desc);
        let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
        for &pairs in payloads {
            // The tile sort loops over tiles: on a CPU device on as many workgroups as keep each
            // loop short, on a GPU on the one asked for.
            let plan = hooks::plan(&sorter, n, pairs, KeyKind::U32, Order::Ascending).expect("a plan");
            let tile_sort = &plan.passes[0];
            assert!(tile_sort.push.loop_stride > 0, "{desc:?} pairs {pairs}: the tile sort does not loop");
            assert_eq!(tile_sort.workgroups > 1, cpu, "{desc:?} pairs {pairs}: {} workgroups", tile_sort.workgroups);
            check(&mut sorter, KeyKind::U32, Order::Ascending, pairs, &input, &format!("{desc:?}"));
        }
    }
    assert_validation_clean();
}

#[test]
fn buffers_grow_and_are_reused_across_calls() {
    let mut rng = rng("reuse");
    let mut sorter = sorter();
    // At small scale the buffers grow to sizes whose tiles (2048) the suite's other sorts take.
    for n in [10usize, scaled(40_000, 100_000), 17, scaled(100_000, 300_000), 5] {
        let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
        check(&mut sorter, KeyKind::U32, Order::Ascending, n % 2 == 0, &input, "reuse");
    }
    assert_validation_clean();
}

#[test]
fn large_sort_is_correct_every_time() {
    let log2 = env_u32("BITONIC_VK_TEST_LARGE_LOG2", scaled(16, 20)).max(14);
    let repeat = env_u32("BITONIC_VK_TEST_REPEAT", 3);
    let drop = std::env::var("BITONIC_VK_TEST_DROP_BARRIER").ok();
    let mut rng = rng("large");
    // Every other power of two up to the largest, so that passes both fit in one wave of
    // workgroups (where concurrent passes race hardest) and span many waves.
    let mut sizes: Vec<usize> = (14..=log2).rev().step_by(2).map(|k| 1usize << k).collect();
    sizes.push((1 << log2) - 3);
    let mut failures = Vec::new();
    let mut sorts = 0;
    for &n in &sizes {
        for pairs in [false, true] {
            // The shared sorter, unless a barrier is to be left out: a sorter of its own for that.
            let (mut own, mut shared);
            let sorter: &mut Sorter = match &drop {
                None => {
                    shared = sorter();
                    &mut shared
                }
                Some(which) => {
                    let mut desc = SorterDesc::default();
                    let plan = hooks::plan(&new_sorter(&desc), n, pairs, KeyKind::U32, Order::Ascending)
                        .unwrap_or_else(|e| panic!("plan: {e}"));
                    desc.hooks.drop_barrier_before_pass = match which.as_str() {
                        "last-flip" => plan.last_flip_pass(),
                        "after-last-flip" => plan.last_flip_pass().map(|p| p + 1),
                        index => index.parse().ok(),
                    };
                    eprintln!(
                        "n={n} pairs={pairs}: dropping the barrier before pass {:?} of {}; a GPU should now fail",
                        desc.hooks.drop_barrier_before_pass,
                        plan.passes.len()
                    );
                    own = new_sorter(&desc);
                    &mut own
                }
            };
            let mut failed = 0;
            for round in 0..repeat {
                let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
                sorts += 1;
                if let Err(message) =
                    verify(sorter, KeyKind::U32, Order::Ascending, pairs, &input, &format!("round {round}"))
                {
                    failed += 1;
                    failures.push(message);
                }
            }
            eprintln!("n={n} pairs={pairs}: {failed} of {repeat} sorts wrong");
        }
    }
    assert!(failures.is_empty(), "{} of {sorts} large sorts wrong:\n{}", failures.len(), failures.join("\n"));
    eprintln!("large: sizes {sizes:?}, {repeat} rounds of keys and pairs each, {sorts} sorts, all correct");
    assert_validation_clean();
}

#[test]
fn the_reference_catches_every_kind_of_wrong_result() {
    // The check every test's results go through (tests/common): a right result passes, and each
    // kind of wrong one fails it.
    let input = [3.0f32, -0.0, 1.0, 0.0, 1.0, f32::NAN];
    let reference = Reference::new(&input, Order::Ascending, f32::total_cmp);
    let keys = [-0.0f32, 0.0, 1.0, 1.0, 3.0, f32::NAN];
    let values = [1u32, 3, 2, 4, 0, 5];
    assert_eq!(reference.check(&keys, Some(&values)), Ok(()));
    assert_eq!(reference.check_stable(&keys, &values), Ok(()));
    let wrong_keys: [&[f32]; 4] = [
        &[0.0, -0.0, 1.0, 1.0, 3.0, f32::NAN],
        &[-0.0, 0.0, 1.0, 3.0, 1.0, f32::NAN],
        &[-0.0, 0.0, 1.0, 1.0, 3.0, -f32::NAN],
        &[-0.0, 0.0, 1.0, 1.0, 3.0],
    ];
    for keys in wrong_keys {
        assert!(reference.check(keys, None).is_err(), "{keys:?} passed");
    }
    let wrong_values: [&[u32]; 4] = [&[1, 3, 2, 2, 0, 5], &[1, 3, 2, 4, 0, 6], &[3, 1, 2, 4, 0, 5], &[1, 3, 2, 4, 0]];
    for values in wrong_values {
        assert!(reference.check(&keys, Some(values)).is_err(), "{values:?} passed");
    }
    // Equal keys out of input order: a right sort, not a stable one.
    let swapped = [1u32, 3, 4, 2, 0, 5];
    assert_eq!(reference.check(&keys, Some(&swapped)), Ok(()));
    assert!(reference.check_stable(&keys, &swapped).is_err());
    let descending = Reference::new(&input, Order::Descending, f32::total_cmp);
    assert!(descending.check(&keys, Some(&values)).is_err());
    let reversed: Vec<f32> = keys.iter().rev().copied().collect();
    assert_eq!(descending.check(&reversed, None), Ok(()));
}

#[test]
fn mismatched_lengths_are_an_error() {
    let mut sorter = sorter();
    let mut keys = vec![3u32, 1, 2];
    let mut values = vec![0u32; 2];
    match sorter.sort_pairs(&mut keys, &mut values, Order::Ascending) {
        Err(Error::LengthMismatch { keys: 3, values: 2 }) => {}
        other => panic!("expected LengthMismatch, got {other:?}"),
    }
    assert_eq!(keys, [3, 1, 2], "input left untouched");
}

#[test]
fn more_elements_than_a_buffer_can_hold_is_an_error_naming_the_limit() {
    let mut sorter = sorter();
    let max = sorter.max_elements();
    if max > 1 << 28 {
        eprintln!("skipped: this device takes {max} elements, too many to allocate here");
        return;
    }
    let mut keys = vec![0u32; max as usize + 1];
    match sorter.sort(&mut keys, Order::Ascending) {
        Err(e @ Error::TooLarge { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("maxStorageBufferRange") || message.contains("maxMemoryAllocationSize"),
                "{message}"
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn invalid_options_are_errors() {
    for desc in [
        sorter_desc(|d| d.tuning.max_tile = Some(3)),
        sorter_desc(|d| d.tuning.max_tile = Some(1)),
        sorter_desc(|d| d.hooks.max_workgroups_per_dispatch = Some(0)),
        sorter_desc(|d| d.tuning.max_fused_substages = Some(0)),
        sorter_desc(|d| d.tuning.max_fused_substages = Some(7)),
        sorter_desc(|d| d.tuning.local_chunk_substages = Some(0)),
        sorter_desc(|d| d.tuning.local_chunk_substages = Some(6)),
        sorter_desc(|d| d.tuning.segment_run = Some(1)),
        sorter_desc(|d| d.tuning.segment_run = Some(24)),
        sorter_desc(|d| d.tuning.segment_run_long = Some(24)),
        sorter_desc(|d| d.tuning.segment_run_long = Some(4)),
        sorter_desc(|d| {
            d.tuning.segment_run = Some(16);
            d.tuning.segment_run_long = Some(8);
        }),
    ] {
        match Sorter::new(context(), &desc) {
            Err(Error::InvalidOption { .. }) => {}
            other => panic!("{desc:?}: expected InvalidOption, got {other:?}"),
        }
    }
}

#[test]
fn per_pass_timestamps_cover_every_pass() {
    let mut rng = rng("per-pass timestamps");
    let desc = sorter_desc(|d| {
        d.pass_timestamps = true;
        d.tuning.max_tile = Some(256);
    });
    let mut sorter = Sorter::new(context(), &desc).unwrap_or_else(|e| panic!("sorter: {e}"));
    let mut keys: Vec<u32> = (0..5000).map(|_| rng.random()).collect();
    let stats = sorter.sort(&mut keys, Order::Ascending).unwrap_or_else(|e| panic!("sort: {e}"));
    assert!(keys.windows(2).all(|w| w[0] <= w[1]));
    if let Some(total) = stats.gpu_time {
        assert_eq!(stats.pass_times.len(), stats.passes);
        // Each pass's time is rounded to whole nanoseconds on its own.
        let sum: std::time::Duration = stats.pass_times.iter().sum();
        assert!(sum.abs_diff(total).as_nanos() <= stats.passes as u128, "{sum:?} vs {total:?}");
    }
    assert_validation_clean();
}

#[test]
fn calibration_measures_the_pass_model_and_leaves_the_sorter_usable() {
    let mut rng = rng("calibration");
    let mut sorter = sorter();
    let Some(c) = sorter.calibrate(1 << 16, 20, 2).unwrap_or_else(|e| panic!("calibrate: {e}")) else {
        eprintln!("skipped: no timestamps on this queue");
        return;
    };
    assert!(c.copy_bytes_per_second > 0.0 && c.copy_bytes_per_second.is_finite(), "{c:?}");
    assert!(c.dispatch_and_barrier > std::time::Duration::ZERO, "{c:?}");
    assert!(c.predict(10, 1e6) > c.predict(5, 1e6), "{c:?}");
    // A GPU's probes follow copies until a copy's time settles; a CPU device's follow none.
    if context().device_info().device_type == DeviceType::Cpu {
        assert_eq!(c.warm_up, std::time::Duration::ZERO, "{c:?}");
    } else {
        assert!(c.warm_up >= WarmUp::AT_LEAST, "{c:?}");
    }
    let input: Vec<u64> = (0..70_001).map(|_| rng.random()).collect();
    check(&mut sorter, KeyKind::U32, Order::Ascending, true, &input, "after calibration");
    assert_validation_clean();
}

#[test]
fn sorters_on_several_threads_share_one_context() {
    let ctx = context().clone();
    // At small scale each thread's sorts stay in the tiles of up to 2^15 elements, so that each of
    // its sorters compiles one set of pipelines per payload rather than two.
    let largest = scaled(30_000, 50_000);
    let seed: u64 = rand::random();
    eprintln!("threads: seed {seed}");
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let ctx = ctx.clone();
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ t);
                let mut sorter =
                    Sorter::new(&ctx, &SorterDesc::default()).unwrap_or_else(|e| panic!("thread {t}: sorter: {e}"));
                for round in 0..5 {
                    let n = rng.random_range(2..largest);
                    let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
                    check(&mut sorter, KeyKind::I32, Order::Descending, round % 2 == 0, &input, &format!("thread {t}"));
                }
            });
        }
    });
    assert_validation_clean();
}

#[test]
fn back_to_back_timed_sorts_leave_a_correct_result() {
    let mut rng = rng("time_repeated");
    let mut sorter = sorter();
    let mut from_transfer = Sorter::new(context(), &sorter_desc(|d| d.time_from_transfer = true)).expect("sorter");
    let large = scaled(20_001, 40_001);
    for (n, pairs, transfer) in [(5000usize, false, false), (large, true, false), (3, true, false), (large, true, true)]
    {
        let sorter = if transfer { &mut from_transfer } else { &mut *sorter };
        let input: Vec<u64> = (0..n).map(|_| rng.random()).collect();
        let reference = Reference::new(&input, Order::Descending, u64::cmp);
        // Back to back in one command buffer, then each sort a submission of its own.
        for separate in [false, true] {
            let (mut keys, mut values) = (input.clone(), (0..n as u32).collect::<Vec<_>>());
            let times = if separate {
                sorter.time_separately(&mut keys, pairs.then_some(&mut values[..]), Order::Descending, 3)
            } else {
                sorter.time_repeated(&mut keys, pairs.then_some(&mut values[..]), Order::Descending, 4)
            }
            .unwrap_or_else(|e| panic!("separate {separate}: {e}"));
            let reps = if separate { 3 } else { 4 };
            assert!(times.is_empty() || times.len() == reps, "{} times", times.len());
            if let Err(e) = reference.check(&keys, pairs.then_some(&values[..])) {
                panic!("n={n} pairs {pairs} separate {separate}: {e}");
            }
        }
    }
    // One sort per submission, pass by pass: each sort's host time is its own submission's (the
    // batched strategies share one batch's), and every pass of every sort is timed.
    let input: Vec<u64> = (0..5000).map(|_| rng.random()).collect();
    let mut keys = input.clone();
    match sorter.study(&mut keys, None, Order::Ascending, PassSync::SubmitPerSort, 3) {
        Err(Error::Unsupported { .. }) => eprintln!("skipped: no timestamps on this queue"),
        Err(e) => panic!("study: {e}"),
        Ok(study) => {
            assert_eq!((study.totals.len(), study.wall.len()), (3, 3));
            assert!(study.pass_times.iter().all(|p| p.len() == study.passes.len()), "{study:?}");
            assert!(study.wall.windows(2).any(|w| w[0] != w[1]), "one shared wall time: {:?}", study.wall);
            assert_sorted("one sort per submission", &input, Order::Ascending, u64::cmp, &keys, None);
        }
    }
    assert_validation_clean();
}

#[test]
fn stable_pairs_keep_equal_keys_in_input_order() {
    let mut rng = rng("stable");
    let mut sorter = sorter();
    fn run<K: bitonic_vk::StableKey + bytemuck::Pod>(
        sorter: &mut Sorter,
        input: &[K],
        order: Order,
        cmp: impl Fn(&K, &K) -> std::cmp::Ordering,
        what: &str,
    ) {
        let n = input.len();
        let mut keys = input.to_vec();
        let mut values: Vec<u32> = (0..n as u32).collect();
        sorter.sort_pairs_stable(&mut keys, &mut values, order).unwrap_or_else(|e| panic!("{what}: {e}"));
        // The reference: the standard library's stable sort.
        if let Err(e) = Reference::new(input, order, cmp).check_stable(&keys, &values) {
            panic!("{what} {order:?} n={n}: {e}");
        }
    }
    let sizes: &[usize] = scaled(&[0, 1, 2, 3, 100, 4097, 65_537], &[0, 1, 2, 3, 100, 4097, 65_537, 200_001]);
    for &n in sizes {
        for order in ORDERS {
            // Few distinct keys, so most keys have many equals.
            let u: Vec<u32> = (0..n).map(|_| rng.random_range(0..8)).collect();
            run(&mut sorter, &u, order, u32::cmp, "u32");
            let i: Vec<i32> = (0..n).map(|_| rng.random_range(-4..4)).collect();
            run(&mut sorter, &i, order, i32::cmp, "i32");
            let f: Vec<f32> = (0..n).map(|_| [-0.0f32, 0.0, 1.5, -2.0, f32::NAN][rng.random_range(0..5)]).collect();
            run(&mut sorter, &f, order, f32::total_cmp, "f32");
        }
    }
    let mut keys = vec![1u32; 3];
    let mut values = vec![0u32; 2];
    match sorter.sort_pairs_stable(&mut keys, &mut values, Order::Ascending) {
        Err(Error::LengthMismatch { keys: 3, values: 2 }) => {}
        other => panic!("expected LengthMismatch, got {other:?}"),
    }
    assert_validation_clean();
}
