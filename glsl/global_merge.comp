#version 450
// global_merge: one substage with stride inc >= TILE, straight on the storage buffers, one
// comparator per invocation. dir = 1 is the first substage of a stage (the lower element of each
// comparator is compared with its mirror in its block of 2*inc); dir = 0 compares i with i + inc.
// Keys are already order images here: the first and last passes of a sort are local kernels.
// Push constants used: n, inc, dir, group_offset.
#include "common.glsl"

void main() {
    uint c = (gl_WorkGroupID.x + pc.group_offset) * WG_SIZE + gl_LocalInvocationID.x;
    uint lo = low_index(c, pc.inc);
    uint hi = pc.dir != 0u ? lo ^ (2u * pc.inc - 1u) : lo + pc.inc;
    // An upper element at or past n is a virtual +infinity key: the comparator is a no-op.
    if (hi < pc.n) {
        uint a = keys[lo];
        uint b = keys[hi];
        if (a > b) {
            keys[lo] = b;
            keys[hi] = a;
#ifdef PAIRS
            uint v = values[lo];
            values[lo] = values[hi];
            values[hi] = v;
#endif
        }
    }
}
