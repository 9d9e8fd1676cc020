#version 450
// tile_sort: the first pass of every sort. Each workgroup sorts its tile of TILE elements
// completely in shared memory: stages 1..log_block (block sizes 2..2^log_block), each a flip
// substage followed by half-cleaner substages, fused up to FUSED at a time in registers (stages
// 1..REGISTER_STAGES all at once: register_stages), all ascending by order image.
// Push constants used: n, log_block (0..=log2 TILE), group_offset, flags.
#include "local.glsl"

void main() {
    uint base = tile_base();
    if (!tile_live(base)) {
        return;
    }
    load_tile(base);
    // Stages 1..REGISTER_STAGES in registers, 2^REGISTER_STAGES consecutive elements per
    // invocation, one barrier for all of them, then the later stages in chunks that may span a
    // stage boundary (tiles of at least that group, with FUSED 2 or more; smaller tiles, for tests,
    // and the unfused builds of the barrier study take the general path, one stage after another).
    if (FUSED >= 2u && TILE >= (1u << REGISTER_STAGES)) {
        uint stages = register_stages(pc.log_block);
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
