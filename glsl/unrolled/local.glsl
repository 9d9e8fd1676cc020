// Shared-memory tile machinery of the local kernels (tile_sort, local_merge, segment_merge): one workgroup
// owns one tile of TILE consecutive elements (a windowed local_merge: two or four, one after the
// other), loads it into shared memory, runs the substages there in chunks of up to FUSED fused in
// registers (fused.glsl) with a workgroup barrier after each chunk, and stores the tile back.

#include "common.glsl"
#include "fused.glsl"
// Elements per invocation of one batch of tile loads or stores (see tile_batch).
const uint LOAD_SLOTS = 16u;

// TILE (a specialization constant): elements per tile, a power of two, sized on the host from
// maxComputeSharedMemorySize: TILE * 4 bytes per key (8 with KEY64; + 4 per value with PAIRS)
// must fit.

// With ORIGINS (the payload PairsOrigins: 4-byte keys with values) the tile holds each element's
// origin, its local index when the tile was loaded, as a 16-bit number in place of its value: 6
// bytes an element instead of 8, so that 8192 pairs fit in 48 KiB. Each invocation holds the
// values of the elements it loaded in registers (r_held) while the network moves keys and
// origins, and puts them in place through shared memory once the keys are out (gather_held).
#if defined(ORIGINS) && (!defined(PAIRS) || defined(KEY64) || defined(SMALL))
#error "ORIGINS is a build of 4-byte keys with values, without SMALL"
#endif

shared KEY s_keys[TILE];
#ifdef ORIGINS
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
shared uint16_t s_values[TILE];
#define TO_SHARED_VALUE(v) uint16_t(v)
#elif defined(PAIRS)
shared uint s_values[TILE];
#define TO_SHARED_VALUE(v) (v)
#endif
#define FROM_SHARED_VALUE(v) uint(v)

#ifdef ORIGINS
// The value of local element r * WG_SIZE + lid as the tile was loaded, held in registers through
// the network (TILE / WG_SIZE of them, at most LOAD_SLOTS: the host sizes the workgroup for it),
// and put in place through s_keys once the keys are out (gather_held).
uint r_held[LOAD_SLOTS];
void hold_values(uint base);
#endif

// Where element i of the tile lives in shared memory: XOR-swizzled within each row of 32 words,
// so that invocations reading groups of consecutive elements hit different banks.
uint swizzle(uint i) {
    return i ^ ((i >> 5) & 31u);
}

uint tile_base() {
    return (gl_WorkGroupID.x + pc.group_offset) * TILE;
}

// Whether this workgroup's tile holds any real element. With a host count every dispatched tile
// does; with a GPU-side count the tile sort (dispatched for n) and a looping workgroup's later
// tiles past the count return at once (the whole workgroup alike, so no barrier is skipped by part
// of it), and the later passes' indirect dispatches hold only workgroups whose first tile does.
bool tile_live(uint base) {
    return !COUNTED || base < N;
}

// Elements per invocation moved between the buffers and shared memory in one unrolled batch of a
// full tile: every load of a batch is issued before the first is waited on. A loop of one load
// and one shared-memory store per iteration keeps one load in flight per invocation, too few
// where one large workgroup fills a multiprocessor's registers.
uint tile_batch() {
    return clamp(TILE / WG_SIZE, 1u, LOAD_SLOTS);
}

