#version 450
// tile_sort: the first pass of every sort. Each workgroup sorts a tile of TILE consecutive
// elements in shared memory, ascending by order image: stages 1..RS in registers with one trip
// through shared memory (straight from the loads where a full tile's loads make whole groups),
// then stages RS+1..shape as one chain of chunks (chunks.glsl), and stores the tile back.
// Push constants used: n, shape (log2 of the largest block it sorts, 0..log2 TILE),
// group_offset, flags; looping: loop_stride.
// Defines read: KEY64, PAIRS, CHUNK, SLOTS; LOOPING (Form::Looping, a pass with fewer workgroups
// than tiles): workgroup w sorts tiles w, w + loop_stride, ..., loading its next tile into
// registers while it sorts this one, on volatile buffers (local_merge.comp says why). The plain
// form keeps plain buffers, which its one tile a workgroup runs faster on.
#extension GL_GOOGLE_include_directive : require
#ifdef LOOPING
#define ELEMENT_QUALIFIER volatile
const bool LOOPING_FORM = true;
#else
const bool LOOPING_FORM = false;
#endif
#include "keys.glsl"
#include "network.glsl"
#include "tile.glsl"
#include "chunks.glsl"

uint local_element(uint i) {
    return i;
}

// The stages this tile sort runs: pc.shape, or with a GPU-side count no more than the count's
// ceil(log2): a larger block's upper half is virtual, and its flip and half-cleaners move nothing.
uint tile_shape() {
    return COUNTED ? min(pc.shape, ceil_log2(N)) : pc.shape;
}

// Register slot r of batch i0 holds the element of shared position group_position(i0, r): its
// group of RSIZE consecutive positions, one per invocation and batch.
uint group_position(uint i0, uint r) {
    return ((i0 / RSIZE + gl_LocalInvocationID.x + (r / RSIZE) * WG_SIZE) * RSIZE + r % RSIZE);
}

// Stages 1..stages (at most RS) of the tile at `base`, left in shared memory, then a barrier.
// `held`: slots 0..LOADS-1 hold the tile already (a looping kernel's load ahead). Where a batch
// makes whole groups, a full tile's elements are sorted as they are loaded (any elements may make
// a group of an unsorted tile); a partial tile goes to shared memory first, padded, and its groups
// are consecutive positions, so that its virtual elements stay above the real ones.
void register_stages(uint base, uint stages, bool held) {
    uint lid_element = base + gl_LocalInvocationID.x;
    bool direct = LOADS >= RSIZE && N - base >= TILE;
    if (!direct && held) {
        batch_to_shared(0u);
        barrier();
    } else if (!direct) {
        load_tile(lid_element);
    }
    if (LOADS >= RSIZE) {
        [[dont_unroll]] for (uint i0 = 0u; i0 < TILE; i0 += LOADS * WG_SIZE) {
            if (!direct) {
                [[unroll]] for (uint r = 0u; r < LOADS; r++) {
                    r_key[r] = s_keys[swizzle(group_position(i0, r))];
                    VALUES(r_value[r] = s_values[swizzle(group_position(i0, r))];)
                }
            } else if (!held) {
                load_batch(lid_element, i0);
            }
            sort_slots(LOADS, stages);
            [[unroll]] for (uint r = 0u; r < LOADS; r++) {
                s_keys[swizzle(group_position(i0, r))] = r_key[r];
                VALUES(s_values[swizzle(group_position(i0, r))] = r_value[r];)
            }
        }
    } else {
        [[dont_unroll]] for (uint g = gl_LocalInvocationID.x; g < (TILE >> RS); g += WG_SIZE) {
            [[unroll]] for (uint s = 0u; s < RSIZE; s++) {
                r_key[s] = s_keys[swizzle(g * RSIZE + s)];
                VALUES(r_value[s] = s_values[swizzle(g * RSIZE + s)];)
            }
            sort_slots(RSIZE, stages);
            [[unroll]] for (uint s = 0u; s < RSIZE; s++) {
                s_keys[swizzle(g * RSIZE + s)] = r_key[s];
                VALUES(s_values[swizzle(g * RSIZE + s)] = r_value[s];)
            }
        }
    }
    barrier();
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint tiles = (N + TILE - 1u) / TILE;
    uint full = N / TILE;
    // The loop's stride: one tile a workgroup in the plain form (max() keeps a wrong push
    // constant from hanging the looping one).
    uint stride = LOOPING_FORM ? max(pc.loop_stride, 1u) : tiles;
    uint t = gl_WorkGroupID.x + pc.group_offset;
    set_slot_elements();
    bool ahead = LOOPING_FORM && AHEAD_FITS;
    if (ahead && t < full) {
        load_ahead(t * TILE + lid);
    }
    // A tile whose first element is virtual holds no real one: with a GPU-side count the tile
    // sort is dispatched for n and such workgroups return (the whole workgroup alike).
    [[dont_unroll]] for (; t < tiles; t += stride) {
        uint base = t * TILE;
        bool held = ahead && t < full;
        if (held) {
            [[unroll]] for (uint r = 0u; r < LOADS; r++) {
                r_key[r] = r_ahead[r];
                VALUES(r_value[r] = r_ahead_value[r];)
            }
        }
        uint shape = tile_shape();
        uint stages = min(shape, RS);
        register_stages(base, stages, held);
        if (ahead && t + stride < full) {
            load_ahead((t + stride) * TILE + lid);
        }
        if (stages < shape) {
            chained_stages(stages + 1u, shape);
        }
        store_tile(base + lid);
        if (LOOPING_FORM) {
            // Every invocation has read this tile out of shared memory before the next goes in.
            barrier();
        }
    }
}
