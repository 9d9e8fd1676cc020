#version 450
// local_merge: the last pass of every stage whose blocks are larger than a tile. The global passes
// have already run the strides >= TILE; each workgroup runs the half-cleaner substages with
// strides TILE/2 .. 1 on its tile in shared memory, all ascending by order image.
// Push constants used: n, group_offset, flags.
#include "local.glsl"

void main() {
    uint base = tile_base();
    load_tile(base);
    for (uint inc = TILE >> 1; inc > 0u; inc >>= 1) {
        substage(base, inc, false);
    }
    store_tile(base);
}