// Elements at global index >= N are virtual +infinity keys: never loaded, never stored (a tile
// whose first element is virtual returns before loading: see tile_live), KEY_MAX in between.
void load_tile(uint base) {
    bool map = (pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u;
    uint live = min(N - base, TILE);
    uint first = batch_base() + base;
    uint lid = gl_LocalInvocationID.x;
    if (live == TILE) {
        uint batch = tile_batch();
        for (uint i0 = 0u; i0 < TILE; i0 += batch * WG_SIZE) {
            [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
                uint i = i0 + r * WG_SIZE + lid;
                if (r < batch && i < TILE) {
                    r_key[r] = keys[first + i];
#ifdef ORIGINS
                    r_held[r] = values[first + i];
#elif defined(PAIRS)
                    r_value[r] = values[first + i];
#endif
                }
            }
            [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
                uint i = i0 + r * WG_SIZE + lid;
                if (r < batch && i < TILE) {
                    s_keys[swizzle(i)] = map ? to_image(r_key[r]) : r_key[r];
#ifdef ORIGINS
                    s_values[swizzle(i)] = TO_SHARED_VALUE(i);
#elif defined(PAIRS)
                    s_values[swizzle(i)] = TO_SHARED_VALUE(r_value[r]);
#endif
                }
            }
        }
    } else {
        // The last tile of a sort whose n is not a multiple of TILE: its virtual elements are
        // KEY_MAX in shared memory, and the tile runs the full-tile code (the padding note in
        // fused.glsl says why that is exact).
#ifdef ORIGINS
        [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
            uint i = r * WG_SIZE + lid;
            if (i < TILE) {
                KEY k = KEY_MAX;
                r_held[r] = 0u;
                if (i < live) {
                    k = keys[first + i];
                    k = map ? to_image(k) : k;
                    r_held[r] = values[first + i];
                }
                s_keys[swizzle(i)] = k;
                s_values[swizzle(i)] = TO_SHARED_VALUE(i);
            }
        }
#else
        for (uint i = lid; i < TILE; i += WG_SIZE) {
            KEY k = KEY_MAX;
            if (i < live) {
                k = keys[first + i];
                k = map ? to_image(k) : k;
#ifdef PAIRS
                s_values[swizzle(i)] = TO_SHARED_VALUE(values[first + i]);
#endif
            }
            s_keys[swizzle(i)] = k;
        }
#endif
    }
    barrier();
}

// Loads ahead, for the looping local kernels (the tile sort and the local merge with
// pc.loop_stride > 0), whose element buffers are volatile (local_merge.comp says why).

// The next tile, TILE / WG_SIZE elements per invocation (at most LOAD_SLOTS: see AHEAD_FITS).
KEY r_ahead[LOAD_SLOTS];
#ifdef PAIRS
uint r_ahead_value[LOAD_SLOTS];
#endif

// Whether a whole tile fits in the ahead registers; where not, each tile is loaded as it comes.
const bool AHEAD_FITS = TILE <= LOAD_SLOTS * WG_SIZE;

// Issues the loads of the full tile at `base` into r_ahead (element r * WG_SIZE + lid in slot r).
void load_ahead(uint base) {
    uint first = batch_base() + base;
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + lid;
        if (i < TILE) {
            r_ahead[r] = keys[first + i];
#ifdef PAIRS
            r_ahead_value[r] = values[first + i];
#endif
        }
    }
}

// Puts the tile held in r_ahead into shared memory (as load_tile does with a full tile), mapped
// to order images with `map`.
void store_ahead(bool map) {
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + lid;
        if (i < TILE) {
            s_keys[swizzle(i)] = map ? to_image(r_ahead[r]) : r_ahead[r];
#ifdef ORIGINS
            s_values[swizzle(i)] = TO_SHARED_VALUE(i);
            r_held[r] = r_ahead_value[r];
#elif defined(PAIRS)
            s_values[swizzle(i)] = TO_SHARED_VALUE(r_ahead_value[r]);
#endif
        }
    }
    barrier();
}

// WINDOW (a specialization constant): tiles per window of a windowed local_merge, log2: 0 (no
// window: one tile per workgroup), 1 or 2.

// The four register slots of batch entry b of a window of four tiles: run_slots(2, flip) on
// slots 4b..4b+3, the substage of stride 2 TILE (or the flip) and then that of stride TILE, the
// mirrored pair of a flip in decreasing index order.
void window_quad_slots(uint b, bool flip) {
    uint o = 4u * b;
    exchange(o, o + 2u);
    exchange(o + 1u, o + 3u);
    exchange(o, o + 1u);
    if (flip) {
        exchange(o + 3u, o + 2u);
    } else {
        exchange(o + 2u, o + 3u);
    }
}

