//! [`Tuning`], every knob of the sort in one place, and every sizing rule: the tile, the
//! workgroups, the fusion, the local chunk, which plan a sort takes and how its passes loop. The
//! rules are pure functions of the device's limits and the sort's size, tested on the CPU; each
//! empirical threshold was measured on a GPU, and docs/LEVERS.md has the row behind it.

use crate::abi::{KernelFamily, KeyWidth, PassKind, Payload};
use crate::device::DeviceLimits;
use crate::error::{Error, Result};
use crate::segment::{segment_passes, SegmentRuns, SEGMENT_MIN_RUN_LOG2};

/// Every knob of the sort, each `None` for the default, which is where it measured fastest.
/// Start from `Tuning::default()` and set the fields you want; fields may be added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tuning {
    /// Caps the elements per tile of the local kernels (a power of two, at least 2). Smaller
    /// tiles mean more passes; tests use it to reach multi-tile paths at small sizes.
    pub max_tile: Option<u32>,
    /// Caps the substages fused in registers per global pass and per local chunk (1..=6; by
    /// default 6 for 4-byte keys alone, 5 otherwise). 1 runs one substage per global pass, as
    /// NVIDIA's CUDA sample does.
    pub max_fused_substages: Option<u32>,
    /// Invocations per workgroup of the local kernels (a power of two, capped by the device); by
    /// default a quarter of the tile, at most 512 for 4-byte keys and 1024 for 8-byte keys.
    pub local_workgroup_size: Option<u32>,
    /// Invocations per workgroup of `global_merge` (a power of two, capped by the device); by
    /// default 256.
    pub global_workgroup_size: Option<u32>,
    /// Substages per shared-memory chunk of the local kernels (1..=5) instead of the default: 3
    /// in small sorts, 5 for 4-byte keys alone in tiles of 8192 or more, else 4.
    pub local_chunk_substages: Option<u32>,
    /// The most workgroups of the tile sort, of a local merge without windows and of a segment
    /// pass: with more tiles, each workgroup loops over several, loading the next ahead. By
    /// default the device's multiprocessors where it reports them, else one tile per workgroup;
    /// `Some(0)`: one tile per workgroup always.
    pub merge_workgroups: Option<u32>,
    /// Plan every pass after the tile sort as a segment pass (a run of substages on cosets of a
    /// tile's size, about one pass per log2(tile) substages): `Some(true)` always, `Some(false)`
    /// never, by default where they paid (`segments_pay` in `src/tuning.rs`) on a device that reports its
    /// multiprocessors.
    pub segment_merges: Option<bool>,
    /// Elements of the low run a segment pass carries uncompared (a power of two, at least 2):
    /// every carrying pass takes it, or with `segment_run_long`, this is the short run.
    pub segment_run: Option<u32>,
    /// The long run (a power of two, at least `segment_run`): each carrying pass then takes it
    /// wherever that adds no pass to the sort.
    pub segment_run_long: Option<u32>,
    /// Segment passes of one coset per workgroup on a pipeline made for their shape: by default
    /// those whose chain of chunks has a module of its own; `Some(true)` every shape (the others
    /// on an unoptimised module); `Some(false)` none.
    pub shaped_segments: Option<bool>,
    /// Tiles of u32 pairs holding 16-bit origins in place of their values, twice as many pairs a
    /// tile: by default where only that tile gives a sort segment passes of one coset per
    /// workgroup; `Some(true)` always (needs `shaderInt16`); `Some(false)` never.
    pub tile_origins: Option<bool>,
    /// Which build of the local and global kernels a binding runs: by default the compact kernels
    /// on a CPU device and the unrolled ones on a GPU ([`Sizing::family`]). Tiles of origins have
    /// unrolled kernels alone.
    pub kernels: Option<KernelFamily>,
}

/// The most elements one sort can take: the shaders index with 32-bit integers and the last
/// stage's flip needs 2 * 2^30 to fit.
pub const MAX_ELEMENTS: u64 = 1 << 31;

/// The largest tile: beyond it each invocation loops over more comparators per substage and the
/// passes it saves flatten.
pub const MAX_TILE: u32 = 1 << 14;

