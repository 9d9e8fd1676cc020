/* A renderer's use of the C API: its own instance (validation on), device, buffers and command
 * buffers; keys and values uploaded through a staging copy, element counts written on the GPU by
 * vkCmdUpdateBuffer; sorts recorded with bvk_cmd_sort and its kin between the contract's barriers;
 * everything read back and checked against qsort, elements past each count against the input. */
#include <string.h>

#include "util.h"

/* Places regions one after another in one buffer, each at the device's offset alignment. */
typedef struct Layout {
  VkDeviceSize end, alignment;
} Layout;

static VkDeviceSize place(Layout *layout, VkDeviceSize bytes) {
  VkDeviceSize at = align_up(layout->end, layout->alignment);
  layout->end = at + bytes;
  return at;
}

/* One sort's regions in the shared buffers, its input and its binding. */
typedef struct Sort {
  uint32_t key_type, order, capacity, count;
  int pairs;
  VkDeviceSize keys, values, count_at;
  BvkBinding *binding;
} Sort;

/* The staging, device and read-back buffers of a set of sorts. */
typedef struct Buffers {
  Buffer staging, storage, readback;
} Buffers;

static Buffers buffers_new(const Gpu *gpu, VkDeviceSize size) {
  Buffers b = {host_buffer(gpu, size), storage_buffer(gpu, size), host_buffer(gpu, size)};
  return b;
}

static void buffers_free(const Gpu *gpu, Buffers *b) {
  buffer_free(gpu, &b->staging);
  buffer_free(gpu, &b->storage);
  buffer_free(gpu, &b->readback);
}

/* Places a sort's regions. */
static void lay_out(Sort *s, Layout *layout) {
  size_t w = key_bytes(s->key_type);
  s->keys = place(layout, (VkDeviceSize)s->capacity * w);
  s->values = s->pairs ? place(layout, (VkDeviceSize)s->capacity * 4) : 0;
  s->count_at = s->count ? place(layout, 4) : 0;
}

/* Writes a sort's input into the staging buffer: keys, and values that are each key's index. */
static void write_input(const Sort *s, const Buffers *b, uint64_t *random) {
  fill_keys(s->key_type, b->staging.mapped + s->keys, s->capacity, random);
  if (!s->pairs) return;
  uint32_t *values = (uint32_t *)(b->staging.mapped + s->values);
  for (uint32_t i = 0; i < s->capacity; i++) values[i] = i;
}

static BvkBufferRegion region(VkBuffer buffer, VkDeviceSize offset, VkDeviceSize size) {
  BvkBufferRegion r = {buffer, offset, size};
  return r;
}

static BvkBindDesc bind_desc(const Sort *s, VkBuffer buffer, VkBool32 batched) {
  BvkBindDesc d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.keys = region(buffer, s->keys, (VkDeviceSize)s->capacity * key_bytes(s->key_type));
  if (s->pairs) d.values = region(buffer, s->values, (VkDeviceSize)s->capacity * 4);
  if (s->count) d.count = region(buffer, s->count_at, 4);
  d.capacity = s->capacity;
  d.key_width = key_bytes(s->key_type) == 8 ? BVK_KEY_WIDTH_64 : BVK_KEY_WIDTH_32;
  d.batched = batched;
  return d;
}

/* Records the upload: the whole staging buffer copied into place, then each sort's count written
 * on the GPU, then the contract's "before" barrier. */
static void record_upload(VkCommandBuffer cmd, const Buffers *b, const Sort *sorts, int n_sorts) {
  VkBufferCopy whole = {0, 0, b->storage.size};
  vkCmdCopyBuffer(cmd, b->staging.buffer, b->storage.buffer, 1, &whole);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_WRITE_BIT);
  for (int i = 0; i < n_sorts; i++) {
    if (sorts[i].count) vkCmdUpdateBuffer(cmd, b->storage.buffer, sorts[i].count_at, 4, &sorts[i].count);
  }
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

/* Records the contract's "after" barrier and the copy of everything into the read-back buffer. */
static void record_download(VkCommandBuffer cmd, const Buffers *b) {
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT);
  VkBufferCopy whole = {0, 0, b->storage.size};
  vkCmdCopyBuffer(cmd, b->storage.buffer, b->readback.buffer, 1, &whole);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
}

