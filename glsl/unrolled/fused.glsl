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

// FUSED (a specialization constant): substages per group, exactly this many in a global_merge
// pass, at most this many per chunk in the local kernels; 1..6.
// Register slots per invocation: 2^FUSED at most. Slots a kernel's FUSED leaves unused are never
// indexed once the loops over 1 << FUSED unroll, and cost no register.
const uint MAX_SLOTS = 64u;

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

// Padding. An element at index N or past is virtual: +infinity, never read from a buffer and never
// written to one. A kernel that holds one in a register or in shared memory holds KEY_MAX there,
// and every comparator then runs unchecked: a comparator moves its elements only when the one at
// the lower index is strictly greater, every kernel sorts ascending by order image, and virtual
// elements lie above every real one, so a KEY_MAX standing for a virtual element is never
// greater than its partner at a lower index and never moves, even where a real key's image is
// KEY_MAX too. A virtual element's value (PAIRS) is never read into a real position.

// Compare-exchange of register slots a and b: the smaller image to a, which holds the lower
// element index (a real one whenever b's is). A key whose image is equal stays put. Keys alone
// as u32 take min and max (two instructions); otherwise one comparison picks key and value.
void exchange(uint a, uint b) {
#if !defined(PAIRS) && !defined(KEY64)
    uint x = r_key[a];
    uint y = r_key[b];
    r_key[a] = min(x, y);
    r_key[b] = max(x, y);
#else
    KEY x = r_key[a];
    KEY y = r_key[b];
    bool swap = key_greater(x, y);
    r_key[a] = swap ? y : x;
    r_key[b] = swap ? x : y;
#ifdef PAIRS
    uint v = r_value[a];
    uint w = r_value[b];
    r_value[a] = swap ? w : v;
    r_value[b] = swap ? v : w;
#endif
#endif
}

// Runs the m substages on the slots of a group (m and flip literals at every call site).
void run_slots(uint m, bool flip) {
    uint half_slots = 1u << (m - 1u);
    [[unroll]] for (uint j = 0u; j < m; j++) {
        uint bit = half_slots >> j;
        [[unroll]] for (uint s = 0u; s < (1u << m); s++) {
            if ((s & bit) == 0u) {
                // Past the flip, the mirrored slots run in decreasing index order.
                if (flip && j > 0u && (s & half_slots) != 0u) {
                    exchange(s | bit, s);
                } else {
                    exchange(s, s | bit);
                }
            }
        }
    }
}
