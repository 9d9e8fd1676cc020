#version 450
// local_merge: the last pass of every stage whose blocks are larger than a tile. The global passes
// have already run the strides >= TILE << WINDOW. Each workgroup runs the half-cleaner substages
// with strides TILE/2 .. 1 on its tile in shared memory, fused up to FUSED at a time in registers,
// all ascending by order image.
//
// With WINDOW = 1 or 2 (a specialization constant, a pipeline each; the plan gives such a pass
// pc.inc == TILE << (WINDOW-1)) each workgroup takes a window of 2^WINDOW tiles: it first runs
// the WINDOW substages of strides TILE << (WINDOW-1) .. TILE between them in registers (the
// first the stage's flip when pc.dir is 1; window_substage in local.glsl), then the strides
// TILE/2 .. 1 on each tile in turn, the lowest first.
//
// With WINDOW = 0 the workgroups may be fewer than the tiles (Plan::looping_passes):
// pc.loop_stride is then the workgroups of the pass, and workgroup w merges tiles w,
// w + pc.loop_stride, ... (pc.loop_stride = 0: tile w alone). Each loads its next tile into
// registers before it merges this one, so that the loads are in flight while the chunks run.
// Push constants used: n, loop_stride (WINDOW = 0), inc and dir (WINDOW > 0), group_offset, flags.
//
// The keys and values are volatile here, for the loads of the next tile. The driver's compiler
// issues plain loads next to their first use: here the stores into shared memory after this
// tile's chunks, so nothing would overlap. Volatile loads stay where they are written, and only
// their first use waits for them (a buffer memory barrier after plain loads did not do it:
// docs/LEVERS.md). The whole binding is volatile rather than a second, volatile declaration of it for these loads
// alone: synchronization validation takes a variable that is never stored to as a read of the
// whole binding by every dispatch of the pipeline, and the dispatches of one split pass (disjoint
// elements, no barrier between them) then show as read-after-write hazards.
#define ELEMENT_QUALIFIER volatile
#include "local.glsl"

// The strides TILE/2 .. 1 of every tile this workgroup owns. A local merge never maps keys to
// images on load (only the tile sort does), so the ahead registers hold images already.
void merge_tiles() {
    if (pc.loop_stride == 0u) {
        // One tile per workgroup: nothing to load ahead of, and the registers' round trip cost
        // pairs time.
        uint base = tile_base();
        if (!tile_live(base)) {
            return;
        }
        load_tile(base);
        substages(TILE >> 1, findMSB(TILE), false);
        store_tile(base);
        return;
    }
    uint tiles = (N + TILE - 1u) / TILE;
    uint full = N / TILE;
    uint stride = pc.loop_stride;
    uint t = gl_WorkGroupID.x + pc.group_offset;
    if (AHEAD_FITS && t < full) {
        load_ahead(t * TILE);
    }
    for (; t < tiles; t += stride) {
        uint base = t * TILE;
        if (AHEAD_FITS && t < full) {
            store_ahead(false);
        } else {
            // A partial last tile (padded by load_tile), or tiles too large for the registers.
            load_tile(base);
        }
        uint next = t + stride;
        if (AHEAD_FITS && next < full) {
            load_ahead(next * TILE);
        }
        substages(TILE >> 1, findMSB(TILE), false);
        store_tile(base);
        // Every invocation has read this tile out of shared memory before the next goes in.
        barrier();
    }
}

void main() {
    if (WINDOW == 0u) {
        merge_tiles();
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
