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
    uint stage = 1u;
    // Stages 1..4 in registers, 16 consecutive elements per invocation, one barrier for all four
    // (tiles of 16 elements or more, with full fusion; smaller tiles, for tests, and the unfused
    // builds of the barrier study take the general path).
    if (TILE >= 16u && FUSED >= 4u) {
        uint stages = min(pc.log_block, 4u);
        for (uint g = gl_LocalInvocationID.x; g < TILE / 16u; g += WG_SIZE) {
            first_stages(g, stages);
        }
        barrier();
        stage = stages + 1u;
    }
    if (TILE >= 16u && FUSED >= 4u) {
        if (stage <= pc.log_block) {
            chained_stages(stage, pc.log_block);
        }
    } else {
        for (; stage <= pc.log_block; stage++) {
            substages(1u << (stage - 1u), stage, true);
        }
    }
    store_tile(base);
}