/// The most shared memory the default tiles use: that of the largest device the sort has run on
/// (NVIDIA Hopper's 48 KiB). A larger device's bigger tiles are opt-in through `Tuning::max_tile`.
pub const PROVEN_SHARED_MEMORY: u32 = 48 << 10;

/// The most substages one invocation of a global pass fuses in registers (groups of 64).
pub const MAX_FUSED: u32 = 6;

/// The most substages per global pass of every build but 4-byte keys alone (64 keys and values
/// would not fit the registers), and of those in sorts of fewer than [`FUSED6_MIN_TILES`] tiles.
pub const MAX_FUSED_NARROW: u32 = 5;

/// Sorts of fewer tiles fuse at most 5 substages per global pass: 6 leaves too few invocations.
pub const FUSED6_MIN_TILES: u32 = 2048;

/// The most substages per shared-memory chunk of the local kernels (groups of 32).
pub const MAX_CHUNK: u32 = 5;

/// Sorts of at least this many tiles give a local merge windows of two tiles where that saves a
/// global pass: a window halves the workgroups, which pays only with about twice as many tiles as
/// multiprocessors.
pub const WINDOW_MIN_TILES: u32 = 256;

/// Sorts of at least this many tiles take windows of four tiles where that saves a pass and two
/// do not (a quarter of the workgroups).
pub const WINDOW4_MIN_TILES: u32 = 2048;

/// Invocations per workgroup of global_merge, before the device's limits.
pub const GLOBAL_WG: u32 = 256;

/// The shapes the passes are cut to: the tile, the global workgroup and the fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// log2 of the elements per tile of the local kernels.
    pub tile_log2: u32,
    /// Invocations per workgroup of `global_merge` (one group of 2^substages elements each).
    pub global_wg: u32,
    /// Most substages fused in registers per global pass, 1..=[`MAX_FUSED`].
    pub fused: u32,
}

impl Geometry {
    /// Elements per tile.
    pub fn tile(&self) -> u32 {
        1 << self.tile_log2
    }

