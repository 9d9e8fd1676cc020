#version 450
// local_merge: the last pass of every stage whose blocks are larger than a tile. The global passes
// have already run the strides >= TILE (WINDOW = 0) or >= 2 * TILE (WINDOW = 1). Each workgroup
// runs the half-cleaner substages with strides TILE/2 .. 1 on its tile in shared memory, fused up
// to FUSED at a time in registers, all ascending by order image.
//
// With WINDOW = 1 (specialization constant 3; the plan gives such a pass pc.inc == TILE) each
// workgroup takes a window of two tiles: it first runs the substage of stride TILE between them
// (the stage's flip when pc.dir is 1; window_substage in local.glsl), then the strides TILE/2 .. 1
// on the lower tile and then on the upper one.
// Push constants used: n, dir (WINDOW = 1), group_offset, flags.
#include "local.glsl"

// Windows of two tiles (1) or one tile per workgroup (0): a separate pipeline each, so that the
// one-tile merge carries none of the window's code.
layout(constant_id = 3) const uint WINDOW = 0;

void main() {
    if (WINDOW == 0u) {
        uint base = tile_base();
        if (!tile_live(base)) {
            return;
        }
        load_tile(base);
        substages(TILE >> 1, findMSB(TILE), false);
        store_tile(base);
        return;
    }
    uint base = 2u * tile_base();
    if (!tile_live(base)) {
        return;
    }
    window_substage(base, pc.dir != 0u);
    substages(TILE >> 1, findMSB(TILE), false);
    store_tile(base);
    // The upper tile, when it holds a real element (the same for the whole workgroup).
    if (base + TILE < N) {
        // Every invocation has read the lower tile out of shared memory.
        barrier();
        load_tile(base + TILE);
        substages(TILE >> 1, findMSB(TILE), false);
        store_tile(base + TILE);
    }
}
