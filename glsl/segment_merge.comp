#version 450
// segment_merge: a run of consecutive substages of the network on cosets of TILE elements, in
// shared memory (Segment in src/segment.rs says which runs and why each is closed on a coset).
// Each workgroup loads the elements element_of names and runs, in local indices,
//   - with SEGMENT_TAIL, the half-cleaners of strides 2^(low-1) .. 1 (the end of a stage),
//   - with dir, the flip of blocks of 2^u, u = low + high + 1 (the next stage's flip),
//   - the half-cleaners of strides 2^(low+high-1) .. 2^low (the high run),
// as one chain of chunks (chunks.glsl), and stores them back. In local indices every comparator
// puts the smaller image first, as in a tile.
// Push constants used: n, dir (the flip), shape (low, high and the high run's element bit q),
// group_offset, flags (FLAG_FROM_IMAGE_ON_STORE on a sort's last pass); looping: loop_stride.
// Defines read: KEY64, PAIRS, CHUNK, SLOTS; LOOPING (Form::Looping, a pass with fewer workgroups
// than cosets): workgroup w takes cosets w, w + loop_stride, ..., loading its next coset into
// registers while it runs this one, on volatile buffers as in local_merge.comp.
#extension GL_GOOGLE_include_directive : require
#ifdef LOOPING
#define ELEMENT_QUALIFIER volatile
const bool LOOPING_FORM = true;
#else
const bool LOOPING_FORM = false;
#endif
#include "keys.glsl"
#include "network.glsl"
#include "tile.glsl"
#include "chunks.glsl"

uint segment_low() {
    return pc.shape & 31u;
}

uint segment_high() {
    return (pc.shape >> SEGMENT_HIGH_SHIFT) & 31u;
}

// q: the element bit of the high run's smallest stride.
uint segment_high_bit() {
    return (pc.shape >> SEGMENT_HIGH_BIT_SHIFT) & 31u;
}

uint segment_used() {
    return segment_low() + segment_high() + pc.dir;
}

// The element of local index c of workgroup `group` (its first coset): the low run from c's low
// bits, the high run from the next ones, the flip's vector where bit u-1 of c is set, and the
// coset (c's bits at or above u, then the group) spread over the element bits the runs leave
// free. Linear over GF(2) in (c, group), and it grows with the group (Segment::workgroups).
uint element_of(uint c, uint group) {
    uint a = segment_low();
    uint m = segment_high();
    uint q = segment_high_bit();
    uint u = segment_used();
    uint coset = (c >> u) | (group << (uint(findMSB(TILE)) - u));
    uint gap = q - a;
    uint e = (c & ((1u << a) - 1u)) | (((c >> a) & ((1u << m) - 1u)) << q) |
             ((coset & ((1u << gap) - 1u)) << a) | ((coset >> gap) << (q + m + pc.dir));
    if (pc.dir != 0u && ((c >> (u - 1u)) & 1u) != 0u) {
        e ^= (1u << (q + m)) | (((1u << q) - 1u) ^ ((1u << a) - 1u));
    }
    return e;
}

uint local_element(uint i) {
    return element_of(i, 0u);
}

// The substages of the segment on the coset in shared memory, as local stages: where the chain
// starts and how many substages it runs.
void run_segment() {
    uint a = segment_low();
    uint m = segment_high();
    uint u = segment_used();
    bool tail = (pc.shape & SEGMENT_TAIL) != 0u;
    // Strides 2^(u-1) .. 2^a of a stage: the last u - a half-cleaners of a stage of u + 1
    // substages are the first m.
    uint k = u + 1u;
    uint rest = u;
    bool flip = false;
    uint left = m;
    if (pc.dir != 0u && tail) {
        // The last `a` half-cleaners of stage u-1, then stage u's flip and high run.
        k = u - 1u;
        rest = a;
        left = a + 1u + m;
    } else if (pc.dir != 0u) {
        k = u;
        rest = 0u;
        flip = true;
        left = 1u + m;
    } else if (tail) {
        // The end of a stage alone (no high run): strides 2^(a-1) .. 1.
        k = a;
        rest = a;
        left = a;
    }
    segment_chain(k, rest, flip, left);
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    // The loop's stride: one coset a workgroup in the plain form.
    uint stride = LOOPING_FORM ? max(pc.loop_stride, 1u) : 0u;
    uint group = gl_WorkGroupID.x + pc.group_offset;
    // A coset whose lowest element is virtual holds no real one, nor does any after it
    // (Segment::workgroups): the indirect dispatch of a GPU-side count runs none of them, and
    // this keeps it so.
    if (element_of(0u, group) >= N) {
        return;
    }
    set_slot_elements();
    bool ahead = LOOPING_FORM && AHEAD_FITS;
    if (ahead) {
        load_ahead(element_of(lid, group));
    }
    [[dont_unroll]] for (bool more = true; more; group += stride) {
        uint lid_element = element_of(lid, group);
        uint next = group + stride;
        more = LOOPING_FORM && element_of(0u, next) < N;
        if (ahead) {
            store_ahead();
        } else {
            load_tile(lid_element);
        }
        if (ahead && more) {
            load_ahead(element_of(lid, next));
        }
        run_segment();
        store_tile(lid_element);
        if (more) {
            // Every invocation has read this coset out of shared memory before the next goes in.
            barrier();
        }
    }
}