// Windows of four tiles (WINDOW = 2): the substages of strides 2 TILE and TILE on the window at
// `base`, the first the stage's flip with `flip` (a literal at both call sites): group j
// (0 <= j < TILE) holds the window's elements slot_index(j, s, TILE, 2, flip) of fused.glsl,
// slot 0 in the lowest tile (element j) and the others in the three tiles above. Slot 0 goes to
// the shared tile as the lowest tile's load_tile would leave it; the others go back to the
// buffers. Without the flip, every element of group j is at offset j of its tile, written here
// and later read and written by load_tile and store_tile from invocation j mod WG_SIZE, so
// program order covers them. With `flip` two of them sit at offset TILE-1-j, handled there by
// another invocation, so a buffer memory barrier (flip only: window_substage) orders them before
// the workgroup barrier. Virtual elements are KEY_MAX and never written. No key is mapped:
// windows are never a sort's first pass.
void window_quad(uint base, bool flip) {
    uint first = batch_base() + base;
    uint live = N - base;
    uint lid = gl_LocalInvocationID.x;
    // Groups per invocation per batch: 2 * LOAD_SLOTS register slots in all.
    const uint groups = LOAD_SLOTS / 2u;
    uint batch = min(tile_batch(), groups);
    for (uint j0 = 0u; j0 < TILE; j0 += batch * WG_SIZE) {
        // Every load of a batch before the first comparator.
        [[unroll]] for (uint b = 0u; b < groups; b++) {
            uint j = j0 + b * WG_SIZE + lid;
            if (b < batch && j < TILE) {
                [[unroll]] for (uint s = 0u; s < 4u; s++) {
                    uint i = slot_index(j, s, TILE, 2u, flip);
                    uint r = 4u * b + s;
                    r_key[r] = KEY_MAX;
                    if (i < live) {
                        r_key[r] = keys[first + i];
#ifdef PAIRS
                        r_value[r] = values[first + i];
#endif
                    }
                }
            }
        }
        [[unroll]] for (uint b = 0u; b < groups; b++) {
            uint j = j0 + b * WG_SIZE + lid;
            if (b < batch && j < TILE) {
                window_quad_slots(b, flip);
                uint r = 4u * b;
                s_keys[swizzle(j)] = r_key[r];
#ifdef ORIGINS
                // Its value goes back to element j, which this invocation read above.
                s_values[swizzle(j)] = TO_SHARED_VALUE(j);
                if (j < live) {
                    values[first + j] = r_value[r];
                }
#elif defined(PAIRS)
                s_values[swizzle(j)] = TO_SHARED_VALUE(r_value[r]);
#endif
                [[unroll]] for (uint s = 1u; s < 4u; s++) {
                    uint i = slot_index(j, s, TILE, 2u, flip);
                    if (i < live) {
                        keys[first + i] = r_key[r + s];
#ifdef PAIRS
                        values[first + i] = r_value[r + s];
#endif
                    }
                }
            }
        }
    }
}

// Windows of two tiles (WINDOW = 1): the substage of stride TILE on the window at `base`:
// lower element i against upper element i (with `flip`, the stage's flip: against upper
// element TILE-1-i). The smaller images go to the shared tile as the lower tile's load_tile would
// leave it; the larger go back to the upper tile in the buffers. Upper element j is written by
// invocation j mod WG_SIZE, the one that load_tile gives it to when it reads the upper tile back,
// so that read sees the write in program order. With `flip`, lower element i is read by
// invocation (TILE-1-i) mod WG_SIZE and later written by store_tile from i mod WG_SIZE: the
// buffer memory barrier before the workgroup barrier (flip only: window_substage) orders that
// read before that write. Real elements: the lower tile's first `live_low`, the upper's first
// `live_high`; virtual ones are KEY_MAX and never written. No key is mapped: windows are never a
// sort's first pass.
void window_pair(uint base, bool flip, uint live_low, uint live_high) {
    uint first = batch_base() + base;
    uint lid = gl_LocalInvocationID.x;
    uint batch = tile_batch();
    for (uint j0 = 0u; j0 < TILE; j0 += batch * WG_SIZE) {
        // Every load of a batch before the first store, as in load_tile; slots 0..15 hold the
        // upper elements, 16..31 their partners.
        [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
            uint j = j0 + r * WG_SIZE + lid;
            if (r < batch && j < TILE) {
                uint i = flip ? TILE - 1u - j : j;
                r_key[r] = KEY_MAX;
                r_key[r + LOAD_SLOTS] = KEY_MAX;
                if (j < live_high) {
                    r_key[r] = keys[first + TILE + j];
#ifdef PAIRS
                    r_value[r] = values[first + TILE + j];
#endif
                }
                if (i < live_low) {
                    r_key[r + LOAD_SLOTS] = keys[first + i];
#ifdef PAIRS
                    r_value[r + LOAD_SLOTS] = values[first + i];
#endif
                }
            }
        }
        [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
            uint j = j0 + r * WG_SIZE + lid;
            if (r < batch && j < TILE) {
                uint i = flip ? TILE - 1u - j : j;
                // Lower element in slot r + LOAD_SLOTS, upper in slot r.
                exchange(r + LOAD_SLOTS, r);
                s_keys[swizzle(i)] = r_key[r + LOAD_SLOTS];
#ifdef ORIGINS
                // Its value goes back to lower element i, which this invocation read above.
                s_values[swizzle(i)] = TO_SHARED_VALUE(i);
                if (i < live_low) {
                    values[first + i] = r_value[r + LOAD_SLOTS];
                }
#elif defined(PAIRS)
                s_values[swizzle(i)] = TO_SHARED_VALUE(r_value[r + LOAD_SLOTS]);
#endif
                if (j < live_high) {
                    keys[first + TILE + j] = r_key[r];
#ifdef PAIRS
                    values[first + TILE + j] = r_value[r];
#endif
                }
            }
        }
    }
}

