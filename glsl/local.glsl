// Shared-memory tile machinery of the two local kernels (tile_sort, local_merge): one workgroup
// owns one tile of TILE consecutive elements, loads it into shared memory, runs comparators there
// with a workgroup barrier after each substage, and stores it back.

#include "common.glsl"

// Elements per tile, a power of two (specialization constant 1), sized on the host from
// maxComputeSharedMemorySize: TILE * 4 bytes per key (+ 4 per value with PAIRS) must fit.
layout(constant_id = 1) const uint TILE = 2048;

shared uint s_keys[TILE];
#ifdef PAIRS
shared uint s_values[TILE];
#endif

uint tile_base() {
    return (gl_WorkGroupID.x + pc.group_offset) * TILE;
}

// Elements at global index >= n are virtual +infinity keys: never loaded, never stored.
void load_tile(uint base) {
    bool map = (pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u;
    for (uint i = gl_LocalInvocationID.x; i < TILE; i += WG_SIZE) {
        uint g = base + i;
        if (g < pc.n) {
            uint k = keys[g];
            s_keys[i] = map ? to_image(k) : k;
#ifdef PAIRS
            s_values[i] = values[g];
#endif
        }
    }
    barrier();
}

void store_tile(uint base) {
    bool map = (pc.flags & FLAG_FROM_IMAGE_ON_STORE) != 0u;
    for (uint i = gl_LocalInvocationID.x; i < TILE; i += WG_SIZE) {
        uint g = base + i;
        if (g < pc.n) {
            uint k = s_keys[i];
            keys[g] = map ? from_image(k) : k;
#ifdef PAIRS
            values[g] = s_values[i];
#endif
        }
    }
}

// One substage over the tile: comparators `inc` apart; with `flip`, the lower element of each is
// compared with its mirror in its block of 2*inc instead. A comparator whose upper element is a
// virtual +infinity key is a no-op, which is exactly what comparing with +infinity would do.
void substage(uint base, uint inc, bool flip) {
    uint limit = pc.n - base; // local indices below this are real elements
    for (uint c = gl_LocalInvocationID.x; c < TILE / 2u; c += WG_SIZE) {
        uint lo = low_index(c, inc);
        uint hi = flip ? lo ^ (2u * inc - 1u) : lo + inc;
        if (hi < limit) {
            uint a = s_keys[lo];
            uint b = s_keys[hi];
            if (a > b) {
                s_keys[lo] = b;
                s_keys[hi] = a;
#ifdef PAIRS
                uint v = s_values[lo];
                s_values[lo] = s_values[hi];
                s_values[hi] = v;
#endif
            }
        }
    }
    // In compute shaders barrier() also orders workgroup (shared) memory.
    barrier();
}
