// network.glsl: the register side of the local kernels: their sizes, the register slots, the
// compare-exchange, the network every chunk runs, and the register stages of the tile sort.
// Defines read: CHUNK and SLOTS (a module built for one chunk size and one batch of elements per
// invocation), else the sizes come from the specialization constants FUSED and BATCH and the
// driver unrolls the loops over them.
//
// A chunk runs C consecutive substages of the network on groups of 2^C elements, one group per
// invocation at a time, in registers. Slot s of a group holds element rep ^ (the XOR of v[b] for
// each bit b of s): the chunk's vectors v are runtime values, so chunks differ only in which
// substages they run. Substage t acts on slot bit C-1-t. Slot bit C-1 is the mirror bit: the upper
// half of the slots holds its elements with every chunk bit below complemented (a flip's mirror
// does that by itself, other chunks XOR the complement into v[C-1]), so every half-cleaner runs
// the upper half in decreasing slot order, the same code in every chunk.
#ifdef CHUNK
const uint C = uint(CHUNK);
const uint LOADS = uint(SLOTS);
#else
const uint C = FUSED;
const uint LOADS = BATCH;
#endif
// Slots of a chunk group, and its mirror bit.
const uint CS = 1u << C;
const uint TOP = CS >> 1u;
// Stages the tile sort runs at once in registers, on groups of RSIZE consecutive elements.
const uint RS = C < 4u ? C : 4u;
const uint RSIZE = 1u << RS;
// Register slots: a chunk group (at most 32), a batch of loads (at most 16), a window's groups.
const uint REGS = 32u;
#include "slots.glsl"

// Substage t (1..C-1) of a chunk: a half-cleaner on slot bit C-1-t, the upper half reversed.
void half_cleaner(uint t) {
    uint bit = TOP >> t;
    // Unrolled: every slot index must be a constant for the slots to stay in registers.
    [[unroll]] for (uint s = 0u; s < CS; s++) {
        if ((s & bit) == 0u) {
            if ((s & TOP) == 0u) {
                exchange(s, s | bit);
            } else {
                exchange(s | bit, s);
            }
        }
    }
}

// The substages first..last that are half-cleaners, each written once in the module. Not a loop:
// spirv-opt leaves an unrolled loop rolled when its body holds a guarded loop, and the slots,
// indexed at run time, would go to memory.
void half_cleaners(uint first, uint last) {
    if (C > 1u && first <= 1u && 1u <= last) {
        half_cleaner(1u);
    }
    if (C > 2u && first <= 2u && 2u <= last) {
        half_cleaner(2u);
    }
    if (C > 3u && first <= 3u && 3u <= last) {
        half_cleaner(3u);
    }
    if (C > 4u && first <= 4u && 4u <= last) {
        half_cleaner(4u);
    }
}

// What a chunk's substage 0 (on the mirror bit) is: a stage's flip (slot s against s + TOP, which
// holds its mirror), a half-cleaner of a chunk whose upper half is complemented (slot s against
// its complement), or nothing (a chunk of fewer than C substages).
const uint OP_FLIP = 0u;
const uint OP_MIRROR = 1u;
const uint OP_NONE = 2u;

// The mirror-bit substage of a flip: slot s against s + TOP, which holds its mirror.
void flip_substage() {
    [[unroll]] for (uint s = 0u; s < TOP; s++) {
        exchange(s, s | TOP);
    }
}

// One chunk's network: half-cleaners 1..a (the end of a stage), substage 0 as `op`, then
// half-cleaners lo..hi. Every argument is the same across the workgroup. Written out for each tail
// a flip chunk may have, so that each chunk runs straight-line code with no branch between its
// substages, which the GPU runs faster than one copy behind branches (docs/LEVERS.md).
void network(uint op, uint a, uint lo, uint hi) {
    if (op == OP_FLIP) {
        // A tail leaves the chunk full (hi = C-1); only a flip chunk without one may be shorter.
        if (a == 0u) {
            flip_substage();
            half_cleaners(1u, hi);
        } else if (a == 1u) {
            half_cleaners(1u, 1u);
            flip_substage();
            half_cleaners(2u, C - 1u);
        } else if (a == 2u) {
            half_cleaners(1u, 2u);
            flip_substage();
            half_cleaners(3u, C - 1u);
        } else if (a == 3u) {
            half_cleaners(1u, 3u);
            flip_substage();
            half_cleaners(4u, C - 1u);
        } else {
            half_cleaners(1u, 4u);
            flip_substage();
        }
        return;
    }
    if (op == OP_MIRROR) {
        [[unroll]] for (uint s = 0u; s < TOP; s++) {
            exchange(s, s ^ (CS - 1u));
        }
    }
    // Half-cleaners lo..C-1 (hi is C-1 here).
    if (lo <= 1u) {
        half_cleaners(1u, C - 1u);
    } else if (lo == 2u) {
        half_cleaners(2u, C - 1u);
    } else if (lo == 3u) {
        half_cleaners(3u, C - 1u);
    } else {
        half_cleaners(4u, C - 1u);
    }
}

// The register stages: stage k's flip and its half-cleaners on every group of 2^RS consecutive
// slots of slots 0..n-1. Written out by stage: spirv-opt leaves an unrolled loop rolled when it
// holds a guarded inner loop, and the slots would then go to memory.
void register_flip(uint n, uint k) {
    uint half_block = 1u << (k - 1u);
    [[unroll]] for (uint s = 0u; s < n; s++) {
        if ((s & half_block) == 0u) {
            exchange(s, s ^ (2u * half_block - 1u));
        }
    }
}

void register_half_cleaner(uint n, uint stride) {
    [[unroll]] for (uint s = 0u; s < n; s++) {
        if ((s & stride) == 0u) {
            exchange(s, s | stride);
        }
    }
}

// Stages 1..min(stages, RS) on slots 0..n-1 (n a multiple of RSIZE).
void sort_slots(uint n, uint stages) {
    if (stages >= 1u) {
        register_flip(n, 1u);
    }
    if (RS >= 2u && stages >= 2u) {
        register_flip(n, 2u);
        register_half_cleaner(n, 1u);
    }
    if (RS >= 3u && stages >= 3u) {
        register_flip(n, 3u);
        register_half_cleaner(n, 2u);
        register_half_cleaner(n, 1u);
    }
    if (RS >= 4u && stages >= 4u) {
        register_flip(n, 4u);
        register_half_cleaner(n, 4u);
        register_half_cleaner(n, 2u);
        register_half_cleaner(n, 1u);
    }
}