// The window's substages (window_pair or window_quad), then the barrier before its tiles' merges.
void window_substage(uint base, bool flip) {
    if (WINDOW == 1u) {
        uint live = N - base;
#if !defined(PAIRS) && !defined(KEY64)
        // 4-byte keys alone: a full window with its bounds and flip as literals; a partial one
        // (the last of a sort) tests every bound. For pairs the same code was slower
        // (docs/LEVERS.md).
        if (live >= 2u * TILE && flip) {
            window_pair(base, true, TILE, TILE);
        } else if (live >= 2u * TILE) {
            window_pair(base, false, TILE, TILE);
        } else
#endif
        {
            window_pair(base, flip, min(live, TILE), live > TILE ? live - TILE : 0u);
        }
    } else if (flip) {
        window_quad(base, true);
    } else {
        window_quad(base, false);
    }
#ifdef ORIGINS
    // The lowest tile's values went back to the buffer, where hold_values reads them: element i
    // from invocation i mod WG_SIZE, which with a window of two and the flip is not the one that
    // wrote it. Every window takes it; what it costs those that do not need it is not measured.
    memoryBarrierBuffer();
#else
    if (flip) {
        // Only the flip needs it: a buffer memory barrier also waits for this invocation's stores
        // to the upper tiles, which costs every window that takes it.
        memoryBarrierBuffer();
    }
#endif
    barrier();
#ifdef ORIGINS
    hold_values(base);
#endif
}

#ifdef ORIGINS
// The real values of the tile at `base` from the buffers into r_held (a windowed local_merge,
// whose window substage leaves the lowest tile's values there).
void hold_values(uint base) {
    uint live = min(N - base, TILE);
    uint first = batch_base() + base;
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + gl_LocalInvocationID.x;
        r_held[r] = 0u;
        if (i < TILE && i < live) {
            r_held[r] = values[first + i];
        }
    }
}

// Once the network has run: local element r * WG_SIZE + lid's key into r_key[r] and its value
// into r_value[r]. Its value is the held value of its origin, which another invocation holds: the
// keys and origins come out of shared memory, a barrier, every held value goes into s_keys at its
// element, a barrier, and each origin's value comes out. s_keys then holds values: whatever loads
// the next tile waits for a barrier first (every caller has one).
void gather_held() {
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + lid;
        if (i < TILE) {
            r_key[r] = s_keys[swizzle(i)];
            r_value[r] = FROM_SHARED_VALUE(s_values[swizzle(i)]);
        }
    }
    barrier();
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + lid;
        if (i < TILE) {
            s_keys[swizzle(i)] = r_held[r];
        }
    }
    barrier();
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + lid;
        if (i < TILE) {
            r_value[r] = s_keys[swizzle(r_value[r])];
        }
    }
}

