#version 450
// tile_sort: the first pass of every sort. Each workgroup sorts its tile of TILE elements
// completely in shared memory: stages 1..pc.shape (block sizes 2..2^shape), each a flip substage
// followed by half-cleaner substages, fused up to FUSED at a time in registers (stages
// 1..REGISTER_STAGES all at once: register_stages, or on the loaded registers where a full tile's
// loads make whole groups: load_sorted), all ascending by order image.
// Push constants used: n, shape (0..=log2 TILE), group_offset, flags; looping: loop_stride.
//
// The looping form (LOOPING, Form::Looping; only for a tile sort with fewer workgroups than
// tiles, Plan::looping_passes): workgroup w sorts tiles w, w + pc.loop_stride, ..., loading its
// next tile into registers before it sorts this one, as the looping local merges do (its element
// buffers are volatile for the same reason: local_merge.comp). It is a module of its own because
// the plain form's one tile per workgroup runs faster on plain buffers (docs/LEVERS.md).
//
// The SMALL form (Form::Small, SmallTwoSlots) keeps the tile in registers: see small_sort. It
// needs subgroup shuffles, so it is a module of its own; tuning::small_tile_sort says where it
// runs (4-byte keys in tiles of up to 1024, or 2048 with local chunks of at most 3).
#ifdef SMALL_TWO_SLOTS
#define SMALL
#endif
#ifdef SMALL
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#ifdef LOOPING
#define ELEMENT_QUALIFIER volatile
#endif
#include "local.glsl"

// Elements per invocation of a full tile, and whether a full tile's loads are sorted in
// registers before they go into shared memory (load_sorted): where they make whole groups of
// 2^REGISTER_STAGES, the register stages run there instead of after one more trip through
// shared memory and a barrier (register_stages). Which elements make up a group is free in an
// unsorted tile: the loads stay coalesced (element r * WG_SIZE + lid in slot r). A function, not
// a constant: shaderc's optimizer rejects this as a specialization-constant expression.
const uint SLOTS = TILE / WG_SIZE;
bool load_sorts() {
    if (FUSED < 2u || SLOTS > LOAD_SLOTS) {
        return false;
    }
    return SLOTS >= (1u << REGISTER_STAGES);
}

// The SLOTS elements in r_key (mapped to order images with `map`) as sorted groups of 2^c (a
// literal): group j into shared block lid + j * WG_SIZE, then a barrier.
void store_sorted_groups(bool map, uint c) {
    uint size = 1u << c;
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        if (r < SLOTS && map) {
            r_key[r] = to_image(r_key[r]);
        }
    }
    [[unroll]] for (uint j = 0u; j * size < LOAD_SLOTS; j++) {
        if (j * size < SLOTS) {
            sort_slots(j * size, c, c);
            uint first = (lid + j * WG_SIZE) * size;
            [[unroll]] for (uint s = 0u; s < size; s++) {
                s_keys[swizzle(first + s)] = r_key[j * size + s];
#ifdef PAIRS
                s_values[swizzle(first + s)] = TO_SHARED_VALUE(r_value[j * size + s]);
#endif
            }
        }
    }
    barrier();
}

// store_sorted_groups with c = REGISTER_STAGES as a literal.
void store_sorted(bool map) {
    if (REGISTER_STAGES == 4u) {
        store_sorted_groups(map, 4u);
    } else if (REGISTER_STAGES == 3u) {
        store_sorted_groups(map, 3u);
    } else {
        store_sorted_groups(map, 2u);
    }
}

// The stages this tile sort runs: pc.shape, or with a GPU-side count no more than the count's
// ceil(log2): a larger block's upper half is virtual, and the flip and half-cleaners move nothing.
uint tile_shape() {
    return COUNTED ? min(pc.shape, ceil_log2(N)) : pc.shape;
}

// Whether the tile at `base` takes load_sorted: a full tile of a sort of at least the register
// stages.
bool loads_sorted(uint base) {
    return load_sorts() && tile_shape() >= REGISTER_STAGES && N - base >= TILE;
}

// A full tile at `base` into shared memory with its register stages run (see load_sorts).
void load_sorted(uint base) {
    uint first = batch_base() + base;
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
        if (r < SLOTS) {
            r_key[r] = keys[first + r * WG_SIZE + lid];
#ifdef ORIGINS
            r_held[r] = values[first + r * WG_SIZE + lid];
            r_value[r] = r * WG_SIZE + lid;
#elif defined(PAIRS)
            r_value[r] = values[first + r * WG_SIZE + lid];
#endif
        }
    }
    store_sorted((pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u);
}

