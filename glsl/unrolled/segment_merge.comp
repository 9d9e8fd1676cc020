#version 450
// segment_merge: a run of consecutive substages of the network on cosets of TILE elements, in
// shared memory (Segment in src/segment.rs says which runs and why each is closed on a coset).
// Each workgroup loads the elements element_of names, runs in local indices
//   - with SEGMENT_TAIL, the half-cleaners of strides 2^(low-1) .. 1 (the end of a stage),
//   - with pc.dir, the flip of blocks of 2^u, u = low + high + 1 (the next stage's flip),
//   - the half-cleaners of strides 2^(low+high-1) .. 2^low (the high run),
// in chunks of up to FUSED in registers as the tile kernels run theirs, and stores them back. In
// local indices every comparator puts the smaller image first, as in a tile.
// Push constants used: n, dir (the flip), shape (low, high and the high run's element bit q),
// group_offset, flags (FLAG_FROM_IMAGE_ON_STORE on a sort's last pass); looping: loop_stride.
//
// The looping form (LOOPING, Form::Looping; only for a segment pass with fewer workgroups than
// cosets, Plan::looping_passes): workgroup w takes cosets w, w + pc.loop_stride, ..., loading
// its next coset into registers before it runs this one, on volatile buffers as in
// local_merge.comp. The plain form keeps one coset per workgroup on plain buffers.
//
// The shaped forms (SHAPED; one pipeline per shape, Kernels::make_shaped) take the shape from
// specialization constants (SHAPE_LOG_BLOCK, SHAPE_DIR) instead of the push constants, and the
// pass's chain of chunks, worked out on the host (Segment::chunks), from SHAPE_CHUNK0 ..
// SHAPE_CHUNK7: every stride, mask and branch is then a literal once the driver specializes the
// module. Only passes of one coset per workgroup take them. With SHAPE_CHAIN (Form::Chain) the
// module is built per chain of chunk kinds and sizes (SHAPE_CODE0 .. as literal macros, see
// chain_chunk: CHAIN_BUILDS in src/abi/table.rs), each slot compiled with its one chunk so that
// spirv-opt takes it; the shaped module without it carries every kind and size in every slot and
// goes unoptimised.
#ifdef LOOPING
#define ELEMENT_QUALIFIER volatile
#endif
#include "local.glsl"

#ifdef SHAPED
// SHAPE_LOG_BLOCK and SHAPE_DIR (specialization constants) are the pass's shape and flip;
// SHAPE_CHUNK0 .. SHAPE_CHUNK7 its chunk descriptors (SegmentChunk::encode): 0 none, else bits
// 0-1 the kind (1 half-cleaners, 2 a flip and half-cleaners, 3 a cross chunk), bits 2-4 m (a
// cross chunk's a), bits 5-9 log2 of the smallest stride (a cross chunk's k).
#define SEGMENT_LOG_BLOCK SHAPE_LOG_BLOCK
#define SEGMENT_DIR SHAPE_DIR
#else
#define SEGMENT_LOG_BLOCK pc.shape
#define SEGMENT_DIR pc.dir
#endif

uint segment_low() {
    return SEGMENT_LOG_BLOCK & 31u;
}

uint segment_high() {
    return (SEGMENT_LOG_BLOCK >> SEGMENT_HIGH_SHIFT) & 31u;
}

// q: the element bit of the high run's smallest stride.
uint segment_high_bit() {
    return (SEGMENT_LOG_BLOCK >> SEGMENT_HIGH_BIT_SHIFT) & 31u;
}

uint segment_used() {
    return segment_low() + segment_high() + SEGMENT_DIR;
}

// The element index of local element c of workgroup `group` (its first coset): the low run from
// c's low bits, the high run from the next ones, the flip's vector where bit u-1 of c is set, and
// the coset (c's bits at or above u, then the group) spread over the element bits the runs leave
// free. It grows with the group (Segment::workgroups).
uint element_of(uint c, uint group) {
    uint a = segment_low();
    uint m = segment_high();
    uint q = segment_high_bit();
    uint u = segment_used();
    uint coset = (c >> u) | (group << (uint(findMSB(TILE)) - u));
    uint gap = q - a;
    uint e = (c & ((1u << a) - 1u)) | (((c >> a) & ((1u << m) - 1u)) << q) |
             ((coset & ((1u << gap) - 1u)) << a) | ((coset >> gap) << (q + m + SEGMENT_DIR));
    if (SEGMENT_DIR != 0u && ((c >> (u - 1u)) & 1u) != 0u) {
        e ^= (1u << (q + m)) | (((1u << q) - 1u) ^ ((1u << a) - 1u));
    }
    return e;
}