    /// Checks that the kernels can be built and the planner can cut passes: tiles of 2 to
    /// [`MAX_TILE`], at least one invocation per global workgroup, 1 to [`MAX_FUSED`] substages.
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

/// The most substages a global pass of a sort of `tiles` tiles fuses, for a geometry's `fused`.
pub fn fused_for(tiles: u32, fused: u32) -> u32 {
    if tiles < FUSED6_MIN_TILES {
        fused.min(MAX_FUSED_NARROW)
    } else {
        fused
    }
}

/// Tiles per window (log2) of the local merge of a stage with `left` global substages, in a sort
/// of `tiles` tiles: 1 where handing the stride-T substage to the local merge saves a global pass,
/// else 2 where handing it the strides 2T and T does, else 0.
pub fn window_log2(tiles: u32, left: u32, fused: u32) -> u32 {
    if tiles >= WINDOW_MIN_TILES && (left - 1) % fused == 0 {
        1
    } else if tiles >= WINDOW4_MIN_TILES && left >= 2 && (left - 2) % fused == 0 {
        2
    } else {
        0
    }
}

/// Substages fused per global pass by default: 6 for 4-byte keys alone, else 5.
pub fn default_fused(payload: Payload, width: KeyWidth) -> u32 {
    if payload == Payload::Keys && width == KeyWidth::Bits32 {
        MAX_FUSED
    } else {
        MAX_FUSED_NARROW
    }
}

/// The bytes of one element in the buffers: the key's, and the u32 value's with pairs.
pub fn element_bytes(payload: Payload, width: KeyWidth) -> u32 {
    width.bytes() + if payload.has_values() { 4 } else { 0 }
}

/// The bytes of one element in a tile in shared memory: an origin takes 2 in place of a value.
pub fn tile_element_bytes(payload: Payload, width: KeyWidth) -> u32 {
    match (payload, width) {
        (Payload::PairsOrigins, KeyWidth::Bits32) => width.bytes() + 2,
        _ => element_bytes(payload, width),
    }
}

/// The largest local workgroup by default: 8-byte keys take more registers per invocation, so
/// 512 of them would fill a multiprocessor.
fn local_wg_max(width: KeyWidth) -> u32 {
    match width {
        KeyWidth::Bits32 => 512,
        KeyWidth::Bits64 => 1024,
    }
}

/// The default local workgroup is the tile over this.
const LOCAL_WG_DIVISOR: u32 = 4;

/// The largest local workgroup by default on a CPU device: lavapipe runs a workgroup's
/// invocations one SIMD group after another and switches between them at every barrier, so the
/// local kernels' time grows with their invocations, not their work (docs/LEVERS.md).
const CPU_LOCAL_WG: u32 = 32;

/// The most elements of a tile one invocation of an origins build holds the values of
/// (`LOAD_SLOTS` in glsl/unrolled/local.glsl).
const ORIGINS_SLOTS: u32 = 16;

fn prev_power_of_two(x: u32) -> u32 {
    if x == 0 {
        0
    } else {
        1 << (31 - x.leading_zeros())
    }
}

/// The geometry and local workgroup size for a payload and key width on a device (`cpu`: a CPU
/// implementation): the largest power-of-two tile whose elements fit `maxComputeSharedMemorySize`,
/// capped by [`MAX_TILE`] and `tuning.max_tile`; fails on a knob out of range or a device too
/// small for a tile of two.
pub fn geometry(
    limits: &DeviceLimits,
    payload: Payload,
    width: KeyWidth,
    tuning: &Tuning,
    cpu: bool,
) -> Result<(Geometry, u32)> {
    let invalid = |name, value: u32, reason| Err(Error::InvalidOption { name, value: value.to_string(), reason });
    let per_element = tile_element_bytes(payload, width);
    // A tile only a device with more shared memory than any the sort has run on would reach is
    // opt-in through `max_tile`: a default ships only after it has run.
    let shared = match tuning.max_tile {
        Some(_) => limits.max_compute_shared_memory_size,
        None => limits.max_compute_shared_memory_size.min(PROVEN_SHARED_MEMORY),
    };
    let mut tile = prev_power_of_two(shared / per_element).min(MAX_TILE);
    if let Some(cap) = tuning.max_tile {
        if cap < 2 || !cap.is_power_of_two() {
            return invalid("max_tile", cap, "must be a power of two of at least 2");
        }
        tile = tile.min(cap);
    }
    let fused = match tuning.max_fused_substages {
        Some(f) if !(1..=MAX_FUSED).contains(&f) => return invalid("max_fused", f, "must be 1 to 6"),
        Some(f) => f,
        None => default_fused(payload, width),
    };
    if let Some(chunk) = tuning.local_chunk_substages.filter(|c| !(1..=MAX_CHUNK).contains(c)) {
        return invalid("local_chunk", chunk, "must be 1 to 5");
    }
    let invocations =
        prev_power_of_two(limits.max_compute_work_group_invocations.min(limits.max_compute_work_group_size_x));
    if tile < 2 || invocations == 0 {
        return Err(Error::InvalidOption {
            name: "device limits",
            value: format!(
                "maxComputeSharedMemorySize {} / maxComputeWorkGroupInvocations {}",
                limits.max_compute_shared_memory_size, limits.max_compute_work_group_invocations
            ),
            reason: "too small for a tile of two elements",
        });
    }
    let local_wg = match tuning.local_workgroup_size {
        Some(wg) if wg == 0 || !wg.is_power_of_two() => {
            return invalid("local_workgroup_size", wg, "must be a power of two")
        }
        Some(wg) => wg.min(invocations),
        None => {
            let most = if cpu { CPU_LOCAL_WG } else { local_wg_max(width) };
            (tile / LOCAL_WG_DIVISOR).clamp(1, most).min(invocations)
        }
    };
    // Each invocation of an origins build holds the values of at most ORIGINS_SLOTS elements.
    let local_wg = if payload == Payload::PairsOrigins { local_wg.max(tile / ORIGINS_SLOTS) } else { local_wg };
    if payload == Payload::PairsOrigins && (local_wg > invocations || tile > 1 << 16) {
        return Err(Error::InvalidOption {
            name: "tile_origins",
            value: format!("tiles of {tile} on at most {invocations} invocations"),
            reason: "each invocation holds at most 16 values of a tile of at most 65536: take a smaller tile",
        });
    }
    let global_wg = match tuning.global_workgroup_size {
        Some(wg) if wg == 0 || !wg.is_power_of_two() => {
            return invalid("global_workgroup_size", wg, "must be a power of two")
        }
        Some(wg) => wg.min(invocations),
        None => GLOBAL_WG.min(invocations),
    };
    Ok((Geometry { tile_log2: tile.trailing_zeros(), global_wg, fused }, local_wg))
}

/// Sorts of up to this many elements are small: their local chunks take 3 substages, so that a
/// tile of 1024 or 2048 keeps more of its invocations busy, and their tiles of 2048 the SMALL
/// tile sort.
pub const SMALL_SORT: u32 = 1 << 15;

/// The local chunk of small sorts, and of 4-byte keys alone in segment tiles of 2048.
const SMALL_SORT_CHUNK: u32 = 3;

/// The segment tile in which 4-byte keys alone take [`SMALL_SORT_CHUNK`].
const NARROW_SEGMENT_TILE: u32 = 2048;

/// Substages per shared-memory chunk of the local kernels of a binding of `capacity` elements in
/// `geometry`'s tiles (`segment_tile`: the tile of its segment passes, if any): the knob where
/// set; else 3 in small sorts and for 4-byte keys alone in segment tiles of 2048; else up to 5
/// for 4-byte keys alone in tiles of 8192 or more, else 4; never more than the fusion.
pub fn local_chunk(
    payload: Payload,
    width: KeyWidth,
    geometry: &Geometry,
    capacity: u32,
    segment_tile: Option<u32>,
    tuning: &Tuning,
) -> u32 {
    if let Some(chunk) = tuning.local_chunk_substages {
        return chunk;
    }
    let keys = payload == Payload::Keys && width == KeyWidth::Bits32;
    if capacity <= SMALL_SORT || (keys && segment_tile == Some(NARROW_SEGMENT_TILE)) {
        return SMALL_SORT_CHUNK.min(tuning.max_fused_substages.unwrap_or(SMALL_SORT_CHUNK));
    }
    let wide = keys && geometry.tile() >= 8192;
    geometry.fused.min(if wide { MAX_CHUNK } else { 4 })
}

/// Sorts of fewer tiles of the largest size than this get smaller tiles.
const TILES_WANTED: u32 = 32;
/// The smallest tile chosen for a sort of more than [`SMALL_SORT_TILE`] elements.
const SMALLEST_SIZED_TILE: u32 = 2048;
/// The tile of every sort of at most this many elements: one tile size, so small sorts add one
/// set of pipelines rather than one per power of two.
const SMALL_SORT_TILE: u32 = 1024;

/// The tile cap for a sort of n elements outside segment plans: as large as shared memory allows
/// but small enough for [`TILES_WANTED`] tiles, down to 2048 ([`SMALL_SORT_TILE`] for small n).
pub fn tile_for(n: u32) -> u32 {
    let per_tile = (n / TILES_WANTED).max(1);
    let floor = if n <= SMALL_SORT_TILE { SMALL_SORT_TILE } else { SMALLEST_SIZED_TILE };
    (1u32 << (31 - per_tile.leading_zeros())).max(floor)
}

/// The smallest tile a segment plan takes.
pub const SEGMENT_MIN_TILE: u32 = 2048;

/// The tile a sort of `n` elements takes where it may run on segment passes: the smallest power
/// of two from [`SEGMENT_MIN_TILE`] up to `max_tile` that cuts n into 3 to `multiprocessors`
/// tiles, so that each segment pass has a workgroup on as many multiprocessors as it can; None
/// where no tile does.
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

/// The most bytes of a tile with which segments pay on few tiles.
const SEGMENT_SMALL_TILE_BYTES: u32 = 24 * 1024;
/// The bytes per element from which a sort takes segments beyond the multiprocessors even where
/// its segment passes do not loop (u64 pairs).
const SEGMENT_WIDE_ELEMENT_BYTES: u32 = 12;
/// The smallest tile with which a sort takes segments beyond the multiprocessors.
const SEGMENT_BEYOND_MIN_TILE: u32 = 4096;

/// Whether segment passes of elements of `element_bytes` loop over cosets where they have more
/// than the merge workgroups: not for u64 pairs, whose kernels already spill registers.
pub fn segments_loop(element_bytes: u32) -> bool {
    element_bytes < SEGMENT_WIDE_ELEMENT_BYTES
}

/// Whether a sort of n elements in `geometry`'s tiles takes segment passes by default, on a
/// device of `multiprocessors` with `merge_groups` looping workgroups (0: none): 3 to one tile
/// per multiprocessor with tiles of at most 24 KiB or more tiles than half the multiprocessors;
/// beyond, tiles of at least 4096 whose segment passes loop, or u64 pairs.
pub fn segments_pay(n: u32, geometry: &Geometry, element_bytes: u32, multiprocessors: u32, merge_groups: u32) -> bool {
    let tiles = n.div_ceil(geometry.tile());
    let small = geometry.tile().saturating_mul(element_bytes) <= SEGMENT_SMALL_TILE_BYTES;
    let within = tiles <= multiprocessors && (small || 2 * tiles > multiprocessors);
    let looping = merge_groups > 0 && segments_loop(element_bytes);
    let wide = element_bytes >= SEGMENT_WIDE_ELEMENT_BYTES;
    let beyond = tiles > multiprocessors && geometry.tile() >= SEGMENT_BEYOND_MIN_TILE && (looping || wide);
    tiles > 2 && multiprocessors > 0 && (within || beyond)
}

/// The carried low run (log2) that [`segment_runs`] gives some sorts: 16 elements, 64 bytes of
/// 4-byte keys.
pub const SEGMENT_LONG_RUN_LOG2: u32 = 4;

/// The carried low runs of a segment plan by default: in sorts of more tiles than
/// multiprocessors, runs of 16 for 4-byte keys where that takes no more passes than runs of 8,
/// and for 4-byte pairs whatever it takes; runs of 8 everywhere else.
pub fn segment_runs(
    n: u32,
    geometry: &Geometry,
    key_bytes: u32,
    element_bytes: u32,
    multiprocessors: u32,
) -> SegmentRuns {
    let tiles = n.div_ceil(geometry.tile());
    let short = SegmentRuns::fixed(SEGMENT_MIN_RUN_LOG2);
    if key_bytes != 4 || multiprocessors == 0 || tiles <= multiprocessors {
        return short;
    }
    let (t, long) = (geometry.tile_log2, SegmentRuns::fixed(SEGMENT_LONG_RUN_LOG2));
    let pairs = element_bytes > key_bytes;
    if pairs || segment_passes(n, t, long) <= segment_passes(n, t, short) {
        long
    } else {
        short
    }
}

/// The runs the knobs ask for, or None to leave them to [`segment_runs`]: `segment_run` alone is
/// every carrying pass's run; `segment_run_long` lets each take it or the short run (8 where
/// unset), the long one wherever that adds no pass.
pub fn requested_runs(tuning: &Tuning) -> Result<Option<SegmentRuns>> {
    let (run, long) = (tuning.segment_run, tuning.segment_run_long);
    for (name, value) in [("segment_run", run), ("segment_run_long", long)] {
        if let Some(v) = value.filter(|v| *v < 2 || !v.is_power_of_two()) {
            return Err(Error::InvalidOption {
                name,
                value: v.to_string(),
                reason: "must be a power of two, at least 2",
            });
        }
    }
    let short = run.map_or(SEGMENT_MIN_RUN_LOG2, u32::trailing_zeros);
    match long {
        None => Ok(run.map(|_| SegmentRuns::fixed(short))),
        Some(long) if long.trailing_zeros() < short => Err(Error::InvalidOption {
            name: "segment_run_long",
            value: long.to_string(),
            reason: "must be at least segment_run (8 where unset)",
        }),
        Some(long) => Ok(Some(SegmentRuns { short, long: long.trailing_zeros() })),
    }
}

/// The most iterations Mesa's llvmpipe (lavapipe, Mesa 22.3) runs one loop of an invocation for:
/// it ends the loop silently after 65535, counting every iteration since the invocation began.
pub const CPU_LOOP_LIMIT: u32 = 65535;

/// The most tiles (cosets) one workgroup of a looping pass of `kind` may take on a CPU device
/// (`cpu`) without a loop outrunning [`CPU_LOOP_LIMIT`]: each tile costs the kernel's loops at
/// most 2 x (elements per invocation + 1) x (substages + 4) iterations, with room over what
/// lavapipe's failures showed; a GPU has no bound.
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

/// The most elements per invocation the compact local kernels move between the buffers and the
/// tile at a time, unrolled: all loads of a batch are issued before the first is used.
const LOAD_BATCH: u32 = 16;

/// The same on a CPU device, where LLVM's compile time grows with the unrolled batch while the
/// sort's time does not (docs/LEVERS.md).
const CPU_LOAD_BATCH: u32 = 4;

/// Elements per invocation per batch of the compact local kernels' loads and stores (`BATCH`):
/// the tile's share of each of `wg` invocations, at most [`LOAD_BATCH`] ([`CPU_LOAD_BATCH`] on a
/// CPU device).
pub fn load_batch(tile: u32, wg: u32, cpu: bool) -> u32 {
    (tile / wg.max(1)).clamp(1, if cpu { CPU_LOAD_BATCH } else { LOAD_BATCH })
}

/// The largest tile the SMALL tile sort takes (`SMALL_MAX_LOG` in glsl/unrolled/tile_sort.comp,
/// which unrolls its stages up to it).
pub const SMALL_MAX_TILE: u32 = 2048;
/// Tiles above 1024 take the SMALL tile sort only in kernels whose local chunks run at most this
/// many substages (small sorts, and 4-byte keys alone in segment tiles of 2048).
const SMALL_WIDE_MAX_CHUNK: u32 = 3;
/// The largest tile whose SMALL build runs keys on two elements per invocation, as pairs' does.
pub const SMALL_TWO_SLOT_MAX_TILE: u32 = 1024;

/// Elements per invocation of the SMALL tile sort of `payload` on a tile of `tile` elements.
pub fn small_slots(payload: Payload, tile: u32) -> u32 {
    match payload {
        Payload::Keys if tile <= SMALL_TWO_SLOT_MAX_TILE => 2,
        Payload::Keys => 4,
        Payload::Pairs | Payload::PairsOrigins => 2,
    }
}

/// Whether the tile sort is the SMALL build (the tile in registers, subgroup shuffles between
/// the invocations of a subgroup): 4-byte keys, with or without values, on a device with subgroup
/// shuffles, in tiles of at most 1024, or of 2048 in kernels of chunks of at most 3, where the
/// local kernels take the default quarter of the tile and the SMALL workgroup fits the device.
pub fn small_tile_sort(
    limits: &DeviceLimits,
    payload: Payload,
    width: KeyWidth,
    tile: u32,
    local_wg: u32,
    chunk: u32,
) -> bool {
    let size = tile <= 1024 || (tile <= SMALL_MAX_TILE && chunk <= SMALL_WIDE_MAX_CHUNK);
    // A tile smaller than its slots would make an empty workgroup.
    let invocations = tile / small_slots(payload, tile);
    let fits = invocations >= 1
        && invocations <= limits.max_compute_work_group_invocations
        && invocations <= limits.max_compute_work_group_size_x;
    limits.subgroup_shuffle && width == KeyWidth::Bits32 && size && tile == 4 * local_wg && fits
}

/// The most keys of a width one buffer binding of this device holds (and the shaders index).
pub fn max_elements(limits: &DeviceLimits, width: KeyWidth) -> u64 {
    (u64::from(limits.max_storage_buffer_range).min(limits.max_memory_allocation_size) / u64::from(width.bytes()))
        .min(MAX_ELEMENTS)
}

/// `TooLarge`, naming the first limit n keys of `width` exceed, if any.
pub fn check_size(limits: &DeviceLimits, n: usize, width: KeyWidth) -> Result<()> {
    let bytes = n as u64 * u64::from(width.bytes());
    let exceeded = [
        ("maxStorageBufferRange", u64::from(limits.max_storage_buffer_range)),
        ("maxMemoryAllocationSize", limits.max_memory_allocation_size),
        ("the shaders' 32-bit indexing (2^31 elements)", MAX_ELEMENTS * u64::from(width.bytes())),
    ]
    .into_iter()
    .find(|(_, value)| bytes > *value);
    match exceeded {
        Some((limit, value)) => Err(Error::TooLarge { n, bytes, limit, value, max: max_elements(limits, width) }),
        None => Ok(()),
    }
}

/// How a recorder sizes its bindings: the knobs, validated, and what the device reports.
#[derive(Clone, Copy, Debug)]
pub struct Sizing {
    /// The knobs.
    pub tuning: Tuning,
    /// The device's limits.
    pub limits: DeviceLimits,
    /// The device is a CPU implementation, whose loops may stop early ([`CPU_LOOP_LIMIT`]).
    pub cpu: bool,
    /// The most workgroups of a looping pass (0: none loops).
    pub merge_groups: u32,
    /// u32 pairs take tiles of origins: never (`Some(false)`, also without `shaderInt16`),
    /// always (`Some(true)`), or where they give a segment tile (`None`).
    pub origins: Option<bool>,
    /// The carried runs the knobs ask for, else [`segment_runs`] picks them per sort.
    pub runs: Option<SegmentRuns>,
    /// `shaderInt16` is offered and enabled.
    pub int16: bool,
}

/// What [`Sizing::binding`] decides for a binding: its payload, tiles, chunk and workgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindingShape {
    /// The build of its kernels.
    pub family: KernelFamily,
    /// The payload its kernels are built for.
    pub payload: Payload,
    /// The geometry of its passes.
    pub geometry: Geometry,
    /// Invocations per workgroup of its local kernels.
    pub local_wg: u32,
    /// Substages per local chunk.
    pub chunk: u32,
}