/* Checks a sort of the first `sorted` elements of `s` (in arrays of `len`): each array against
 * qsort's, and every element from `sorted` to the capacity as the input had it. */
static void check_sort(const char *what, const Sort *s, const Buffers *b, uint32_t len, uint32_t sorted) {
  size_t w = key_bytes(s->key_type);
  const unsigned char *in = b->staging.mapped, *out = b->readback.mapped;
  for (uint32_t first = 0; first < sorted; first += len) {
    const uint32_t *values = s->pairs ? (const uint32_t *)(out + s->values) + first : NULL;
    if (values) {
      /* The values are indices into the whole region; the reference numbers each array from 0. */
      uint32_t *local = malloc((size_t)len * 4);
      CHECK(local != NULL, "out of memory");
      for (uint32_t i = 0; i < len; i++) local[i] = values[i] - first;
      check_sorted(what, s->key_type, s->order, in + s->keys + first * w, out + s->keys + first * w, local, len, 0);
      free(local);
    } else {
      check_sorted(what, s->key_type, s->order, in + s->keys + first * w, out + s->keys + first * w, NULL, len, 0);
    }
  }
  size_t rest = (size_t)(s->capacity - sorted);
  CHECK(memcmp(in + s->keys + sorted * w, out + s->keys + sorted * w, rest * w) == 0,
        "%s: keys past the %u sorted were written", what, sorted);
  CHECK(!s->pairs || memcmp(in + s->values + sorted * 4, out + s->values + sorted * 4, rest * 4) == 0,
        "%s: values past the %u sorted were written", what, sorted);
}

/* Pairs of u32, f32, u64 and i64 keys in both orders, each through a GPU-side count below its
 * binding's capacity, all eight recorded into one command buffer. */
static void counted_pairs_of_each_type_and_order(const Gpu *gpu, BvkRecorder *recorder, Layout layout) {
  enum { CAPACITY = 3000, COUNT = 2345 };
  const uint32_t types[] = {BVK_KEY_U32, BVK_KEY_F32, BVK_KEY_U64, BVK_KEY_I64};
  Sort sorts[8];
  uint64_t random = 1;
  for (int i = 0; i < 8; i++) {
    Sort s = {types[i / 2], (uint32_t)(i % 2), CAPACITY, COUNT, 1, 0, 0, 0, NULL};
    lay_out(&s, &layout);
    sorts[i] = s;
  }
  Buffers b = buffers_new(gpu, layout.end);
  for (int i = 0; i < 8; i++) {
    write_input(&sorts[i], &b, &random);
    BvkBindDesc desc = bind_desc(&sorts[i], b.storage.buffer, VK_FALSE);
    BVK_CHECK(bvk_bind(recorder, &desc, &sorts[i].binding));
  }
  VkCommandPool pool;
  VkCommandBuffer cmd = commands_begin(gpu, &pool);
  record_upload(cmd, &b, sorts, 8);
  for (int i = 0; i < 8; i++) {
    /* n is the capacity: the count alone bounds the sort. */
    BVK_CHECK(bvk_cmd_sort(recorder, cmd, sorts[i].binding, CAPACITY, sorts[i].key_type, sorts[i].order));
  }
  record_download(cmd, &b);
  commands_finish(gpu, pool, cmd);
  for (int i = 0; i < 8; i++) check_sort("a counted sort of pairs", &sorts[i], &b, COUNT, COUNT);
  buffers_free(gpu, &b);
  printf("ok: pairs of u32, f32, u64, i64 keys, both orders, %d of %d through GPU-side counts\n", COUNT, CAPACITY);
}

