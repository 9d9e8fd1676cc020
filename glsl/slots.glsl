// slots.glsl: a kernel's register slots and the compare-exchange on them. The kernel sets REGS,
// the number of slots, before it includes this; a slot only ever indexed by constants costs a
// register, one never indexed costs nothing.
KEY r_key[REGS];
VALUES(uint r_value[REGS];)

// Compare-exchange of register slots a and b: the smaller image to a, which holds the lower
// element. Equal images stay put, so a virtual element's KEY_MAX never moves below a real key.
void exchange(uint a, uint b) {
#if !defined(KEY64) && !defined(PAIRS)
    // Bare 4-byte keys: min and max, one instruction each where a compare and two selects are three.
    KEY lo = min(r_key[a], r_key[b]);
    r_key[b] = max(r_key[a], r_key[b]);
    r_key[a] = lo;
#else
    KEY x = r_key[a];
    KEY y = r_key[b];
    bool swap = key_greater(x, y);
    r_key[a] = swap ? y : x;
    r_key[b] = swap ? x : y;
    VALUES(uint v = r_value[a]; uint w = r_value[b]; r_value[a] = swap ? w : v; r_value[b] = swap ? v : w;)
#endif
}