impl Sizing {
    /// Validates the knobs for a device (`int16`: `shaderInt16` offered and enabled) and fixes the
    /// choices that do not depend on a binding.
    pub fn new(tuning: Tuning, limits: DeviceLimits, cpu: bool, int16: bool) -> Result<Sizing> {
        geometry(&limits, Payload::Pairs, KeyWidth::Bits64, &tuning, cpu)?;
        let runs = requested_runs(&tuning)?;
        let origins_fit = || geometry(&limits, Payload::PairsOrigins, KeyWidth::Bits32, &tuning, cpu);
        let origins = match (tuning.tile_origins, int16) {
            (Some(true), false) => {
                return Err(Error::InvalidOption {
                    name: "tile_origins",
                    value: "true".into(),
                    reason: "needs a device that offers the shaderInt16 feature, created with it enabled \
                             (RecorderDesc::shader_int16; a Context enables it wherever the device offers it)",
                })
            }
            (Some(true), true) => {
                origins_fit()?;
                Some(true)
            }
            (None, true) if origins_fit().is_ok() => None,
            _ => Some(false),
        };
        let merge_groups = tuning.merge_workgroups.unwrap_or(limits.multiprocessors);
        Ok(Sizing { tuning, limits, cpu, merge_groups, origins, runs, int16 })
    }