// With ORIGINS: the keys and the values, put in place by gather_held.
void store_tile(uint base) {
    bool map = stores_keys();
    uint live = min(N - base, TILE);
    uint first = batch_base() + base;
    gather_held();
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + gl_LocalInvocationID.x;
        if (i < TILE && i < live) {
            keys[first + i] = map ? from_image(r_key[r]) : r_key[r];
            values[first + i] = r_value[r];
        }
    }
}
#else
void store_tile(uint base) {
    bool map = stores_keys();
    uint live = min(N - base, TILE);
    uint first = batch_base() + base;
    uint lid = gl_LocalInvocationID.x;
    if (live == TILE) {
        uint batch = tile_batch();
        for (uint i0 = 0u; i0 < TILE; i0 += batch * WG_SIZE) {
            [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
                uint i = i0 + r * WG_SIZE + lid;
                if (r < batch && i < TILE) {
                    r_key[r] = s_keys[swizzle(i)];
#ifdef PAIRS
                    r_value[r] = FROM_SHARED_VALUE(s_values[swizzle(i)]);
#endif
                }
            }
            [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
                uint i = i0 + r * WG_SIZE + lid;
                if (r < batch && i < TILE) {
                    keys[first + i] = map ? from_image(r_key[r]) : r_key[r];
#ifdef PAIRS
                    values[first + i] = r_value[r];
#endif
                }
            }
        }
    } else {
        for (uint i = lid; i < live; i += WG_SIZE) {
            KEY k = s_keys[swizzle(i)];
            keys[first + i] = map ? from_image(k) : k;
#ifdef PAIRS
            values[first + i] = FROM_SHARED_VALUE(s_values[swizzle(i)]);
#endif
        }
    }
}
#endif

// The shared-memory address of slot s of a group (see slot_index in fused.glsl): `first` is the
// group's lowest element, `mirror` the element its upper half starts from (its slot 0 + top, or
// with `flip` the mirror of slot 0). The upper half runs down from a flip's mirror.
uint group_slot(uint first, uint mirror, uint s, uint low, uint m, bool flip) {
    uint half_slots = 1u << (m - 1u);
    uint offset = (s & (half_slots - 1u)) * low;
    uint i = (s & half_slots) == 0u ? first + offset : (flip ? mirror - offset : mirror + offset);
    return swizzle(i);
}

// Group g of a chunk, with `flip` and m literals at every call site: the group's first element
// and mirror are computed once and each slot is an offset from them, and the direction of every
// comparator is known when the kernel is compiled. No bound is tested: a partial tile is padded
// (load_tile).
void chunk_group(uint g, uint low, uint m, bool flip) {
    uint top = low << (m - 1u);
    uint first = ((g & ~(low - 1u)) << m) | (g & (low - 1u));
    uint mirror = flip ? first ^ (2u * top - 1u) : first + top;
    [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
        uint a = group_slot(first, mirror, s, low, m, flip);
        r_key[s] = s_keys[a];
#ifdef PAIRS
        r_value[s] = FROM_SHARED_VALUE(s_values[a]);
#endif
    }
    run_slots(m, flip);
    [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
        uint a = group_slot(first, mirror, s, low, m, flip);
        s_keys[a] = r_key[s];
#ifdef PAIRS
        s_values[a] = TO_SHARED_VALUE(r_value[s]);
#endif
    }
}

// m substages of smallest stride `low` on every group of the tile, then a barrier (in compute
// shaders barrier() also orders workgroup memory).
void chunk(uint low, uint m, bool flip) {
    for (uint g = gl_LocalInvocationID.x; g < (TILE >> m); g += WG_SIZE) {
        chunk_group(g, low, m, flip);
    }
    barrier();
}

// One chunk, with m and flip turned into literals for chunk_group.
void chunk_any(uint low, uint m, bool flip) {
    if (flip) {
        if (FUSED >= 5u && m == 5u) {
            chunk(low, 5u, true);
        } else if (FUSED >= 4u && m == 4u) {
            chunk(low, 4u, true);
        } else if (FUSED >= 3u && m == 3u) {
            chunk(low, 3u, true);
        } else if (FUSED >= 2u && m == 2u) {
            chunk(low, 2u, true);
        } else {
            chunk(low, 1u, true);
        }
    } else {
        if (FUSED >= 5u && m == 5u) {
            chunk(low, 5u, false);
        } else if (FUSED >= 4u && m == 4u) {
            chunk(low, 4u, false);
        } else if (FUSED >= 3u && m == 3u) {
            chunk(low, 3u, false);
        } else if (FUSED >= 2u && m == 2u) {
            chunk(low, 2u, false);
        } else {
            chunk(low, 1u, false);
        }
    }
}