// element_of is linear over GF(2) for local indices below TILE: each element bit is one bit of
// c or of the group, or (the flip) a fixed vector where bit u-1 of c is set, so element_of(c ^ d,
// g ^ h) = element_of(c, g) ^ element_of(d, h). The loops below take the index of local element
// i0 + r * WG_SIZE + lid (three disjoint bit fields) as element_of(i0 + lid, group), once per
// invocation and batch, XOR slot_element(r): a few XORs per element of values the whole
// workgroup shares, instead of the bit spreading for each element.
uint slot_element(uint r) {
    uint e = 0u;
    [[unroll]] for (uint b = 0u; (1u << b) < LOAD_SLOTS; b++) {
        if ((r & (1u << b)) != 0u) {
            e ^= element_of(WG_SIZE << b, 0u);
        }
    }
    return e;
}

// The element of local element lid of group `group`'s coset is element_of(lid, 0) ^
// element_of(0, group) (the same linearity: the group's bits lie apart from lid's), and that of
// local element i0 + lid, for i0 a multiple of WG_SIZE, element_of(lid, group) ^
// element_of(i0, 0). The loops below take element_of(lid, group) as `lid_element`.
//
// With HOIST_SLOTS, slot_element(r) of every slot, and with HOIST_LID element_of(lid, 0), are
// computed once per dispatch (set_coset_elements), so that a workgroup looping over cosets
// computes one value per coset for its indices (coset_lid_element): the per-coset index
// arithmetic, not the memory, held the looping passes back. The looping form of u32 pairs hoists
// element_of(lid, 0) alone and u64 pairs neither: both hoists cost them registers and time
// (docs/LEVERS.md).
#if !(defined(PAIRS) && (defined(LOOPING) || defined(KEY64)))
#define HOIST_SLOTS
#endif
#if !(defined(PAIRS) && defined(KEY64))
#define HOIST_LID
#endif

#ifdef HOIST_SLOTS
uint slot_elements[LOAD_SLOTS];
#define SLOT_ELEMENT(r) slot_elements[r]
#else
#define SLOT_ELEMENT(r) slot_element(r)
#endif
#ifdef HOIST_LID
uint lid_base;
#endif

void set_coset_elements() {
#ifdef HOIST_SLOTS
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        slot_elements[r] = slot_element(r);
    }
#endif
#ifdef HOIST_LID
    lid_base = element_of(gl_LocalInvocationID.x, 0u);
#endif
}

// element_of(lid, group) for this invocation (after set_coset_elements).
uint coset_lid_element(uint group) {
#ifdef HOIST_LID
    return lid_base ^ element_of(0u, group);
#else
    return element_of(gl_LocalInvocationID.x, group);
#endif
}

// Whether every element of every coset this pass runs is real: n a power of two, and (with a
// GPU-side count) the count not below it. The cosets of a pass then cover the sort's 2^levels
// indices exactly, all below N (network::plan's test power_of_two_sorts_have_only_real_elements_in_their_cosets),
// so the loads and stores below drop their bounds test and KEY_MAX fill: one branch per coset,
// the workgroup alike, each side with `checked` a literal.
//
// Only the looping form of 4-byte keys takes it (SKIP_BOUNDS; the others always test): in every
// form it made pairs and 8-byte keys slower (docs/LEVERS.md).
#if defined(LOOPING) && !defined(PAIRS) && !defined(KEY64)
#define SKIP_BOUNDS
#endif
bool all_real() {
#ifdef SKIP_BOUNDS
    return N == pc.n && (pc.n & (pc.n - 1u)) == 0u;
#else
    return false;
#endif
}