    /// This sizing with workgroups of at most `invocations` (at least one), as if the device's
    /// `maxComputeWorkGroupInvocations` were that: what `bind` plans again with where the driver
    /// refuses a pipeline of a larger workgroup. Fails where a knob then asks for what the kernels
    /// cannot do (tiles of origins need a workgroup of at least a sixteenth of the tile).
    pub fn with_workgroups_of_at_most(&self, invocations: u32) -> Result<Sizing> {
        let mut limits = self.limits;
        limits.max_compute_work_group_invocations = limits.max_compute_work_group_invocations.min(invocations.max(1));
        limits.max_compute_work_group_size_x = limits.max_compute_work_group_size_x.min(invocations.max(1));
        Sizing::new(self.tuning, limits, self.cpu, self.int16)
    }

    /// The segment tile of a binding of `capacity` where its sorts may take segment passes: from
    /// the largest tile the knobs and shared memory allow.
    fn segment_tile(&self, payload: Payload, width: KeyWidth, capacity: u32) -> Result<Option<u32>> {
        let multiprocessors = self.limits.multiprocessors;
        if self.tuning.segment_merges == Some(false) || multiprocessors == 0 {
            return Ok(None);
        }
        let (largest, _) = geometry(&self.limits, payload, width, &self.tuning, self.cpu)?;
        Ok(segment_tile(capacity, largest.tile(), multiprocessors))
    }