// Stages 1..tile_shape() of the tile in shared memory; with `sorted`, stages
// 1..REGISTER_STAGES ran as the tile went in (load_sorted).
void sort_tile(bool sorted) {
    // Stages 1..REGISTER_STAGES in registers, 2^REGISTER_STAGES consecutive elements per
    // invocation, one barrier for all of them, then the later stages in chunks that may span a
    // stage boundary (tiles of at least that group, with FUSED 2 or more; smaller tiles, for tests,
    // and the unfused pipelines of the barrier study take the general path, one stage after another).
    uint shape = tile_shape();
    if (FUSED >= 2u && TILE >= (1u << REGISTER_STAGES)) {
        uint stages = sorted ? REGISTER_STAGES : register_stages(shape);
        if (stages < shape) {
            chained_stages(stages + 1u, shape);
        }
    } else {
        for (uint stage = 1u; stage <= shape; stage++) {
            substages(1u << (stage - 1u), stage, true);
        }
    }
}

#if defined(SMALL)
// The tile in registers, SMALL_SLOTS elements per invocation: element t * SMALL_SLOTS + r in slot
// r, t the invocation's index by subgroup. The network runs in its flip form, every comparator
// putting the smaller image at the lower index, as every kernel does (fused.glsl, on padding):
// index bits below SMALL_BITS in registers, the next log2(subgroup size) bits between the
// invocations of a subgroup with subgroupShuffleXor, the bits above through shared memory. Fewer
// barriers than the chunks of the plain form; one element per invocation made the shuffles cost
// more than the chunks saved.
//
// Keys take four elements per invocation in tiles of 2048 and two in smaller ones (the
// SMALL_TWO_SLOTS form), pairs two (tuning::small_slots): pairs' values double the shuffles and
// selects per substage, and twice the subgroups hide more of each substage's latency. Carrying a
// 16-bit index in place of each value lost (docs/LEVERS.md).
#if defined(PAIRS) || defined(SMALL_TWO_SLOTS)
const uint SMALL_BITS = 1u;
#else
const uint SMALL_BITS = 2u;
#endif
const uint SMALL_SLOTS = 1u << SMALL_BITS;

// Slot r against `o` (and `ov`), its partner's element: the smaller image to the lower index.
void small_take(uint r, KEY o, uint ov, bool keep_min) {
#if !defined(PAIRS) && !defined(KEY64)
    r_key[r] = keep_min ? min(r_key[r], o) : max(r_key[r], o);
#else
    KEY k = r_key[r];
    bool take = keep_min ? key_greater(k, o) : key_greater(o, k);
    r_key[r] = take ? o : k;
#ifdef PAIRS
    r_value[r] = take ? ov : r_value[r];
#endif
#endif
}

// A substage whose partners lie `lane_mask` invocations apart in the subgroup (with `flip`, in the
// mirrored slot). Every shuffle reads the slots before any is updated.
void small_lanes(uint lane_mask, bool flip, bool keep_min) {
    KEY o[SMALL_SLOTS];
    uint ov[SMALL_SLOTS];
    [[unroll]] for (uint r = 0u; r < SMALL_SLOTS; r++) {
        uint from = flip ? r ^ (SMALL_SLOTS - 1u) : r;
        o[r] = subgroupShuffleXor(r_key[from], lane_mask);
#ifdef PAIRS
        ov[r] = subgroupShuffleXor(r_value[from], lane_mask);
#else
        ov[r] = 0u;
#endif
    }
    [[unroll]] for (uint r = 0u; r < SMALL_SLOTS; r++) {
        small_take(r, o[r], ov[r], keep_min);
    }
}

// A substage through shared memory: element i against element i ^ mask.
void small_shared(uint t, uint mask) {
    // Every invocation has read the last substage's elements before these go in.
    barrier();
    [[unroll]] for (uint r = 0u; r < SMALL_SLOTS; r++) {
        s_keys[swizzle(t * SMALL_SLOTS + r)] = r_key[r];
#ifdef PAIRS
        s_values[swizzle(t * SMALL_SLOTS + r)] = r_value[r];
#endif
    }
    barrier();
    [[unroll]] for (uint r = 0u; r < SMALL_SLOTS; r++) {
        uint i = t * SMALL_SLOTS + r;
        uint p = i ^ mask;
        uint ov = 0u;
#ifdef PAIRS
        ov = s_values[swizzle(p)];
#endif
        small_take(r, s_keys[swizzle(p)], ov, i < p);
    }
}

// The largest tile of this form, log2 (tuning::SMALL_MAX_TILE).
const uint SMALL_MAX_LOG = 11u;

