#version 450
// local_merge: the last pass of every stage whose blocks are larger than a tile. The global passes
// have already run the strides >= TILE << WINDOW. Each workgroup runs the half-cleaner substages
// with strides TILE/2 .. 1 on its tile in shared memory, fused up to FUSED at a time in registers,
// all ascending by order image.
//
// With WINDOW = 1 or 2 (specialization constant 3, a pipeline each; the plan gives such a pass
// pc.inc == TILE << (WINDOW-1)) each workgroup takes a window of 2^WINDOW tiles: it first runs
// the WINDOW substages of strides TILE << (WINDOW-1) .. TILE between them in registers (the
// first the stage's flip when pc.dir is 1; window_substage in local.glsl), then the strides
// TILE/2 .. 1 on each tile in turn, the lowest first.
// Push constants used: n, dir (WINDOW > 0), group_offset, flags.
#include "local.glsl"

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
    uint base = tile_base() << WINDOW;
    if (!tile_live(base)) {
        return;
    }
    window_substage(base, pc.dir != 0u);
    substages(TILE >> 1, findMSB(TILE), false);
    store_tile(base);
    // The tiles above, each when it holds a real element (the same for the whole workgroup).
    for (uint t = 1u; t < (1u << WINDOW); t++) {
        uint tile = base + t * TILE;
        if (tile < N) {
            // Every invocation has read the tile before out of shared memory.
            barrier();
            load_tile(tile);
            substages(TILE >> 1, findMSB(TILE), false);
            store_tile(tile);
        }
    }
}