// A group's elements into shared memory (`lid_element`: see above), every load of a batch issued
// before the first store (as load_tile does); with `checked` (a literal), virtual elements (index
// N or past) are KEY_MAX and never read.
void load_segment_elements(uint lid_element, bool checked) {
    uint first = batch_base();
    uint lid = gl_LocalInvocationID.x;
    uint batch = tile_batch();
    for (uint i0 = 0u; i0 < TILE; i0 += batch * WG_SIZE) {
        uint base = lid_element ^ element_of(i0, 0u);
        [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
            uint i = i0 + r * WG_SIZE + lid;
            if (r < batch && i < TILE) {
                uint e = base ^ SLOT_ELEMENT(r);
                if (checked) {
                    r_key[r] = KEY_MAX;
#ifdef ORIGINS
                    r_held[r] = 0u;
#elif defined(PAIRS)
                    r_value[r] = 0u;
#endif
                }
                if (!checked || e < N) {
                    r_key[r] = keys[first + e];
#ifdef ORIGINS
                    r_held[r] = values[first + e];
#elif defined(PAIRS)
                    r_value[r] = values[first + e];
#endif
                }
            }
        }
        [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
            uint i = i0 + r * WG_SIZE + lid;
            if (r < batch && i < TILE) {
                s_keys[swizzle(i)] = r_key[r];
#ifdef ORIGINS
                s_values[swizzle(i)] = TO_SHARED_VALUE(i);
#elif defined(PAIRS)
                s_values[swizzle(i)] = TO_SHARED_VALUE(r_value[r]);
#endif
            }
        }
    }
    barrier();
}

void load_segment(uint lid_element) {
    if (all_real()) {
        load_segment_elements(lid_element, false);
    } else {
        load_segment_elements(lid_element, true);
    }
}

#ifdef ORIGINS
// A group's real elements back (`lid_element`: see above), mapped from order images on the
// sort's last pass, their values put in place by gather_held; `checked` (a literal) as in
// load_segment_elements.
void store_segment_elements(uint lid_element, bool checked) {
    bool map = stores_keys();
    uint first = batch_base();
    gather_held();
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + gl_LocalInvocationID.x;
        if (i < TILE) {
            uint e = lid_element ^ SLOT_ELEMENT(r);
            if (!checked || e < N) {
                keys[first + e] = map ? from_image(r_key[r]) : r_key[r];
                values[first + e] = r_value[r];
            }
        }
    }
}
#else
// A group's real elements back (`lid_element`: see above), mapped from order images on the
// sort's last pass; `checked` (a literal) as in load_segment_elements.
void store_segment_elements(uint lid_element, bool checked) {
    bool map = stores_keys();
    uint first = batch_base();
    uint lid = gl_LocalInvocationID.x;
    uint batch = tile_batch();
    for (uint i0 = 0u; i0 < TILE; i0 += batch * WG_SIZE) {
        [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
            uint i = i0 + r * WG_SIZE + lid;
            if (r < batch && i < TILE) {
                r_key[r] = s_keys[swizzle(i)];
#ifdef PAIRS
                r_value[r] = s_values[swizzle(i)];
#endif
            }
        }
        uint base = lid_element ^ element_of(i0, 0u);
        [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
            uint i = i0 + r * WG_SIZE + lid;
            if (r < batch && i < TILE) {
                uint e = base ^ SLOT_ELEMENT(r);
                if (!checked || e < N) {
                    keys[first + e] = map ? from_image(r_key[r]) : r_key[r];
#ifdef PAIRS
                    values[first + e] = r_value[r];
#endif
                }
            }
        }
    }
}
#endif

void store_segment(uint lid_element) {
    if (all_real()) {
        store_segment_elements(lid_element, false);
    } else {
        store_segment_elements(lid_element, true);
    }
}

// A chunk across a local stage boundary with a tail of `a` (1 .. FUSED-1) and FUSED substages in
// all, a and h turned into literals (cross_chunk in local.glsl). cross_chunk_any there takes only
// the tails the tile sort meets (with FUSED 3, a tail of one); a branch for the others would add
// code to the tile sort, whose `a` is not known when it is compiled.
void segment_cross(uint k, uint a) {
    if (FUSED == 5u) {
        if (a == 4u) {
            cross_chunk(k, 4u, 0u);
        } else if (a == 3u) {
            cross_chunk(k, 3u, 1u);
        } else if (a == 2u) {
            cross_chunk(k, 2u, 2u);
        } else {
            cross_chunk(k, 1u, 3u);
        }
    } else if (FUSED == 4u) {
        if (a == 3u) {
            cross_chunk(k, 3u, 0u);
        } else if (a == 2u) {
            cross_chunk(k, 2u, 1u);
        } else {
            cross_chunk(k, 1u, 2u);
        }
    } else if (FUSED == 3u) {
        if (a == 2u) {
            cross_chunk(k, 2u, 0u);
        } else {
            cross_chunk(k, 1u, 1u);
        }
    } else {
        cross_chunk(k, 1u, 0u);
    }
}

