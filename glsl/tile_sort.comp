#version 450
// tile_sort: the first pass of every sort. Each workgroup sorts its tile of TILE elements
// completely in shared memory: stages 1..log_block (block sizes 2..2^log_block), each a flip
// substage followed by half-cleaner substages, fused up to FUSED at a time in registers, all
// ascending by order image.
// Push constants used: n, log_block (0..=log2 TILE), group_offset, flags.
#include "local.glsl"

void main() {
    uint base = tile_base();
    if (!tile_live(base)) {
        return;
    }
    load_tile(base);
    for (uint stage = 1u; stage <= pc.log_block; stage++) {
        substages(N - base, 1u << (stage - 1u), stage, true);
    }
    store_tile(base);
}