// Stages 1..tile_shape() of the tile at `base`, loaded from and stored to the buffers directly.
// The loops over stages and substages are unrolled up to SMALL_MAX_LOG, leaving at the shape,
// so that every substage's masks, lanes and branches are literals. Two shared tiles taken in
// turn (one barrier per shared-memory substage instead of two) gave nothing.
void small_sort(uint base) {
    bool map_in = (pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u;
    bool map_out = stores_keys();
    // Shuffles need whole subgroups, so that the invocations of subgroup q hold elements
    // q * gl_SubgroupSize * SMALL_SLOTS onwards. Where the device made partial ones, every
    // substage beyond the registers goes through shared memory instead.
    bool whole = gl_NumSubgroups * gl_SubgroupSize == WG_SIZE;
    uint t = whole ? gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID : gl_LocalInvocationID.x;
    uint lane_bits = whole ? uint(findLSB(gl_SubgroupSize)) : 0u;
    uint first = batch_base() + base;
    [[unroll]] for (uint r = 0u; r < SMALL_SLOTS; r++) {
        uint i = t * SMALL_SLOTS + r;
        r_key[r] = KEY_MAX;
#ifdef PAIRS
        r_value[r] = 0u;
#endif
        if (base + i < N) {
            KEY k = keys[first + i];
            r_key[r] = map_in ? to_image(k) : k;
#ifdef PAIRS
            r_value[r] = values[first + i];
#endif
        }
    }
    sort_slots(0u, SMALL_BITS, SMALL_BITS);
    uint shape = tile_shape();
    [[unroll]] for (uint s = SMALL_BITS + 1u; s <= SMALL_MAX_LOG; s++) {
        // One branch past every stage beyond the tile's: one per stage cost the smallest sorts.
        if (s > shape) {
            break;
        }
        // The flip (element i against i ^ (2^s - 1)), then the half-cleaners 2^(s-2) .. 1.
        uint mirror = (1u << s) - 1u;
        if (s <= SMALL_BITS + lane_bits) {
            small_lanes(mirror >> SMALL_BITS, true, ((t >> (s - 1u - SMALL_BITS)) & 1u) == 0u);
        } else {
            small_shared(t, mirror);
        }
        [[unroll]] for (uint k = s - 2u; k >= SMALL_BITS; k--) {
            uint j = 1u << k;
            if (j >= (SMALL_SLOTS << lane_bits)) {
                small_shared(t, j);
            } else {
                small_lanes(j >> SMALL_BITS, false, (t & (j >> SMALL_BITS)) == 0u);
            }
        }
        run_slots(SMALL_BITS, false);
    }
    [[unroll]] for (uint r = 0u; r < SMALL_SLOTS; r++) {
        uint i = t * SMALL_SLOTS + r;
        if (base + i < N) {
            keys[first + i] = map_out ? from_image(r_key[r]) : r_key[r];
#ifdef PAIRS
            values[first + i] = r_value[r];
#endif
        }
    }
}

void main() {
    uint base = tile_base();
    if (!tile_live(base)) {
        return;
    }
    small_sort(base);
}
#elif !defined(LOOPING)
void main() {
    uint base = tile_base();
    if (!tile_live(base)) {
        return;
    }
    bool sorted = loads_sorted(base);
    if (sorted) {
        load_sorted(base);
    } else {
        load_tile(base);
    }
    sort_tile(sorted);
    store_tile(base);
}
#else
void main() {
    bool map = (pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u;
    uint tiles = (N + TILE - 1u) / TILE;
    uint full = N / TILE;
    // The loop's stride; never 0 in this form (max() keeps a wrong push constant from hanging).
    uint stride = max(pc.loop_stride, 1u);
    uint t = gl_WorkGroupID.x + pc.group_offset;
    if (AHEAD_FITS && t < full) {
        load_ahead(t * TILE);
    }
    for (; t < tiles; t += stride) {
        uint base = t * TILE;
        bool sorted = false;
        if (AHEAD_FITS && t < full) {
            if (loads_sorted(base)) {
                // The tile held in r_ahead, its register stages run on the way in.
                [[unroll]] for (uint r = 0u; r < LOAD_SLOTS; r++) {
                    if (r < SLOTS) {
                        r_key[r] = r_ahead[r];
#ifdef ORIGINS
                        r_held[r] = r_ahead_value[r];
                        r_value[r] = r * WG_SIZE + gl_LocalInvocationID.x;
#elif defined(PAIRS)
                        r_value[r] = r_ahead_value[r];
#endif
                    }
                }
                store_sorted(map);
                sorted = true;
            } else {
                store_ahead(map);
            }
        } else {
            // A partial last tile (padded by load_tile), or tiles too large for the registers.
            load_tile(base);
        }
        uint next = t + stride;
        if (AHEAD_FITS && next < full) {
            load_ahead(next * TILE);
        }
        sort_tile(sorted);
        store_tile(base);
        // Every invocation has read this tile out of shared memory before the next goes in.
        barrier();
    }
}
#endif
