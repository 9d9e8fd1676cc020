#version 450
// local_merge: the last pass of every stage whose blocks are larger than a tile. The global passes
// have already run the strides >= TILE; each workgroup runs the half-cleaner substages with
// strides TILE/2 .. 1 on its tile in shared memory, fused up to FUSED at a time in registers, all
// ascending by order image.
// Push constants used: n, group_offset, flags.
#include "local.glsl"

void main() {
    uint base = tile_base();
    if (!tile_live(base)) {
        return;
    }
    load_tile(base);
    substages(TILE >> 1, findMSB(TILE), false);
    store_tile(base);
}
