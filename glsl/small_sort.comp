#version 450
// small_sort: the tile sort of small tiles (Form::Small; tuning::small_tile_sort says where it
// runs: 4-byte keys in tiles of up to 1024, or 2048 with local chunks of at most 3) with the tile
// in registers, SLOTS elements per invocation: element t * SLOTS + r in slot r, t the
// invocation's index by subgroup. In the flip form, every comparator putting the smaller image at
// the lower index: index bits below log2(SLOTS) in registers, the next log2(subgroup size) bits
// between the invocations of a subgroup with subgroupShuffleXor, the bits above through shared
// memory. Fewer barriers than the chunks of the plain tile sort.
// Push constants used: n, shape (log2 of the largest block it sorts), group_offset, flags.
// Defines read: PAIRS; SMALL_TWO_SLOTS (Form::SmallTwoSlots): keys on two slots, as pairs always take
// (tuning::small_slots: pairs' values double the shuffles and selects per substage, and twice the
// subgroups hide more of each substage's latency).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "keys.glsl"

#if defined(PAIRS) || defined(SMALL_TWO_SLOTS)
const uint BITS = 1u;
#else
const uint BITS = 2u;
#endif
const uint SLOTS = 1u << BITS;

const uint REGS = SLOTS;
#include "slots.glsl"
shared KEY s_keys[TILE];
VALUES(shared uint s_values[TILE];)

// Row-wise XOR swizzle of shared memory, as the other local kernels use.
uint swizzle(uint i) {
    return i ^ ((i >> 5) & 31u);
}

// Slot r against `o` (and `ov`), its partner's element: the smaller image where `keep_min`.
void take(uint r, KEY o, uint ov, bool keep_min) {
    KEY k = r_key[r];
    bool swap = keep_min ? key_greater(k, o) : key_greater(o, k);
    r_key[r] = swap ? o : k;
    VALUES(r_value[r] = swap ? ov : r_value[r];)
}

// Stages 1..BITS: the sort of each invocation's slots.
void sort_registers() {
    exchange(0u, 1u);
    if (BITS == 2u) {
        exchange(2u, 3u);
        exchange(0u, 3u);
        exchange(1u, 2u);
        exchange(0u, 1u);
        exchange(2u, 3u);
    }
}

// A stage's half-cleaners inside the registers, strides SLOTS/2 .. 1.
void register_half_cleaners() {
    if (BITS == 2u) {
        exchange(0u, 2u);
        exchange(1u, 3u);
        exchange(2u, 3u);
    }
    exchange(0u, 1u);
}

// A substage whose partners lie lane_mask invocations apart in the subgroup (with `flip`, in the
// mirrored slot). Every shuffle reads the slots before any is updated.
void lanes(uint lane_mask, bool flip, bool keep_min) {
    KEY o[SLOTS];
    uint ov[SLOTS];
    [[unroll]] for (uint r = 0u; r < SLOTS; r++) {
        // Both slots read with constant indices: a runtime index would send the slots to memory.
        KEY k = flip ? r_key[r ^ (SLOTS - 1u)] : r_key[r];
        o[r] = subgroupShuffleXor(k, lane_mask);
        ov[r] = 0u;
        VALUES(ov[r] = subgroupShuffleXor(flip ? r_value[r ^ (SLOTS - 1u)] : r_value[r], lane_mask);)
    }
    [[unroll]] for (uint r = 0u; r < SLOTS; r++) {
        take(r, o[r], ov[r], keep_min);
    }
}

// A substage through shared memory: element i against element i ^ mask.
void shared_substage(uint t, uint mask) {
    // Every invocation has read the last substage's elements before these go in.
    barrier();
    [[unroll]] for (uint r = 0u; r < SLOTS; r++) {
        s_keys[swizzle(t * SLOTS + r)] = r_key[r];
        VALUES(s_values[swizzle(t * SLOTS + r)] = r_value[r];)
    }
    barrier();
    [[unroll]] for (uint r = 0u; r < SLOTS; r++) {
        uint i = t * SLOTS + r;
        uint p = i ^ mask;
        uint ov = 0u;
        VALUES(ov = s_values[swizzle(p)];)
        take(r, s_keys[swizzle(p)], ov, i < p);
    }
}

void main() {
    uint base = (gl_WorkGroupID.x + pc.group_offset) * TILE;
    // With a GPU-side count the tile sort is dispatched for n: a tile past the count returns.
    if (COUNTED && base >= N) {
        return;
    }
    bool map_in = (pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u;
    bool map_out = stores_keys();
    // Shuffles need whole subgroups, so that subgroup q holds elements q * gl_SubgroupSize * SLOTS
    // onwards; where the device made partial ones, every substage past the registers goes
    // through shared memory.
    bool whole = gl_NumSubgroups * gl_SubgroupSize == WG_SIZE;
    uint t = whole ? gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID : gl_LocalInvocationID.x;
    uint lane_bits = whole ? uint(findLSB(gl_SubgroupSize)) : 0u;
    uint first = batch_base() + base;
    [[unroll]] for (uint r = 0u; r < SLOTS; r++) {
        uint i = t * SLOTS + r;
        r_key[r] = KEY_MAX;
        VALUES(r_value[r] = 0u;)
        if (base + i < N) {
            KEY k = keys[first + i];
            r_key[r] = map_in ? to_image(k) : k;
            VALUES(r_value[r] = values[first + i];)
        }
    }
    sort_registers();
    uint shape = COUNTED ? min(pc.shape, ceil_log2(N)) : pc.shape;
    // Stage s: its flip (element i against i ^ (2^s - 1)), then its half-cleaners, each substage
    // q on index bit q (from s-1 down) between invocations, down to the registers' bits. Rolled:
    // one copy of each kind of substage in the module.
    [[dont_unroll]] for (uint s = BITS + 1u; s <= shape; s++) {
        [[dont_unroll]] for (uint q = s - 1u; q >= BITS; q--) {
            bool flip = q == s - 1u;
            uint mask = flip ? (2u << q) - 1u : 1u << q;
            bool keep_min = ((t >> (q - BITS)) & 1u) == 0u;
            if (q >= BITS + lane_bits) {
                shared_substage(t, mask);
            } else {
                lanes(mask >> BITS, flip, keep_min);
            }
        }
        register_half_cleaners();
    }
    [[unroll]] for (uint r = 0u; r < SLOTS; r++) {
        uint i = t * SLOTS + r;
        if (base + i < N) {
            keys[first + i] = map_out ? from_image(r_key[r]) : r_key[r];
            VALUES(values[first + i] = r_value[r];)
        }
    }
}
