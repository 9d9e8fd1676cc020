#version 450
// tile_sort: the first pass of every sort. Each workgroup sorts its tile of TILE elements
// completely in shared memory: stages 1..log_block (block sizes 2..2^log_block), each a flip
// substage followed by half-cleaner substages, fused up to FUSED at a time in registers (stages
// 1..REGISTER_STAGES all at once: register_stages), all ascending by order image.
// Push constants used: n, log_block (0..=log2 TILE), group_offset, flags; with PERSISTENT, inc.
//
// The PERSISTENT build (a module of its own, bound only for a tile sort with fewer workgroups
// than tiles: Plan::persistent_merges) loops: workgroup w sorts tiles w, w + pc.inc, ..., and
// loads its next tile into registers before it sorts this one, as the persistent local merges do
// (local_merge.comp; its element buffers are volatile for the same reason). The plain build keeps
// one tile per workgroup with plain buffers: on the H100 a single module for both cases cost the
// one-tile sorts time (2^10 keys 8.4 -> 8.8 us), and on lavapipe two call sites of the sort in one
// module took four times as long to compile.
#ifdef PERSISTENT
#define ELEMENT_QUALIFIER volatile
#endif
#include "local.glsl"

// Stages 1..pc.log_block of the tile in shared memory.
void sort_tile() {
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
}

#ifndef PERSISTENT
void main() {
    uint base = tile_base();
    if (!tile_live(base)) {
        return;
    }
    load_tile(base);
    sort_tile();
    store_tile(base);
}
#else
void main() {
    bool map = (pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u;
    uint tiles = (N + TILE - 1u) / TILE;
    uint full = N / TILE;
    // The loop's stride; never 0 in this build (max() keeps a wrong push constant from hanging).
    uint stride = max(pc.inc, 1u);
    uint t = gl_WorkGroupID.x + pc.group_offset;
    if (AHEAD_FITS && t < full) {
        load_ahead(t * TILE);
    }
    for (; t < tiles; t += stride) {
        uint base = t * TILE;
        if (AHEAD_FITS && t < full) {
            store_ahead(map);
        } else {
            // A partial last tile (padded by load_tile), or tiles too large for the registers.
            load_tile(base);
        }
        uint next = t + stride;
        if (AHEAD_FITS && next < full) {
            load_ahead(next * TILE);
        }
        sort_tile();
        store_tile(base);
        // Every invocation has read this tile out of shared memory before the next goes in.
        barrier();
    }
}
#endif
