// chunks.glsl: the chunk schedule of the local kernels: one chunk of up to C substages on the
// shared tile (run_chunk), and the runs of substages each kernel cuts into chunks: the tile
// sort's chain of stages, a local merge's half-cleaners, a segment pass's run. Each kernel calls
// run_chunk from one place, so the network is in its module once.
//
// Two kinds of chunk, in local indices of the tile:
//   CHUNK_FLIP (k, a, m): the last `a` half-cleaners of stage k (strides 2^(a-1) .. 1), the flip of
//     stage k+1 (each element against its mirror in its block of 2^(k+1)), and its first m-1-a
//     half-cleaners (strides 2^(k-1) ..); a = 0 is a chunk that starts a stage with its flip.
//   CHUNK_HALF (k, m): the half-cleaners of strides 2^k .. 2^(k-m+1).
// A chunk of m < C substages leaves C - m slot bits idle: they take the lowest free element bits,
// so every chunk runs TILE / 2^C groups of 2^C elements.
const uint CHUNK_FLIP = 0u;
const uint CHUNK_HALF = 1u;

// The groups of one chunk that this invocation runs.
void chunk_groups(uint kind, uint k, uint a, uint m) {
    // v[b]: the element bits slot bit b stands for. The group index fills the free element bits,
    // [l0, l1) and [h, log2 TILE), the lowest of them taken by the idle slot bits.
    uint v[5];
    uint l0, l1, op, lo, hi;
    uint h = k + 1u;
    // The idle slot bits: below the active ones in a flip chunk, above them in a half chunk.
    uint idle_low = kind == CHUNK_FLIP ? 0u : m;
    if (kind == CHUNK_FLIP) {
        [[unroll]] for (uint b = 0u; b < C - 1u; b++) {
            // Substage t: a tail half-cleaner of stage k, or a head one of stage k+1.
            uint t = C - 1u - b;
            v[b] = t <= a ? 1u << (a - t) : 1u << min(k + a - t, 31u);
        }
        v[C - 1u] = (2u << k) - 1u;
        l0 = a;
        l1 = k + a + 1u - m;
        op = OP_FLIP;
        lo = a + 1u;
        hi = m - 1u;
    } else {
        uint low = 1u << (k + 1u - m);
        [[unroll]] for (uint b = 0u; b < C; b++) {
            v[b] = low << b;
        }
        l0 = 0u;
        l1 = k + 1u - m;
        op = m == C ? OP_MIRROR : OP_NONE;
        lo = C - m + (m == C ? 1u : 0u);
        hi = C - 1u;
        a = 0u;
    }
    uint free_low = l1 - l0;
    [[unroll]] for (uint b = 0u; b < C; b++) {
        uint j = b - idle_low;
        if (b >= idle_low && j < C - m) {
            v[b] = j < free_low ? 1u << (l0 + j) : 1u << (h + j - free_low);
        }
    }
    if (kind == CHUNK_HALF) {
        // The upper half with the chunk's bits complemented: (a full chunk's top bit, 2^k, is in
        // the mask, and its mirror op meets the complement).
        v[C - 1u] = (m == C ? 0u : v[C - 1u]) ^ ((2u << k) - (1u << (k + 1u - m)));
    }
    uint sv[5];
    [[unroll]] for (uint b = 0u; b < C; b++) {
        sv[b] = swizzle(v[b]);
    }
    [[dont_unroll]] for (uint g = gl_LocalInvocationID.x; g < (TILE >> C); g += WG_SIZE) {
        uint x = g << (C - m);
        uint rep = ((x & ((1u << free_low) - 1u)) << l0) | ((x >> free_low) << h);
        uint addr[32];
        addr[0] = swizzle(rep);
        [[unroll]] for (uint s = 1u; s < CS; s++) {
            // The index of s's lowest bit by comparisons spirv-opt folds (it leaves findLSB, and
            // sv indexed at run time would go to memory).
            uint low_bit = s & (0u - s);
            uint b = low_bit == 1u ? 0u : (low_bit == 2u ? 1u : (low_bit == 4u ? 2u : (low_bit == 8u ? 3u : 4u)));
            addr[s] = addr[s & (s - 1u)] ^ sv[b];
        }
        [[unroll]] for (uint s = 0u; s < CS; s++) {
            r_key[s] = s_keys[addr[s]];
            VALUES(r_value[s] = s_values[addr[s]];)
        }
        network(op, a, lo, hi);
        [[unroll]] for (uint s = 0u; s < CS; s++) {
            s_keys[addr[s]] = r_key[s];
            VALUES(s_values[addr[s]] = r_value[s];)
        }
    }
}

void run_chunk(uint kind, uint k, uint a, uint m) {
    // Invocations without a group (a chunk has TILE >> C groups, fewer than WG_SIZE where a batch
    // is under 2^C slots) skip the chunk's set-up as well.
    if (gl_LocalInvocationID.x < (TILE >> C)) {
        chunk_groups(kind, k, a, m);
    }
    barrier();
}

// The tile sort: stages first .. last as one run of substages cut into chunks of C (the last one
// shorter), a chunk crossing a stage boundary where it falls on one: one barrier per chunk.
// Stage `first` has at least C substages (it follows the register stages).
void chained_stages(uint first, uint last) {
    uint k = first;
    // Substages of stage k already run: 0 = none, the next is its flip.
    uint o = 0u;
    uint left = (first + last) * (last - first + 1u) / 2u;
    [[dont_unroll]] while (left > 0u) {
        uint m = min(C, left);
        uint kind = CHUNK_HALF;
        uint p = k - 1u - o;
        uint a = 0u;
        if (o + m > k) {
            // The end of stage k, then stage k+1's flip and first half-cleaners.
            kind = CHUNK_FLIP;
            p = k;
            a = k - o;
            o = m - a;
            k++;
        } else {
            if (o == 0u) {
                kind = CHUNK_FLIP;
                p = k - 1u;
            }
            o += m;
            if (o == k) {
                k++;
                o = 0u;
            }
        }
        run_chunk(kind, p, a, m);
        left -= m;
    }
}

// A local merge: the half-cleaners of strides TILE/2 .. 1.
void tile_half_cleaners() {
    uint left = uint(findMSB(TILE));
    [[dont_unroll]] for (uint p = left - 1u; left > 0u; p -= C) {
        uint m = min(C, left);
        run_chunk(CHUNK_HALF, p, 0u, m);
        left -= m;
    }
}

// A segment pass: `left` substages from local stage k: its flip first where `flip`, else its last
// `rest` half-cleaners (strides 2^(rest-1) .. 1), then on into stage k+1. A chunk that would hold
// the end of a stage and the start of the next crosses the boundary where C substages are left.
void segment_chain(uint k, uint rest, bool flip, uint left) {
    [[dont_unroll]] while (left > 0u) {
        uint m = min(C, left);
        uint kind = CHUNK_HALF;
        uint p = rest - 1u;
        uint a = 0u;
        if (flip) {
            m = min(m, k);
            kind = CHUNK_FLIP;
            p = k - 1u;
            rest = k - m;
            flip = false;
        } else if (rest == 0u) {
            k++;
            flip = true;
            continue;
        } else if (m <= rest) {
            rest -= m;
        } else if (m == C && C - 1u <= k) {
            // Its head of C-1-rest half-cleaners fits stage k+1's k.
            kind = CHUNK_FLIP;
            p = k;
            a = rest;
            rest = k + rest + 1u - C;
            k++;
        } else {
            m = rest;
            rest = 0u;
        }
        run_chunk(kind, p, a, m);
        left -= m;
    }
}