// Stages 1..min(c, stages) on register slots o .. o + 2^c - 1 (o and c literals at every call
// site), ascending: the sort of 2^c elements in registers, or its first stages.
void sort_slots(uint o, uint c, uint stages) {
    uint size = 1u << c;
    [[unroll]] for (uint k = 1u; k <= c; k++) {
        if (k <= stages) {
            // The flip: slot s against its mirror in its block of 2^k.
            uint half_block = 1u << (k - 1u);
            [[unroll]] for (uint s = 0u; s < size; s++) {
                if ((s & half_block) == 0u) {
                    exchange(o + s, o + (s ^ (2u * half_block - 1u)));
                }
            }
            // Half-cleaners, strides 2^(k-2) .. 1.
            [[unroll]] for (uint j = k - 1u; j > 0u; j--) {
                uint stride = 1u << (j - 1u);
                [[unroll]] for (uint s = 0u; s < size; s++) {
                    if ((s & stride) == 0u) {
                        exchange(o + s, o + (s | stride));
                    }
                }
            }
        }
    }
}

// Stages 1..`stages` (at most c, a literal at every call site: 2 to 4) on the 2^c consecutive
// elements of group g, all in registers: every comparator of those stages stays inside an aligned
// group of 2^c, so they need one trip through shared memory and one barrier instead of one per
// stage.
void first_stages(uint g, uint c, uint stages) {
    uint size = 1u << c;
    uint first = g * size;
    [[unroll]] for (uint s = 0u; s < size; s++) {
        r_key[s] = s_keys[swizzle(first + s)];
#ifdef PAIRS
        r_value[s] = FROM_SHARED_VALUE(s_values[swizzle(first + s)]);
#endif
    }
    sort_slots(0u, c, stages);
    [[unroll]] for (uint s = 0u; s < size; s++) {
        s_keys[swizzle(first + s)] = r_key[s];
#ifdef PAIRS
        s_values[swizzle(first + s)] = TO_SHARED_VALUE(r_value[s]);
#endif
    }
}

// Stages the tile sort runs at once in registers: min(FUSED, 4), groups of 2^REGISTER_STAGES.
const uint REGISTER_STAGES = FUSED < 4u ? FUSED : 4u;

// The first stages of the tile sort, up to REGISTER_STAGES (c of first_stages, a literal on each
// branch), then one barrier. Returns how many ran.
uint register_stages(uint last) {
    const uint c = REGISTER_STAGES;
    uint stages = min(last, c);
    for (uint g = gl_LocalInvocationID.x; g < (TILE >> c); g += WG_SIZE) {
        if (c == 4u) {
            first_stages(g, 4u, stages);
        } else if (c == 3u) {
            first_stages(g, 3u, stages);
        } else {
            first_stages(g, 2u, stages);
        }
    }
    barrier();
    return stages;
}

// Chunks that span a stage boundary (the tile sort, with FUSED 2 to 5). A chunk may run the last
// `a` half-cleaners of stage k (strides 2^(a-1) .. 1), the flip of stage k+1 and its first `h`
// half-cleaners (strides 2^(k-1) .. 2^(k-h)), a + 1 + h = FUSED substages in all, on groups closed
// under all of them: a group is rep ^ span{2^0 .. 2^(a-1), M, 2^(k-h) .. 2^(k-1)} with M =
// 2^(k+1) - 1 the flip's mirror mask, and rep zero in bits 0..a-1, k-h..k. Slot bits 0..a-1 are
// the tail bits, slot bit a says whether M is applied, slot bits a+1..a+h the head bits. Since M
// sets every tail and head bit, an element's bit there is the slot's bit XOR the M bit: the
// lower element of a half-cleaner's pair is the slot with that bit equal to the M bit; the flip's
// lower element is the slot without M (its bit k is rep's, 0). One chunk and one barrier instead
// of the two a stage boundary otherwise costs: at tiles of 8192 and FUSED 5, 17 chunks after
// stage 4 instead of 20.
uint cross_element(uint rep, uint s, uint k, uint a, uint h) {
    uint i = rep | (s & ((1u << a) - 1u)) | (((s >> (a + 1u)) & ((1u << h) - 1u)) << (k - h));
    return ((s >> a) & 1u) != 0u ? i ^ ((2u << k) - 1u) : i;
}

// One half-cleaner substage of a cross chunk on the slot bit p (a literal at every call site).
void cross_half_cleaner(uint m, uint a, uint p) {
    [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
        if ((s & (1u << p)) == 0u) {
            if (((s >> a) & 1u) == 0u) {
                exchange(s, s | (1u << p));
            } else {
                exchange(s | (1u << p), s);
            }
        }
    }
}

