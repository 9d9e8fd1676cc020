// Register fusion (after Bainville's B4/B8/B16 kernels): one invocation loads a group of 2^m
// elements into registers, runs m consecutive substages of one stage on them, and stores them
// back, so m substages cost one trip through memory instead of m.
//
// The m substages have strides top, top/2, ..., low (low = top >> (m-1)); the group's elements
// differ only in the m index bits log2(low)..log2(top). Slot s holds the element whose bits there
// are s, except that with `flip` (the first substage of a stage) the slots with the top bit set
// hold the mirrors, in the block of 2*top, of the slots without it. Every substage is closed on a
// group, so the groups of one chunk are independent.

#extension GL_EXT_control_flow_attributes : require

// Substages per group (specialization constant 2): exactly this many in a global_merge pass, at
// most this many per chunk in the local kernels; 1..5.
layout(constant_id = 2) const uint FUSED = 4;
// Register slots per invocation: 2^FUSED at most. Slots a kernel's FUSED leaves unused are never
// indexed once the loops over 1 << FUSED unroll, and cost no register.
const uint MAX_SLOTS = 32u;

KEY r_key[MAX_SLOTS];
#ifdef PAIRS
uint r_value[MAX_SLOTS];
#endif

// The element index of slot s of group g, for m substages of smallest stride low.
uint slot_index(uint g, uint s, uint low, uint m, bool flip) {
    uint half_slots = 1u << (m - 1u);
    uint top = low << (m - 1u);
    uint i = (((g & ~(low - 1u)) << m) | (g & (low - 1u))) + (s & (half_slots - 1u)) * low;
    if ((s & half_slots) != 0u) {
        i = flip ? i ^ (2u * top - 1u) : i + top;
    }
    return i;
}

// Runs the m substages on the slots of group g. A comparator puts the smaller image at the lower
// element index; one whose upper index is at or past `limit` meets a virtual +infinity key and is
// skipped; with `checked` false the caller vouches that every element is real and no bound is
// tested. Indices are recomputed rather than kept, to spare 16 registers per invocation.
void run_slots(uint g, uint low, uint m, bool flip, uint limit, bool checked) {
    uint half_slots = 1u << (m - 1u);
    [[unroll]] for (uint j = 0u; j < m; j++) {
        uint bit = half_slots >> j;
        [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
            if ((s & bit) == 0u) {
                uint t = s | bit;
                // Past the flip, the mirrored slots run in decreasing index order.
                bool reversed = flip && j > 0u && (s & half_slots) != 0u;
                bool real = !checked || slot_index(g, reversed ? s : t, low, m, flip) < limit;
                KEY a = r_key[s];
                KEY b = r_key[t];
                if (real && (reversed ? key_greater(b, a) : key_greater(a, b))) {
                    r_key[s] = b;
                    r_key[t] = a;
#ifdef PAIRS
                    uint v = r_value[s];
                    r_value[s] = r_value[t];
                    r_value[t] = v;
#endif
                }
            }
        }
    }
}
