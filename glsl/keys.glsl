// keys.glsl: what every sorting kernel shares: the interface generated from src/abi/table.rs, the
// key type and its order image, the element buffers, the element count and the batch offset.
// Defines read: KEY64 (8-byte keys, held as uvec2: x the low word, y the high), PAIRS (u32 values
// move with the keys), ELEMENT_QUALIFIER (a kernel's qualifier for the element buffers).
//
// Kernels compare order images: unsigned values whose order is the key order. The first pass of a
// sort maps keys to images and the last maps them back, so no pass compares floats (drivers may
// flush subnormals, ignore the sign of zero or assume there is no NaN), and no device needs
// shaderInt64.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "interface.glsl"

const uint SIGN = 0x80000000u;

#ifdef KEY64
#define KEY uvec2
#define KEY_MAX uvec2(0xFFFFFFFFu)
// a > b as u64: a select of two comparisons, where || and && would branch per comparator.
bool key_greater(KEY a, KEY b) {
    return mix(a.x > b.x, a.y > b.y, a.y != b.y);
}
// The mask that maps a key of kind `kind` whose sign is `fill` (all ones when negative) to its
// ascending image and back: i64 flips the sign, f64 negatives flip every bit, positives the sign.
KEY kind_mask(uint kind, uint fill) {
    return kind == KEY_F32 ? uvec2(fill, fill | SIGN) : uvec2(0u, kind == KEY_I32 ? SIGN : 0u);
}
uint high_word(KEY k) {
    return k.y;
}
#else
#define KEY uint
#define KEY_MAX 0xFFFFFFFFu
bool key_greater(KEY a, KEY b) {
    return a > b;
}
KEY kind_mask(uint kind, uint fill) {
    return kind == KEY_F32 ? fill | SIGN : (kind == KEY_I32 ? SIGN : 0u);
}
uint high_word(KEY k) {
    return k;
}
#endif

#ifndef ELEMENT_QUALIFIER
#define ELEMENT_QUALIFIER
#endif
layout(std430, set = 0, binding = 0) ELEMENT_QUALIFIER buffer Keys { KEY keys[]; };
// VALUES(statements): statements about values, compiled only where values move with the keys.
#ifdef PAIRS
#define VALUES(statements) statements
layout(std430, set = 0, binding = 1) ELEMENT_QUALIFIER buffer Values { uint values[]; };
#else
#define VALUES(statements)
#endif
// The GPU-side count, read where COUNTED is set; a binding without one points it at a buffer of
// the recorder's that is never read.
layout(std430, set = 0, binding = 2) readonly buffer Count { uint count_word; };

// Elements in this sort: pc.n, or with COUNTED the GPU-side count clamped to it. Indices at or past
// N are virtual +infinity keys: never read or written, KEY_MAX wherever a kernel holds one.
uint sort_count() {
    return COUNTED ? min(count_word, pc.n) : pc.n;
}
#define N sort_count()

// Whether this pass stores keys rather than images: the sort's last pass, or with a GPU-side count
// the last pass that count needs (the later ones dispatch no workgroups).
bool stores_keys() {
    return stores_keys(pc.flags, COUNTED ? 1u : 0u, N) != 0u;
}

// With BATCHED, workgroup row y sorts its own array of pc.n elements from element y * pc.n.
uint batch_base() {
    return BATCHED ? gl_WorkGroupID.y * pc.n : 0u;
}

uint descending_mask() {
    return (pc.flags & FLAG_DESCENDING) != 0u ? 0xFFFFFFFFu : 0u;
}

// Key bits -> order image (floats in IEEE total order, as f32::total_cmp), complemented for a
// descending sort: one XOR mask, no branch.
KEY to_image(KEY bits) {
    uint fill = uint(int(high_word(bits)) >> 31);
    return bits ^ kind_mask(pc.flags & KEY_KIND_MASK, fill) ^ KEY(descending_mask());
}

// Order image -> key bits, the inverse of to_image: a float's image has its sign bit set where
// the key is positive.
KEY from_image(KEY image) {
    KEY bits = image ^ KEY(descending_mask());
    uint fill = ~uint(int(high_word(bits)) >> 31);
    return bits ^ kind_mask(pc.flags & KEY_KIND_MASK, fill);
}
