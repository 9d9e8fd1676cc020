// tile.glsl: the shared-memory tile of the local kernels (tile_sort, local_merge, segment_merge)
// and the moves between it and the buffers, LOADS elements per invocation at a time (the host
// keeps WG_SIZE <= TILE, so a batch lies inside the tile). A workgroup's tile holds TILE
// elements: consecutive ones, or a segment pass's coset. The kernel says which with local_element,
// the element offset of local index i, linear over GF(2): the element of local index
// i0 + r * WG_SIZE + lid is lid_element ^ local_element(i0) ^ local_element(r * WG_SIZE).
//
// Padding: an element at index N or past is virtual, +infinity: never read or written, KEY_MAX in
// registers and shared memory. Every comparator puts the smaller image at the lower index and
// moves nothing on a tie, and virtual elements sit above every real one, so a virtual KEY_MAX
// never moves below a real key, even one whose image is KEY_MAX: a partial tile runs the full
// tile's network and nothing real is lost.

shared KEY s_keys[TILE];
VALUES(shared uint s_values[TILE];)

// Where local index i lives in shared memory: XOR-swizzled within rows of 32 words, so that
// invocations reading groups of consecutive elements hit different banks. Linear, as the element
// maps are: a chunk's addresses are XORs of its vectors' swizzles.
uint swizzle(uint i) {
    return i ^ ((i >> 5) & 31u);
}

uint local_element(uint i);

// local_element(r * WG_SIZE) for each slot of a batch; this invocation's local_element(lid); the
// OR of the tile's vectors, so that every element of a tile is at most its element 0 OR span_bits.
// Set once per invocation.
uint slot_elements[16];
uint lid_offset;
uint span_bits;

void set_slot_elements() {
    [[unroll]] for (uint r = 0u; r < LOADS; r++) {
        slot_elements[r] = local_element(r * WG_SIZE);
    }
    lid_offset = local_element(gl_LocalInvocationID.x);
    span_bits = 0u;
    [[dont_unroll]] for (uint b = 1u; b < TILE; b <<= 1u) {
        span_bits |= local_element(b);
    }
}

// Whether every element of the tile holding lid_element is real, the same across the workgroup:
// then its batches move without a bound test per element.
bool tile_whole(uint lid_element) {
    return ((lid_element ^ lid_offset) | span_bits) < N;
}

// Local indices i0 + r * WG_SIZE + lid (r < LOADS) into slots 0..LOADS-1, every load issued before
// the first is used; KEY_MAX for a virtual element. Keys become images where the pass maps them.
void load_batch(uint lid_element, uint i0) {
    bool map = (pc.flags & FLAG_TO_IMAGE_ON_LOAD) != 0u;
    uint first = batch_base();
    uint e0 = lid_element ^ local_element(i0);
    if (tile_whole(lid_element)) {
        [[unroll]] for (uint r = 0u; r < LOADS; r++) {
            uint e = e0 ^ slot_elements[r];
            KEY k = keys[first + e];
            r_key[r] = map ? to_image(k) : k;
            VALUES(r_value[r] = values[first + e];)
        }
        return;
    }
    [[unroll]] for (uint r = 0u; r < LOADS; r++) {
        uint e = e0 ^ slot_elements[r];
        r_key[r] = KEY_MAX;
        VALUES(r_value[r] = 0u;)
        if (e < N) {
            KEY k = keys[first + e];
            r_key[r] = map ? to_image(k) : k;
            VALUES(r_value[r] = values[first + e];)
        }
    }
}

// Slots 0..LOADS-1 back to their real elements, as keys where the pass stores keys.
void store_batch(uint lid_element, uint i0) {
    bool map = stores_keys();
    uint first = batch_base();
    uint e0 = lid_element ^ local_element(i0);
    if (tile_whole(lid_element)) {
        [[unroll]] for (uint r = 0u; r < LOADS; r++) {
            uint e = e0 ^ slot_elements[r];
            keys[first + e] = map ? from_image(r_key[r]) : r_key[r];
            VALUES(values[first + e] = r_value[r];)
        }
        return;
    }
    [[unroll]] for (uint r = 0u; r < LOADS; r++) {
        uint e = e0 ^ slot_elements[r];
        if (e < N) {
            keys[first + e] = map ? from_image(r_key[r]) : r_key[r];
            VALUES(values[first + e] = r_value[r];)
        }
    }
}

void batch_to_shared(uint i0) {
    [[unroll]] for (uint r = 0u; r < LOADS; r++) {
        uint i = i0 + r * WG_SIZE + gl_LocalInvocationID.x;
        s_keys[swizzle(i)] = r_key[r];
        VALUES(s_values[swizzle(i)] = r_value[r];)
    }
}

void batch_from_shared(uint i0) {
    [[unroll]] for (uint r = 0u; r < LOADS; r++) {
        uint i = i0 + r * WG_SIZE + gl_LocalInvocationID.x;
        r_key[r] = s_keys[swizzle(i)];
        VALUES(r_value[r] = s_values[swizzle(i)];)
    }
}

// The whole tile into shared memory, then a barrier.
void load_tile(uint lid_element) {
    [[dont_unroll]] for (uint i0 = 0u; i0 < TILE; i0 += LOADS * WG_SIZE) {
        load_batch(lid_element, i0);
        batch_to_shared(i0);
    }
    barrier();
}

void store_tile(uint lid_element) {
    [[dont_unroll]] for (uint i0 = 0u; i0 < TILE; i0 += LOADS * WG_SIZE) {
        batch_from_shared(i0);
        store_batch(lid_element, i0);
    }
}

// The looping kernels load their next tile into registers before they run this one, so that the
// loads are in flight while the chunks run; where one batch holds a tile.
const bool AHEAD_FITS = TILE <= LOADS * WG_SIZE;
KEY r_ahead[16];
VALUES(uint r_ahead_value[16];)

void load_ahead(uint lid_element) {
    load_batch(lid_element, 0u);
    [[unroll]] for (uint r = 0u; r < LOADS; r++) {
        r_ahead[r] = r_key[r];
        VALUES(r_ahead_value[r] = r_value[r];)
    }
}

// The tile load_ahead holds into shared memory, then a barrier.
void store_ahead() {
    [[unroll]] for (uint r = 0u; r < LOADS; r++) {
        r_key[r] = r_ahead[r];
        VALUES(r_value[r] = r_ahead_value[r];)
    }
    batch_to_shared(0u);
    barrier();
}
