#version 450
// global_merge: FUSED (1..6, a specialization constant) consecutive substages of one stage, with
// strides inc .. inc >> (FUSED-1), all >= TILE, straight on the storage buffers: one group of
// 2^FUSED elements per invocation, held in registers (fused.glsl). dir = 1 when the first of them
// is the stage's flip. Keys are already order images here: the first and last passes of a sort
// are local kernels.
// Push constants used: n, inc (a power of two), dir (0 or 1), group_offset, flags.
#include "common.glsl"
#include "fused.glsl"

// Group g of this pass, with flip a literal at both call sites so that every comparator's
// direction is known when the kernel is compiled. Indices at or past n are virtual +infinity
// keys: never read, never written, KEY_MAX in between (see the padding note in fused.glsl).
void merge_group(uint batch, uint g, uint low, bool flip) {
    [[unroll]] for (uint s = 0u; s < (1u << FUSED); s++) {
        uint i = slot_index(g, s, low, FUSED, flip);
        r_key[s] = KEY_MAX;
#ifdef PAIRS
        r_value[s] = 0u;
#endif
        if (i < N) {
            r_key[s] = keys[batch + i];
#ifdef PAIRS
            r_value[s] = values[batch + i];
#endif
        }
    }
    run_slots(FUSED, flip);
    [[unroll]] for (uint s = 0u; s < (1u << FUSED); s++) {
        uint i = slot_index(g, s, low, FUSED, flip);
        if (i < N) {
            keys[batch + i] = r_key[s];
#ifdef PAIRS
            values[batch + i] = r_value[s];
#endif
        }
    }
}

void main() {
    uint batch = batch_base();
    uint g = (gl_WorkGroupID.x + pc.group_offset) * WG_SIZE + gl_LocalInvocationID.x;
    uint low = pc.inc >> (FUSED - 1u);
    if (pc.dir != 0u) {
        merge_group(batch, g, low, true);
    } else {
        merge_group(batch, g, low, false);
    }
}