/* 2^16 f32 pairs through a GPU-side count in a larger binding, a timestamp after each pass. */
static void pairs_of_2_16_through_a_count(const Gpu *gpu, BvkRecorder *recorder, Layout layout) {
  enum { CAPACITY = 65536 + 1000, COUNT = 65536 };
  uint64_t random = 2;
  Sort s = {BVK_KEY_F32, BVK_ORDER_ASCENDING, CAPACITY, COUNT, 1, 0, 0, 0, NULL};
  lay_out(&s, &layout);
  Buffers b = buffers_new(gpu, layout.end);
  write_input(&s, &b, &random);
  BvkBindDesc desc = bind_desc(&s, b.storage.buffer, VK_FALSE);
  BVK_CHECK(bvk_bind(recorder, &desc, &s.binding));
  uint32_t passes = 0;
  BVK_CHECK(bvk_sort_passes(recorder, s.binding, CAPACITY, s.key_type, s.order, &passes));
  CHECK(passes > 1, "a sort of %u takes %u passes", CAPACITY, passes);
  VkQueryPool queries = VK_NULL_HANDLE;
  int timed = gpu->timestamp_bits > 0;
  VkCommandPool pool;
  VkCommandBuffer cmd = commands_begin(gpu, &pool);
  if (timed) {
    VkQueryPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = 1 + passes;
    VK_CHECK(vkCreateQueryPool(gpu->device, &info, NULL, &queries));
    vkCmdResetQueryPool(cmd, queries, 0, 1 + passes);
  }
  record_upload(cmd, &b, &s, 1);
  if (timed) {
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries, 0);
    BVK_CHECK(bvk_cmd_sort_timed(recorder, cmd, s.binding, CAPACITY, s.key_type, s.order, queries, 1));
  } else {
    BVK_CHECK(bvk_cmd_sort(recorder, cmd, s.binding, CAPACITY, s.key_type, s.order));
  }
  record_download(cmd, &b);
  commands_finish(gpu, pool, cmd);
  check_sort("2^16 pairs through a count", &s, &b, COUNT, COUNT);
  double ms = 0;
  if (timed) {
    uint64_t stamps[64];
    CHECK(passes + 1 <= 64, "%u passes", passes);
    VK_CHECK(vkGetQueryPoolResults(gpu->device, queries, 0, 1 + passes, sizeof stamps, stamps, 8,
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    for (uint32_t i = 1; i <= passes; i++) {
      CHECK(stamps[i] >= stamps[i - 1], "the timestamp after pass %u is before the one before it", i - 1);
    }
    ms = (double)(stamps[passes] - stamps[0]) * gpu->limits.timestampPeriod / 1e6;
    vkDestroyQueryPool(gpu->device, queries, NULL);
  }
  buffers_free(gpu, &b);
  printf("ok: 2^16 f32 pairs through a GPU-side count (binding of %d): sorted as qsort, %u passes, %.1f ms of "
         "GPU time\n", CAPACITY, passes, ms);
}

/* i64 keys alone in 4 arrays of 500 sorted as one batch; then the binding moved (bvk_rebind) to a
 * region of u64 keys of which the first 1200 of 1500 are sorted, n given by the host. */
static void batches_then_a_rebind(const Gpu *gpu, BvkRecorder *recorder, Layout layout) {
  enum { LEN = 500, BATCHES = 4, CAPACITY = 1500, N = 1200 };
  uint64_t random = 3;
  Sort batched = {BVK_KEY_I64, BVK_ORDER_DESCENDING, LEN * BATCHES, 0, 0, 0, 0, 0, NULL};
  Sort moved = {BVK_KEY_U64, BVK_ORDER_ASCENDING, CAPACITY, 0, 0, 0, 0, 0, NULL};
  lay_out(&batched, &layout);
  lay_out(&moved, &layout);
  Buffers b = buffers_new(gpu, layout.end);
  write_input(&batched, &b, &random);
  write_input(&moved, &b, &random);
  BvkBindDesc desc = bind_desc(&batched, b.storage.buffer, VK_TRUE);
  BVK_CHECK(bvk_bind(recorder, &desc, &batched.binding));
  VkCommandPool pool;
  VkCommandBuffer cmd = commands_begin(gpu, &pool);
  record_upload(cmd, &b, NULL, 0);
  BVK_CHECK(bvk_cmd_sort_batches(recorder, cmd, batched.binding, LEN, BATCHES, batched.key_type, batched.order));
  commands_finish(gpu, pool, cmd);

  /* The first command buffer has finished: the binding may move. */
  desc = bind_desc(&moved, b.storage.buffer, VK_FALSE);
  BVK_CHECK(bvk_rebind(recorder, batched.binding, &desc));
  cmd = commands_begin(gpu, &pool);
  BVK_CHECK(bvk_cmd_sort(recorder, cmd, batched.binding, N, moved.key_type, moved.order));
  record_download(cmd, &b);
  commands_finish(gpu, pool, cmd);
  check_sort("a batch of i64 keys", &batched, &b, LEN, LEN * BATCHES);
  check_sort("u64 keys through a moved binding", &moved, &b, N, N);
  buffers_free(gpu, &b);
  printf("ok: a batch of %d arrays of %d i64 keys; then %d of %d u64 keys through the binding moved\n", BATCHES,
         LEN, N, CAPACITY);
}

/* A recorder with tiles of 16 and every merge a segment pass (BvkTuning): a counted sort of pairs
 * takes more passes than through the default recorder, and sorts as qsort. */
static void tuned_tiles(const Gpu *gpu, BvkRecorder *plain, Layout layout) {
  enum { CAPACITY = 3000, COUNT = 2999 };
  BvkRecorderDesc desc = recorder_desc(gpu);
  desc.tuning.max_tile = 16;
  desc.tuning.segment_merges = BVK_KNOB_ON;
  BvkRecorder *recorder = NULL;
  BVK_CHECK(bvk_create_recorder(&desc, &recorder));
  uint64_t random = 6;
  Sort s = {BVK_KEY_I32, BVK_ORDER_DESCENDING, CAPACITY, COUNT, 1, 0, 0, 0, NULL};
  lay_out(&s, &layout);
  Buffers b = buffers_new(gpu, layout.end);
  write_input(&s, &b, &random);
  BvkBindDesc bind = bind_desc(&s, b.storage.buffer, VK_FALSE);
  BvkBinding *plain_binding = NULL;
  BVK_CHECK(bvk_bind(recorder, &bind, &s.binding));
  BVK_CHECK(bvk_bind(plain, &bind, &plain_binding));
  uint32_t tuned_passes = 0, plain_passes = 0;
  BVK_CHECK(bvk_sort_passes(recorder, s.binding, CAPACITY, s.key_type, s.order, &tuned_passes));
  BVK_CHECK(bvk_sort_passes(plain, plain_binding, CAPACITY, s.key_type, s.order, &plain_passes));
  CHECK(tuned_passes > plain_passes, "tiles of 16 take %u passes, the default tiles %u", tuned_passes, plain_passes);
  VkCommandPool pool;
  VkCommandBuffer cmd = commands_begin(gpu, &pool);
  record_upload(cmd, &b, &s, 1);
  BVK_CHECK(bvk_cmd_sort(recorder, cmd, s.binding, CAPACITY, s.key_type, s.order));
  record_download(cmd, &b);
  commands_finish(gpu, pool, cmd);
  check_sort("pairs in tiles of 16", &s, &b, COUNT, COUNT);
  buffers_free(gpu, &b);
  bvk_destroy_recorder(recorder);
  printf("ok: %d of %d i32 pairs through a count in tiles of 16, segment passes: %u passes (%u with the default "
         "tiles)\n", COUNT, CAPACITY, tuned_passes, plain_passes);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0); /* in order with the library's and the layer's stderr */
  Gpu gpu;
  gpu_open(&gpu, 1);
  BvkRecorderDesc desc = recorder_desc(&gpu);
  BvkRecorder *recorder = NULL;
  BVK_CHECK(bvk_create_recorder(&desc, &recorder));
  /* Regions start past byte 0 of their buffers, at the device's alignment (8 at least, for 8-byte
   * keys). */
  VkDeviceSize alignment = gpu.limits.minStorageBufferOffsetAlignment;
  Layout layout = {100, alignment > 8 ? alignment : 8};
  counted_pairs_of_each_type_and_order(&gpu, recorder, layout);
  pairs_of_2_16_through_a_count(&gpu, recorder, layout);
  batches_then_a_rebind(&gpu, recorder, layout);
  tuned_tiles(&gpu, recorder, layout);
  bvk_destroy_recorder(recorder);
  gpu_close(&gpu);
  printf("renderer: every sort as qsort's, no validation error\n");
  return 0;
}