    /// The payload of a binding of pairs for `capacity` elements: origins where the knob says
    /// always, or by default where their larger tile is the only one that gives an unbatched
    /// binding a segment tile, for the capacity and for the power of two above it.
    pub fn pairs_payload(&self, width: KeyWidth, capacity: u32, batched: bool) -> Result<Payload> {
        if width != KeyWidth::Bits32 {
            return Ok(Payload::Pairs);
        }
        let origins = match self.origins {
            Some(choice) => choice,
            // The compact kernels have no build of origins.
            None if self.family(Payload::Pairs) == KernelFamily::Compact => false,
            None => match capacity.checked_next_power_of_two() {
                Some(network) if !batched => {
                    self.segment_tile(Payload::Pairs, width, capacity)?.is_none()
                        && self.segment_tile(Payload::PairsOrigins, width, capacity)?.is_some()
                        && self.segment_tile(Payload::PairsOrigins, width, network)?.is_some()
                }
                _ => false,
            },
        };
        Ok(if origins { Payload::PairsOrigins } else { Payload::Pairs })
    }

    /// The shape of a binding of `capacity` elements: tiles sized for the capacity (the segment
    /// tile where its sorts may take segment passes, else [`tile_for`]; a batched binding holds
    /// many arrays and takes [`tile_for`]), and the chunk for them.
    pub fn binding(&self, payload: Payload, width: KeyWidth, capacity: u32, batched: bool) -> Result<BindingShape> {
        let segment_tile = if batched { None } else { self.segment_tile(payload, width, capacity)? };
        let sized = segment_tile.unwrap_or_else(|| tile_for(capacity));
        let tuning = Tuning { max_tile: Some(self.tuning.max_tile.map_or(sized, |cap| cap.min(sized))), ..self.tuning };
        let (geometry, local_wg) = geometry(&self.limits, payload, width, &tuning, self.cpu)?;
        let chunk = local_chunk(payload, width, &geometry, capacity, segment_tile, &self.tuning);
        Ok(BindingShape { family: self.family(payload), payload, geometry, local_wg, chunk })
    }

