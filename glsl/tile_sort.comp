#version 450
// tile_sort: the first pass of every sort. Each workgroup sorts its tile of TILE elements
// completely in shared memory: stages 1..log_block (block sizes 2..2^log_block), each a flip
// substage followed by half-cleaner substages, all ascending by order image.
// Push constants used: n, log_block (0..=log2 TILE), group_offset, flags.
#include "local.glsl"

void main() {
    uint base = tile_base();
    load_tile(base);
    for (uint block = 2u; block <= (1u << pc.log_block); block <<= 1) {
        substage(base, block >> 1, true);
        for (uint inc = block >> 2; inc > 0u; inc >>= 1) {
            substage(base, inc, false);
        }
    }
    store_tile(base);
}