#ifndef SHAPED
// `left` substages in local indices from local stage k (stage k merges blocks of 2^k): its flip
// first when `flip`, else its half-cleaners of strides 2^(rest-1) .. 1 (rest of them), then on
// into stage k+1. Chunks of up to FUSED substages; one that would run the end of a stage and the
// start of the next runs as a cross chunk where FUSED substages are left and the next stage has
// room for its head, else the stage's end runs alone.
void segment_chain(uint k, uint rest, bool flip, uint left) {
    while (left > 0u) {
        uint m = min(FUSED, left);
        if (flip) {
            m = min(m, k);
            chunk_any(1u << (k - m), m, true);
            rest = k - m;
            flip = false;
        } else if (rest == 0u) {
            k++;
            flip = true;
            continue;
        } else if (m <= rest) {
            chunk_any(1u << (rest - m), m, false);
            rest -= m;
        } else if (m == FUSED && FUSED - 1u <= k) {
            // The last `rest` half-cleaners of stage k, the flip of stage k+1 and its first
            // FUSED - 1 - rest half-cleaners (strides 2^(k-1) ..).
            segment_cross(k, rest);
            rest = k - (FUSED - 1u - rest);
            k++;
        } else {
            m = rest;
            chunk_any(1u, m, false);
            rest = 0u;
        }
        left -= m;
    }
}
#endif

// Issues the loads of a group's elements (`lid_element`: see above) into r_ahead, local element
// r * WG_SIZE + lid in slot r (where store_ahead puts it in shared memory); `checked` (a literal)
// as in load_segment_elements.
void load_segment_ahead_elements(uint lid_element, bool checked) {
    uint first = batch_base();
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        uint i = r * WG_SIZE + lid;
        if (i < TILE) {
            uint e = lid_element ^ SLOT_ELEMENT(r);
            if (checked) {
                r_ahead[r] = KEY_MAX;
#ifdef PAIRS
                r_ahead_value[r] = 0u;
#endif
            }
            if (!checked || e < N) {
                r_ahead[r] = keys[first + e];
#ifdef PAIRS
                r_ahead_value[r] = values[first + e];
#endif
            }
        }
    }
}

void load_segment_ahead(uint lid_element) {
    if (all_real()) {
        load_segment_ahead_elements(lid_element, false);
    } else {
        load_segment_ahead_elements(lid_element, true);
    }
}

#if defined(SHAPED) && defined(SHAPE_CHAIN)
// One chunk of the chain: its kind and size from `code` (SHAPE_CODE0 ..: a literal macro at every
// call site, SegmentChunk::chain_code in src/segment.rs: bits 0-1 the kind, 1 half-cleaners, 2 a
// flip and half-cleaners, 3 a cross chunk; bits 2-4 m, a cross chunk's tail a; bits 5-7 a cross
// chunk's head h), its smallest stride (a cross chunk's stage k) from its descriptor `d` (a
// specialization constant). Only the chunk the code names is compiled in, so that spirv-opt
// takes the module (the other shaped module carries every kind and size in every slot).
void chain_chunk(uint code, uint d) {
    uint kind = code & 3u;
    uint m = (code >> 2u) & 7u;
    uint h = (code >> 5u) & 7u;
    uint p = (d >> 5u) & 31u;
    if (kind == 1u) {
        chunk(1u << p, m, false);
    } else if (kind == 2u) {
        chunk(1u << p, m, true);
    } else {
        cross_chunk(p, m, h);
    }
}