// Group g of a cross chunk from stage k to k+1 (a and h literals at every call site).
void cross_group(uint g, uint k, uint a, uint h) {
    uint m = a + 1u + h;
    uint free_low = k - h - a;
    uint rep = ((g & ((1u << free_low) - 1u)) << a) | ((g >> free_low) << (k + 1u));
    [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
        uint e = swizzle(cross_element(rep, s, k, a, h));
        r_key[s] = s_keys[e];
#ifdef PAIRS
        r_value[s] = FROM_SHARED_VALUE(s_values[e]);
#endif
    }
    // Stage k's last half-cleaners, strides 2^(a-1) .. 1.
    [[unroll]] for (uint p = a; p > 0u; p--) {
        cross_half_cleaner(m, a, p - 1u);
    }
    // Stage k+1's flip: each slot without M against its mirror, the one with M.
    [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
        if ((s & (1u << a)) == 0u) {
            exchange(s, s | (1u << a));
        }
    }
    // Stage k+1's first half-cleaners, strides 2^(k-1) .. 2^(k-h).
    [[unroll]] for (uint q = h; q > 0u; q--) {
        cross_half_cleaner(m, a, a + q);
    }
    [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
        uint e = swizzle(cross_element(rep, s, k, a, h));
        s_keys[e] = r_key[s];
#ifdef PAIRS
        s_values[e] = TO_SHARED_VALUE(r_value[s]);
#endif
    }
}

void cross_chunk(uint k, uint a, uint h) {
    for (uint g = gl_LocalInvocationID.x; g < (TILE >> (a + 1u + h)); g += WG_SIZE) {
        cross_group(g, k, a, h);
    }
    barrier();
}

// A cross chunk of FUSED substages with a tail of `a`, a and h turned into literals.
void cross_chunk_any(uint k, uint a) {
    if (FUSED == 5u) {
        if (a == 4u) {
            cross_chunk(k, 4u, 0u);
        } else if (a == 3u) {
            cross_chunk(k, 3u, 1u);
        } else if (a == 2u) {
            cross_chunk(k, 2u, 2u);
        } else {
            cross_chunk(k, 1u, 3u);
        }
    } else if (FUSED == 4u) {
        if (a == 3u) {
            cross_chunk(k, 3u, 0u);
        } else if (a == 2u) {
            cross_chunk(k, 2u, 1u);
        } else {
            cross_chunk(k, 1u, 2u);
        }
    } else if (FUSED == 3u) {
        // The chain starts at stage 4 (after three register stages), where every crossing has a
        // tail of one.
        cross_chunk(k, 1u, 1u);
    } else {
        cross_chunk(k, 1u, 0u);
    }
}

// Stages `first` .. `last` of the tile sort (FUSED 2 to 5, `first` after the register stages) as
// one run of substages cut into chunks of FUSED (the last one shorter), a chunk crossing a stage
// boundary where it falls on one.
void chained_stages(uint first, uint last) {
    uint k = first;
    // Substages of stage k already run: 0 = none (the next is the flip), o >= 1: the next is the
    // half-cleaner of stride 2^(k-1-o).
    uint o = 0u;
    // Substages left: stage j has j of them.
    uint left = (first + last) * (last - first + 1u) / 2u;
    while (left > 0u) {
        uint m = min(FUSED, left);
        if (o + m <= k) {
            if (o == 0u) {
                chunk_any(1u << (k - m), m, true);
            } else {
                chunk_any(1u << (k - o - m), m, false);
            }
            o += m;
            if (o == k) {
                k++;
                o = 0u;
            }
        } else {
            uint a = k - o;
            cross_chunk_any(k, a);
            o = m - a;
            k++;
        }
        left -= m;
    }
}

// `count` consecutive substages of one stage, strides top .. top >> (count-1), the first the
// stage's flip when `flip`; in the fewest chunks of up to FUSED substages, balanced (13 substages
// run as 4+3+3+3 with FUSED 4, 5+4+4 with 5: a chunk of one substage would loop over twice the
// groups of one of two).
void substages(uint top, uint count, bool flip) {
    uint chunks = (count + FUSED - 1u) / FUSED;
    for (; chunks > 0u; chunks--) {
        uint m = (count + chunks - 1u) / chunks;
        uint low = top >> (m - 1u);
        chunk_any(low, m, flip);
        top = low >> 1;
        count -= m;
        flip = false;
    }
}
