#version 450
// tile_sort: the first pass of every sort. Each workgroup sorts its tile of TILE elements
// completely in shared memory: stages 1..log_block (block sizes 2..2^log_block), each a flip
// substage followed by half-cleaner substages, fused up to FUSED at a time in registers (stages
// 1..4 all at once: first_stages), all ascending by order image.
// Push constants used: n, log_block (0..=log2 TILE), group_offset, flags.
#include "local.glsl"

void main() {
    uint base = tile_base();
    if (!tile_live(base)) {
        return;
    }
    load_tile(base);
    // Stages 1..4 in registers, 16 consecutive elements per invocation, one barrier for all four,
    // then the later stages in chunks that may span a stage boundary (tiles of 16 elements or
    // more, with full fusion; smaller tiles, for tests, and the unfused builds of the barrier
    // study take the general path, one stage after another).
    if (TILE >= 16u && FUSED >= 4u) {
        uint stages = min(pc.log_block, 4u);
        for (uint g = gl_LocalInvocationID.x; g < TILE / 16u; g += WG_SIZE) {
            first_stages(g, stages);
        }
        barrier();
        if (stages < pc.log_block) {
            chained_stages(stages + 1u, pc.log_block);
        }
    } else {
        for (uint stage = 1u; stage <= pc.log_block; stage++) {
            substages(1u << (stage - 1u), stage, true);
        }
    }
    store_tile(base);
}
