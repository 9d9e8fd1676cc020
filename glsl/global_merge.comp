#version 450
// global_merge: FUSED (1..6, a specialization constant) consecutive substages of one stage, with
// strides inc .. inc >> (FUSED-1), all >= TILE, straight on the buffers (after Bainville's
// B4/B8/B16): each invocation loads a group of 2^FUSED elements into registers, runs the
// substages on them and stores them back, so FUSED substages cost one trip through memory.
// dir = 1 when the first of them is the stage's flip. Keys are images already: the first and last
// passes of a sort are local kernels.
// Push constants used: n, inc (a power of two), dir (0 or 1), group_offset, flags.
// Defines read: KEY64, PAIRS.
#extension GL_GOOGLE_include_directive : require
#include "keys.glsl"

// Slot s of a group holds the element whose bits log2(low) .. log2(inc) are s; with a flip, the
// slots whose top bit is set hold the mirrors, in the block of 2 inc, of the others.
const uint GROUP = 1u << FUSED;
const uint HALF_GROUP = GROUP >> 1u;
const uint REGS = 64u;
#include "slots.glsl"

uint slot_element(uint g, uint s, uint low, bool flip) {
    uint i = (((g & ~(low - 1u)) << FUSED) | (g & (low - 1u))) + (s & (HALF_GROUP - 1u)) * low;
    if ((s & HALF_GROUP) != 0u) {
        i = flip ? i ^ (2u * pc.inc - 1u) : i + pc.inc;
    }
    return i;
}

// Group g of this pass, `flip` a literal at both call sites so that every comparator's direction
// is known when the kernel is compiled. Unrolled by the driver once FUSED is known: the slots stay
// in registers. Virtual elements (N or past) are KEY_MAX, never read or written.
void merge_group(uint first, uint g, uint low, bool flip) {
    [[unroll]] for (uint s = 0u; s < GROUP; s++) {
        uint i = slot_element(g, s, low, flip);
        r_key[s] = KEY_MAX;
        VALUES(r_value[s] = 0u;)
        if (i < N) {
            r_key[s] = keys[first + i];
            VALUES(r_value[s] = values[first + i];)
        }
    }
    [[unroll]] for (uint j = 0u; j < FUSED; j++) {
        uint bit = HALF_GROUP >> j;
        [[unroll]] for (uint s = 0u; s < GROUP; s++) {
            // Past a flip, the mirrored slots run in decreasing element order.
            if ((s & bit) == 0u && flip && j > 0u && (s & HALF_GROUP) != 0u) {
                exchange(s | bit, s);
            } else if ((s & bit) == 0u) {
                exchange(s, s | bit);
            }
        }
    }
    [[unroll]] for (uint s = 0u; s < GROUP; s++) {
        uint i = slot_element(g, s, low, flip);
        if (i < N) {
            keys[first + i] = r_key[s];
            VALUES(values[first + i] = r_value[s];)
        }
    }
}

void main() {
    uint first = batch_base();
    uint g = (gl_WorkGroupID.x + pc.group_offset) * WG_SIZE + gl_LocalInvocationID.x;
    uint low = pc.inc >> (FUSED - 1u);
    if (pc.dir != 0u) {
        merge_group(first, g, low, true);
    } else {
        merge_group(first, g, low, false);
    }
}