    /// The one place that picks the build of a binding's kernels: the knob's, else the compact
    /// kernels on a CPU device and the unrolled ones on a GPU, where the compact ones still sort
    /// slower (docs/LEVERS.md); tiles of origins have unrolled kernels alone.
    pub fn family(&self, payload: Payload) -> KernelFamily {
        match (payload, self.tuning.kernels) {
            (Payload::PairsOrigins, _) => KernelFamily::Unrolled,
            (_, Some(family)) => family,
            (_, None) if self.cpu => KernelFamily::Compact,
            (_, None) => KernelFamily::Unrolled,
        }
    }

    /// Whether a sort of n elements takes a segment plan: as asked, or by [`segments_pay`].
    pub fn segmented(&self, n: u32, geometry: &Geometry, payload: Payload, width: KeyWidth) -> bool {
        self.tuning.segment_merges.unwrap_or_else(|| {
            segments_pay(n, geometry, element_bytes(payload, width), self.limits.multiprocessors, self.merge_groups)
        })
    }

    /// The carried runs of a segment plan of n elements: as asked, or by [`segment_runs`].
    pub fn runs(&self, n: u32, geometry: &Geometry, payload: Payload, width: KeyWidth) -> SegmentRuns {
        self.runs.unwrap_or_else(|| {
            segment_runs(n, geometry, width.bytes(), element_bytes(payload, width), self.limits.multiprocessors)
        })
    }

    /// The bound on the tiles one workgroup of a looping pass of `kind` takes: one coset where
    /// segment passes do not loop ([`segments_loop`]), else [`max_loop_tiles`].
    pub fn loop_tiles(&self, shape: &BindingShape, width: KeyWidth, kind: PassKind) -> u32 {
        if kind == PassKind::SegmentMerge && !segments_loop(element_bytes(shape.payload, width)) {
            1
        } else {
            max_loop_tiles(self.cpu, &shape.geometry, shape.local_wg, kind)
        }
    }
}

#[cfg(test)]
mod tests;
