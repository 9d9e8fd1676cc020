#version 450
// local_merge: the last pass of every stage whose blocks are larger than a tile, after the global
// passes have run its strides of TILE << WINDOW and more. Each workgroup runs the half-cleaners
// of strides TILE/2 .. 1 on its tile in shared memory (chunks.glsl), ascending by order image.
//   - WINDOW = 1 or 2 (a specialization constant; the plan gives such a pass inc = TILE <<
//     (WINDOW-1)): each workgroup takes a window of 2^WINDOW tiles, first runs the WINDOW
//     substages of strides inc .. TILE between them in registers (the first the stage's flip when
//     dir is 1: window_substage), then each tile's strides in turn, the lowest first.
//   - WINDOW = 0: tile w, or with loop_stride > 0 (fewer workgroups than tiles) tiles w,
//     w + loop_stride, ..., each loaded into registers while the one before is merged.
// Push constants used: n, loop_stride (WINDOW 0), inc and dir (WINDOW > 0), group_offset, flags.
// Defines read: KEY64, PAIRS, CHUNK, SLOTS.
//
// The element buffers are volatile, for the loads ahead: the driver's compiler issues plain loads
// next to their first use, here the stores into shared memory after this tile's chunks, so
// nothing would overlap; volatile loads stay where they are written. The whole binding is
// volatile rather than a second declaration for these loads alone: synchronization validation
// takes a variable never stored to as a read of the whole binding by every dispatch, and the
// dispatches of one split pass (disjoint elements, no barrier between them) would show as hazards.
#extension GL_GOOGLE_include_directive : require
#define ELEMENT_QUALIFIER volatile
#include "keys.glsl"
#include "network.glsl"
#include "tile.glsl"
#include "chunks.glsl"

uint local_element(uint i) {
    return i;
}

// Windows: slots per window group, and groups per invocation per batch (their slots fill the
// registers a batch of loads takes twice over).
const uint WINDOW_SLOTS = 1u << WINDOW;
const uint WINDOW_GROUPS = WINDOW == 1u ? LOADS : (LOADS > 1u ? LOADS / 2u : 1u);

// Slot s of window group j (j < TILE), relative to the window: offset j of tile s, except that
// with `flip` the upper half of the slots holds the mirrors, in the window, of the lower half.
uint window_element(uint j, uint s, bool flip) {
    uint half_slots = WINDOW_SLOTS >> 1u;
    uint i = j + (s & (half_slots - 1u)) * TILE;
    uint top = TILE << (WINDOW - 1u);
    if ((s & half_slots) != 0u) {
        i = flip ? i ^ (2u * top - 1u) : i + top;
    }
    return i;
}

// The window's substages on the group in slots o .. o + WINDOW_SLOTS - 1: the stride-2 TILE one
// (or the flip) and then the stride-TILE one, the mirrored pair of a flip in decreasing order.
void window_network(uint o, bool flip) {
    if (WINDOW == 1u) {
        exchange(o, o + 1u);
        return;
    }
    exchange(o, o + 2u);
    exchange(o + 1u, o + 3u);
    exchange(o, o + 1u);
    if (flip) {
        exchange(o + 3u, o + 2u);
    } else {
        exchange(o + 2u, o + 3u);
    }
}

// The window's first WINDOW substages between its tiles, in registers, as its groups are
// loaded: slot 0 goes into the shared tile as load_tile would leave the lowest tile, the others
// back to the buffers, then a barrier. Without the flip, every element of group j lies at offset
// j of its tile, written here and later read and written by load_tile and store_tile from the
// invocation of j mod WG_SIZE, so program order covers them. With the flip two of them lie at
// offset TILE-1-j, which another invocation takes: a buffer memory barrier (flip only: it also
// waits for this invocation's stores, which costs every window that takes it) orders them before
// the workgroup barrier. Windows are never a sort's first pass: no key is mapped.
void window_substage(uint base, bool flip) {
    uint first = batch_base() + base;
    uint lid = gl_LocalInvocationID.x;
    [[dont_unroll]] for (uint j0 = 0u; j0 < TILE; j0 += WINDOW_GROUPS * WG_SIZE) {
        // Every load of a batch before the first comparator.
        [[unroll]] for (uint r = 0u; r < WINDOW_GROUPS * WINDOW_SLOTS; r++) {
            uint i = window_element(j0 + (r >> WINDOW) * WG_SIZE + lid, r & (WINDOW_SLOTS - 1u), flip);
            r_key[r] = KEY_MAX;
            VALUES(r_value[r] = 0u;)
            if (base + i < N) {
                r_key[r] = keys[first + i];
                VALUES(r_value[r] = values[first + i];)
            }
        }
        [[unroll]] for (uint b = 0u; b < WINDOW_GROUPS; b++) {
            window_network(b * WINDOW_SLOTS, flip);
        }
        [[unroll]] for (uint r = 0u; r < WINDOW_GROUPS * WINDOW_SLOTS; r++) {
            uint j = j0 + (r >> WINDOW) * WG_SIZE + lid;
            uint i = window_element(j, r & (WINDOW_SLOTS - 1u), flip);
            if ((r & (WINDOW_SLOTS - 1u)) == 0u) {
                s_keys[swizzle(j)] = r_key[r];
                VALUES(s_values[swizzle(j)] = r_value[r];)
            } else if (base + i < N) {
                keys[first + i] = r_key[r];
                VALUES(values[first + i] = r_value[r];)
            }
        }
    }
    if (flip) {
        memoryBarrierBuffer();
    }
    barrier();
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint tiles = (N + TILE - 1u) / TILE;
    uint full = N / TILE;
    uint w = gl_WorkGroupID.x + pc.group_offset;
    // This workgroup's tiles: t .. end, every stride-th.
    uint t = w << WINDOW;
    uint stride = WINDOW > 0u ? 1u : max(pc.loop_stride, 1u);
    uint end = min(tiles, WINDOW > 0u ? t + WINDOW_SLOTS : (pc.loop_stride > 0u ? tiles : t + 1u));
    // With a GPU-side count, workgroups whose first tile is virtual return (the whole workgroup).
    if (t >= tiles) {
        return;
    }
    set_slot_elements();
    bool ahead = WINDOW == 0u && pc.loop_stride > 0u && AHEAD_FITS;
    if (WINDOW > 0u) {
        window_substage(t * TILE, pc.dir != 0u);
    } else if (ahead && t < full) {
        load_ahead(t * TILE + lid);
    }
    [[dont_unroll]] for (uint first = t; t < end; t += stride) {
        if (ahead && t < full) {
            store_ahead();
        } else if (WINDOW == 0u || t != first) {
            load_tile(t * TILE + lid);
        }
        if (ahead && t + stride < full) {
            load_ahead((t + stride) * TILE + lid);
        }
        tile_half_cleaners();
        store_tile(t * TILE + lid);
        // Every invocation has read this tile out of shared memory before the next goes in.
        barrier();
    }
}