void run_segment() {
#if SHAPE_CODE0 != 0
    chain_chunk(uint(SHAPE_CODE0), SHAPE_CHUNK0);
#endif
#if SHAPE_CODE1 != 0
    chain_chunk(uint(SHAPE_CODE1), SHAPE_CHUNK1);
#endif
#if SHAPE_CODE2 != 0
    chain_chunk(uint(SHAPE_CODE2), SHAPE_CHUNK2);
#endif
#if SHAPE_CODE3 != 0
    chain_chunk(uint(SHAPE_CODE3), SHAPE_CHUNK3);
#endif
#if SHAPE_CODE4 != 0
    chain_chunk(uint(SHAPE_CODE4), SHAPE_CHUNK4);
#endif
#if SHAPE_CODE5 != 0
    chain_chunk(uint(SHAPE_CODE5), SHAPE_CHUNK5);
#endif
#if SHAPE_CODE6 != 0
    chain_chunk(uint(SHAPE_CODE6), SHAPE_CHUNK6);
#endif
#if SHAPE_CODE7 != 0
    chain_chunk(uint(SHAPE_CODE7), SHAPE_CHUNK7);
#endif
}
#elif defined(SHAPED)
// One chunk of the chain from its descriptor (a specialization constant).
void shaped_chunk(uint d) {
    uint kind = d & 3u;
    uint m = (d >> 2u) & 7u;
    uint p = (d >> 5u) & 31u;
    if (kind == 1u) {
        chunk_any(1u << p, m, false);
    } else if (kind == 2u) {
        chunk_any(1u << p, m, true);
    } else if (kind == 3u) {
        segment_cross(p, m);
    }
}

void run_segment() {
    shaped_chunk(SHAPE_CHUNK0);
    shaped_chunk(SHAPE_CHUNK1);
    shaped_chunk(SHAPE_CHUNK2);
    shaped_chunk(SHAPE_CHUNK3);
    shaped_chunk(SHAPE_CHUNK4);
    shaped_chunk(SHAPE_CHUNK5);
    shaped_chunk(SHAPE_CHUNK6);
    shaped_chunk(SHAPE_CHUNK7);
}
#else
// The substages of the segment on the coset in shared memory.
void run_segment() {
    uint a = segment_low();
    uint m = segment_high();
    uint u = segment_used();
    bool tail = (SEGMENT_LOG_BLOCK & SEGMENT_TAIL) != 0u;
    // Where the chain starts, in local stages. One call site: the chain's chunks are written out
    // once per literal chunk size and tail, and the compiler inlines each call site.
    uint k = u + 1u;
    uint rest = u;
    bool flip = false;
    uint left = m;
    if (SEGMENT_DIR != 0u && tail) {
        // The last `a` half-cleaners of stage u-1, then stage u's flip and high run.
        k = u - 1u;
        rest = a;
        left = a + 1u + m;
    } else if (SEGMENT_DIR != 0u) {
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
    // Otherwise strides 2^(u-1) .. 2^a of a stage: the last u - a half-cleaners of a stage of
    // u + 1 substages are the first m.
    segment_chain(k, rest, flip, left);
}
#endif

#ifndef LOOPING
void main() {
    uint group = gl_WorkGroupID.x + pc.group_offset;
    // Workgroups whose lowest element is virtual hold no real one (Segment::workgroups); the
    // indirect dispatch of a GPU-side count runs none of them, and this guard keeps it so.
    if (element_of(0u, group) >= N) {
        return;
    }
    set_coset_elements();
    uint lid_element = coset_lid_element(group);
    load_segment(lid_element);
    run_segment();
    store_segment(lid_element);
}
#else
void main() {
    // The loop's stride; never 0 in this form (max() keeps a wrong push constant from hanging).
    uint stride = max(pc.loop_stride, 1u);
    uint group = gl_WorkGroupID.x + pc.group_offset;
    // A group whose lowest element is virtual holds no real one, nor does any after it.
    if (element_of(0u, group) >= N) {
        return;
    }
    set_coset_elements();
    if (AHEAD_FITS) {
        load_segment_ahead(coset_lid_element(group));
    }
    for (; element_of(0u, group) < N; group += stride) {
        uint lid_element = coset_lid_element(group);
        if (AHEAD_FITS) {
            store_ahead(false);
        } else {
            load_segment(lid_element);
        }
        uint next = group + stride;
        if (AHEAD_FITS && element_of(0u, next) < N) {
            load_segment_ahead(coset_lid_element(next));
        }
        run_segment();
        store_segment(lid_element);
        // Every invocation has read this coset out of shared memory before the next goes in.
        barrier();
    }
}
#endif
