// Shared-memory tile machinery of the two local kernels (tile_sort, local_merge): one workgroup
// owns one tile of TILE consecutive elements, loads it into shared memory, runs the substages
// there in chunks of up to FUSED fused in registers (fused.glsl) with a workgroup barrier after
// each chunk, and stores the tile back.

#include "common.glsl"
#include "fused.glsl"

// Elements per tile, a power of two (specialization constant 1), sized on the host from
// maxComputeSharedMemorySize: TILE * 4 bytes per key (8 with KEY64; + 4 per value with PAIRS)
// must fit.
layout(constant_id = 1) const uint TILE = 2048;

shared KEY s_keys[TILE];
#ifdef PAIRS
shared uint s_values[TILE];
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
// does; with a GPU-side count the tiles past it return at once (the whole workgroup alike, so no
// barrier is skipped by part of it).
bool tile_live(uint base) {
#ifdef GPU_COUNT
    return base < N;
#else
    return true;
#endif
}

// Elements at global index >= N are virtual +infinity keys: never loaded, never stored (a tile
// whose first element is virtual returns before loading: see tile_live).
void load_tile(uint base) {
    bool map = (pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u;
    uint live = min(N - base, TILE);
    uint batch = batch_base();
    for (uint i = gl_LocalInvocationID.x; i < live; i += WG_SIZE) {
        uint g = batch + base + i;
        KEY k = keys[g];
        s_keys[swizzle(i)] = map ? to_image(k) : k;
#ifdef PAIRS
        s_values[swizzle(i)] = values[g];
#endif
    }
    barrier();
}

void store_tile(uint base) {
    bool map = (pc.flags & FLAG_FROM_IMAGE_ON_STORE) != 0u;
    uint live = min(N - base, TILE);
    uint batch = batch_base();
    for (uint i = gl_LocalInvocationID.x; i < live; i += WG_SIZE) {
        uint g = batch + base + i;
        KEY k = s_keys[swizzle(i)];
        keys[g] = map ? from_image(k) : k;
#ifdef PAIRS
        values[g] = s_values[swizzle(i)];
#endif
    }
}

// Loads group g from shared memory, runs its m substages and stores it back. With `checked`
// false every element of the tile is real and no bound is tested.
void group(uint g, uint limit, uint low, uint m, bool flip, bool checked) {
    [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
        uint i = slot_index(g, s, low, m, flip);
        r_key[s] = KEY_NONE;
        if (!checked || i < limit) {
            r_key[s] = s_keys[swizzle(i)];
#ifdef PAIRS
            r_value[s] = s_values[swizzle(i)];
#endif
        }
    }
    run_slots(g, low, m, flip, limit, checked);
    [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
        uint i = slot_index(g, s, low, m, flip);
        if (!checked || i < limit) {
            s_keys[swizzle(i)] = r_key[s];
#ifdef PAIRS
            s_values[swizzle(i)] = r_value[s];
#endif
        }
    }
}

// m substages of smallest stride `low` on every group of the tile, then a barrier. m is a
// literal at every call site, so the slot loops unroll into registers. Full tiles (all but the
// last of a sort whose n is not a multiple of the tile) skip every bound test.
void chunk(uint limit, uint low, uint m, bool flip) {
    if (limit >= TILE) {
        for (uint g = gl_LocalInvocationID.x; g < (TILE >> m); g += WG_SIZE) {
            group(g, limit, low, m, flip, false);
        }
    } else {
        // Only groups whose lowest element is real: a group's lowest element grows with its index.
        uint span = low << m;
        uint live_groups = (limit / span) * low + min(limit % span, low);
        for (uint g = gl_LocalInvocationID.x; g < live_groups; g += WG_SIZE) {
            group(g, limit, low, m, flip, true);
        }
    }
    // In compute shaders barrier() also orders workgroup (shared) memory.
    barrier();
}

// Compare-exchange of slots a < b (element a below element b): the smaller image to a.
void exchange(uint a, uint b) {
    if (key_greater(r_key[a], r_key[b])) {
        KEY k = r_key[a];
        r_key[a] = r_key[b];
        r_key[b] = k;
#ifdef PAIRS
        uint v = r_value[a];
        r_value[a] = r_value[b];
        r_value[b] = v;
#endif
    }
}

// Stages 1..`stages` (at most 4: blocks of 2 to 16 elements) on the 16 consecutive elements of
// group g, all in registers: every comparator of those stages stays inside an aligned group of
// 16, so they need one trip through shared memory and one barrier instead of one per stage.
// Elements at local index `limit` or past are virtual; with `checked` false all are real.
void first_stages(uint g, uint limit, uint stages, bool checked) {
    uint first = g * 16u;
    [[unroll]] for (uint s = 0u; s < 16u; s++) {
        r_key[s] = KEY_NONE;
        if (!checked || first + s < limit) {
            r_key[s] = s_keys[swizzle(first + s)];
#ifdef PAIRS
            r_value[s] = s_values[swizzle(first + s)];
#endif
        }
    }
    [[unroll]] for (uint k = 1u; k <= 4u; k++) {
        if (k <= stages) {
            // The flip: slot s against its mirror in its block of 2^k.
            uint half_block = 1u << (k - 1u);
            [[unroll]] for (uint s = 0u; s < 16u; s++) {
                uint t = s ^ (2u * half_block - 1u);
                if ((s & half_block) == 0u && (!checked || first + t < limit)) {
                    exchange(s, t);
                }
            }
            // Half-cleaners, strides 2^(k-2) .. 1.
            [[unroll]] for (uint j = k - 1u; j > 0u; j--) {
                uint stride = 1u << (j - 1u);
                [[unroll]] for (uint s = 0u; s < 16u; s++) {
                    if ((s & stride) == 0u && (!checked || first + (s | stride) < limit)) {
                        exchange(s, s | stride);
                    }
                }
            }
        }
    }
    [[unroll]] for (uint s = 0u; s < 16u; s++) {
        if (!checked || first + s < limit) {
            s_keys[swizzle(first + s)] = r_key[s];
#ifdef PAIRS
            s_values[swizzle(first + s)] = r_value[s];
#endif
        }
    }
}

// `count` consecutive substages of one stage, strides top .. top >> (count-1), the first the
// stage's flip when `flip`; in the fewest chunks of up to FUSED substages, balanced (13 substages
// run as 4+3+3+3: a chunk of one substage would loop over twice the groups of one of two).
// Local indices at or past `limit` are virtual.
void substages(uint limit, uint top, uint count, bool flip) {
    uint chunks = (count + FUSED - 1u) / FUSED;
    for (; chunks > 0u; chunks--) {
        uint m = (count + chunks - 1u) / chunks;
        uint low = top >> (m - 1u);
        if (m == 4u) {
            chunk(limit, low, 4u, flip);
        } else if (m == 3u) {
            chunk(limit, low, 3u, flip);
        } else if (m == 2u) {
            chunk(limit, low, 2u, flip);
        } else {
            chunk(limit, low, 1u, flip);
        }
        top = low >> 1;
        count -= m;
        flip = false;
    }
}
