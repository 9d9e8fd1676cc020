/* Every error path of the C API, from C: each call returns its code and a message, records
 * nothing, and the next valid call works (a real sort at the end is checked against qsort).
 * Built with the test hook that panics inside the library (bvk_test_panic). */
#include <string.h>

#include "util.h"

static BvkRecorder *good_recorder;
static BvkBinding *good_binding;

/* After an error: a valid call succeeds and clears the message. */
static void valid_call_works(const char *after) {
  uint32_t passes = 0;
  BvkResult r = bvk_sort_passes(good_recorder, good_binding, 1000, BVK_KEY_U32, BVK_ORDER_ASCENDING, &passes);
  CHECK(r == BVK_SUCCESS && passes > 0, "after %s, a valid call returned %s", after, bvk_result_name(r));
  CHECK(bvk_last_error_message(NULL, 0) == 0, "after %s, a success left a message", after);
}

static int errors_seen;

/* A call that must fail with `expected`, leaving a message. */
#define EXPECT(expected, call) expect((expected), (call), #call, __LINE__)
static void expect(BvkResult expected, BvkResult got, const char *call, int line) {
  char message[1024];
  size_t len = bvk_last_error_message(message, sizeof message);
  if (got != expected) {
    fprintf(stderr, "errors.c:%d: %s returned %s (%d), not %s: %s\n", line, call, bvk_result_name(got), (int)got,
            bvk_result_name(expected), got != BVK_SUCCESS ? message : "");
    exit(1);
  }
  CHECK(len > 0 && len == strlen(message), "line %d: %s left no message", line, call);
  printf("  %-34s %s\n", bvk_result_name(got), message);
  errors_seen++;
  valid_call_works(call);
}

static BvkBufferRegion region(VkBuffer buffer, VkDeviceSize offset, VkDeviceSize size) {
  BvkBufferRegion r = {buffer, offset, size};
  return r;
}

static BvkBindDesc keys_desc(VkBuffer buffer, VkDeviceSize offset, uint32_t capacity) {
  BvkBindDesc d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.keys = region(buffer, offset, (VkDeviceSize)capacity * 4);
  d.capacity = capacity;
  return d;
}

static void recorder_creation(const Gpu *gpu) {
  BvkRecorder *r = NULL;
  BvkRecorderDesc d = recorder_desc(gpu);
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_recorder(NULL, &r));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_recorder(&d, NULL));
  d.struct_size = 0;
  EXPECT(BVK_ERROR_BAD_STRUCT_SIZE, bvk_create_recorder(&d, &r));
  d.struct_size = sizeof d + 8;
  EXPECT(BVK_ERROR_BAD_STRUCT_SIZE, bvk_create_recorder(&d, &r));
  d = recorder_desc(gpu);
  d.get_instance_proc_addr = NULL;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_recorder(&d, &r));
  d = recorder_desc(gpu);
  d.instance = VK_NULL_HANDLE;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_recorder(&d, &r));
  d = recorder_desc(gpu);
  d.physical_device = VK_NULL_HANDLE;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_recorder(&d, &r));
  d = recorder_desc(gpu);
  d.device = VK_NULL_HANDLE;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_recorder(&d, &r));
  d = recorder_desc(gpu);
  d.shader_int16 = 2;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_create_recorder(&d, &r));
  d = recorder_desc(gpu);
  d.full_subgroups = 7;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_create_recorder(&d, &r));
  d = recorder_desc(gpu);
  d.tuning.segment_merges = 3;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_create_recorder(&d, &r));
  /* A knob out of the library's range. */
  d = recorder_desc(gpu);
  d.tuning.max_tile = 3;
  EXPECT(BVK_ERROR_INVALID_OPTION, bvk_create_recorder(&d, &r));
  CHECK(r == NULL, "a failed creation wrote a recorder");
  bvk_destroy_recorder(NULL); /* does nothing */
}

static void binding(const Gpu *gpu, VkBuffer buffer) {
  VkDeviceSize a = gpu->limits.minStorageBufferOffsetAlignment;
  BvkBinding *b = NULL;
  BvkBindDesc d = keys_desc(buffer, 0, 100);
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_bind(NULL, &d, &b));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_bind(good_recorder, NULL, &b));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_bind(good_recorder, &d, NULL));
  d.struct_size = 4;
  EXPECT(BVK_ERROR_BAD_STRUCT_SIZE, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, 100);
  d.key_width = 2;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, 100);
  d.batched = 5;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, 0);
  EXPECT(BVK_ERROR_INVALID_OPTION, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(VK_NULL_HANDLE, 0, 100);
  EXPECT(BVK_ERROR_INVALID_OPTION, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, UINT32_MAX);
  EXPECT(BVK_ERROR_TOO_LARGE, bvk_bind(good_recorder, &d, &b));
  CHECK(a > 1, "minStorageBufferOffsetAlignment is %llu: no offset is misaligned", (unsigned long long)a);
  d = keys_desc(buffer, a / 2, 100);
  EXPECT(BVK_ERROR_MISALIGNED_OFFSET, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, 100);
  d.keys.size = 399;
  EXPECT(BVK_ERROR_BUFFER_TOO_SMALL, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, 100);
  d.key_width = BVK_KEY_WIDTH_64; /* 800 bytes needed, 400 given */
  EXPECT(BVK_ERROR_BUFFER_TOO_SMALL, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, 100);
  d.values = region(buffer, align_up(200, a), 400);
  EXPECT(BVK_ERROR_OVERLAPPING_REGIONS, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, 100);
  d.count = region(buffer, 0, 4);
  EXPECT(BVK_ERROR_OVERLAPPING_REGIONS, bvk_bind(good_recorder, &d, &b));
  d = keys_desc(buffer, 0, 100);
  d.count = region(buffer, align_up(400, a), 2);
  EXPECT(BVK_ERROR_BUFFER_TOO_SMALL, bvk_bind(good_recorder, &d, &b));
  CHECK(b == NULL, "a failed bind wrote a binding");

  /* A recorder of one binding refuses a second. */
  BvkRecorderDesc rd = recorder_desc(gpu);
  rd.max_bindings = 1;
  BvkRecorder *one = NULL;
  BVK_CHECK(bvk_create_recorder(&rd, &one));
  d = keys_desc(buffer, 0, 100);
  BVK_CHECK(bvk_bind(one, &d, &b));
  BvkBinding *second = NULL;
  EXPECT(BVK_ERROR_INVALID_OPTION, bvk_bind(one, &d, &second));

  /* Another recorder's binding, a null one and a pointer that is no binding are refused. */
  uint32_t passes = 0;
  int not_a_binding = 0;
  EXPECT(BVK_ERROR_BAD_BINDING, bvk_sort_passes(good_recorder, b, 100, BVK_KEY_U32, 0, &passes));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_sort_passes(good_recorder, NULL, 100, BVK_KEY_U32, 0, &passes));
  EXPECT(BVK_ERROR_BAD_BINDING,
         bvk_sort_passes(good_recorder, (const BvkBinding *)&not_a_binding, 100, BVK_KEY_U32, 0, &passes));
  EXPECT(BVK_ERROR_BAD_BINDING, bvk_rebind(good_recorder, b, &d));
  bvk_destroy_recorder(one);

  /* A failed rebind leaves the binding as it was (checked by the sort at the end). */
  d = keys_desc(buffer, 0, 100);
  d.keys.size = 4;
  EXPECT(BVK_ERROR_BUFFER_TOO_SMALL, bvk_rebind(good_recorder, good_binding, &d));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_rebind(good_recorder, good_binding, NULL));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_rebind(NULL, good_binding, &d));
}

static void recording(const Gpu *gpu, VkCommandBuffer cmd, uint32_t capacity) {
  BvkRecorder *r = good_recorder;
  BvkBinding *b = good_binding;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_cmd_sort(NULL, cmd, b, capacity, BVK_KEY_U32, BVK_ORDER_ASCENDING));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_cmd_sort(r, VK_NULL_HANDLE, b, capacity, BVK_KEY_U32, BVK_ORDER_ASCENDING));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_cmd_sort(r, cmd, NULL, capacity, BVK_KEY_U32, BVK_ORDER_ASCENDING));
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_cmd_sort(r, cmd, b, capacity, 6, BVK_ORDER_ASCENDING));
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_cmd_sort(r, cmd, b, capacity, UINT32_MAX, BVK_ORDER_ASCENDING));
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_cmd_sort(r, cmd, b, capacity, BVK_KEY_U32, 2));
  EXPECT(BVK_ERROR_KEY_WIDTH_MISMATCH, bvk_cmd_sort(r, cmd, b, capacity, BVK_KEY_F64, BVK_ORDER_ASCENDING));
  EXPECT(BVK_ERROR_OVER_CAPACITY, bvk_cmd_sort(r, cmd, b, capacity + 1, BVK_KEY_U32, BVK_ORDER_ASCENDING));
  EXPECT(BVK_ERROR_INVALID_OPTION, bvk_cmd_sort_batches(r, cmd, b, 10, 0, BVK_KEY_U32, BVK_ORDER_ASCENDING));
  /* The binding is neither batched nor counted. */
  EXPECT(BVK_ERROR_INVALID_OPTION, bvk_cmd_sort_batches(r, cmd, b, 10, 2, BVK_KEY_U32, BVK_ORDER_ASCENDING));
  EXPECT(BVK_ERROR_NULL_POINTER,
         bvk_cmd_sort_timed(r, cmd, b, capacity, BVK_KEY_U32, BVK_ORDER_ASCENDING, VK_NULL_HANDLE, 0));
  VkQueryPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  info.queryCount = 1;
  VkQueryPool queries;
  VK_CHECK(vkCreateQueryPool(gpu->device, &info, NULL, &queries));
  EXPECT(BVK_ERROR_INVALID_OPTION,
         bvk_cmd_sort_timed(r, cmd, b, capacity, BVK_KEY_U32, BVK_ORDER_ASCENDING, queries, UINT32_MAX));
  vkDestroyQueryPool(gpu->device, queries, NULL);
  uint32_t passes;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_sort_passes(r, b, capacity, BVK_KEY_U32, BVK_ORDER_ASCENDING, NULL));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_sort_passes(NULL, b, capacity, BVK_KEY_U32, BVK_ORDER_ASCENDING, &passes));
  EXPECT(BVK_ERROR_OVER_CAPACITY, bvk_sort_passes(r, b, capacity + 1, BVK_KEY_U32, BVK_ORDER_ASCENDING, &passes));
}

static void host_sorts(void) {
  BvkSorter *s = NULL;
  BvkSorterDesc d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_sorter(NULL, &s));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_sorter(&d, NULL));
  d.struct_size = sizeof d - 8;
  EXPECT(BVK_ERROR_BAD_STRUCT_SIZE, bvk_create_sorter(&d, &s));
  d.struct_size = sizeof d;
  d.validation = 3;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_create_sorter(&d, &s));
  d.validation = BVK_VALIDATION_ON;
  d.tuning.tile_origins = 9;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_create_sorter(&d, &s));
  d.tuning.tile_origins = BVK_KNOB_AUTO;
  d.tuning.kernels = 3;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_create_sorter(&d, &s));
  d.tuning.kernels = 0;
  d.tuning.max_fused_substages = 7;
  EXPECT(BVK_ERROR_INVALID_OPTION, bvk_create_sorter(&d, &s));
  d.tuning.max_fused_substages = 0;
  d.pipeline_cache = 3;
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_create_sorter(&d, &s));
  d.pipeline_cache = BVK_PIPELINE_CACHE_AT;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_create_sorter(&d, &s));
  d.pipeline_cache = BVK_PIPELINE_CACHE_OFF;
  d.pipeline_cache_dir = "/tmp";
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_create_sorter(&d, &s));
  d.pipeline_cache_dir = NULL;
  d.device = "no device is called this";
  EXPECT(BVK_ERROR_NO_SUCH_DEVICE, bvk_create_sorter(&d, &s));
  CHECK(s == NULL, "a failed creation wrote a sorter");
  d.device = NULL;
  BVK_CHECK(bvk_create_sorter(&d, &s));

  uint64_t keys[9] = {5, 3, 9, 1, 7, 2, 8, 6, 4};
  uint32_t values[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_sort(NULL, keys, NULL, 8, BVK_KEY_U64, BVK_ORDER_ASCENDING, NULL));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_sort(s, NULL, NULL, 8, BVK_KEY_U64, BVK_ORDER_ASCENDING, NULL));
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_sort(s, keys, NULL, 8, 9, BVK_ORDER_ASCENDING, NULL));
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_sort(s, keys, NULL, 8, BVK_KEY_U64, 5, NULL));
  /* 8-byte keys 4 bytes into an array: misaligned. */
  EXPECT(BVK_ERROR_BAD_ARRAY, bvk_sort(s, (unsigned char *)keys + 4, NULL, 8, BVK_KEY_U64, 0, NULL));
  EXPECT(BVK_ERROR_BAD_ARRAY, bvk_sort(s, keys, (uint32_t *)keys + 2, 8, BVK_KEY_U32, 0, NULL));
  EXPECT(BVK_ERROR_BAD_ENUM, bvk_sort_stable(s, keys, values, 8, BVK_KEY_U64, BVK_ORDER_ASCENDING, NULL));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_sort_stable(s, keys, NULL, 8, BVK_KEY_U32, BVK_ORDER_ASCENDING, NULL));
  BvkSortStats stats;
  memset(&stats, 0, sizeof stats);
  EXPECT(BVK_ERROR_BAD_STRUCT_SIZE, bvk_sort(s, keys, NULL, 8, BVK_KEY_U64, BVK_ORDER_ASCENDING, &stats));
  uint32_t count;
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_sorter_validation_errors(NULL, &count));
  EXPECT(BVK_ERROR_NULL_POINTER, bvk_sorter_validation_errors(s, NULL));
  /* None of the above touched the arrays; a valid sort then works. */
  CHECK(keys[0] == 5 && keys[8] == 4 && values[8] == 8, "a failed sort wrote the arrays");
  uint64_t input[9];
  memcpy(input, keys, sizeof keys);
  stats.struct_size = sizeof stats;
  BVK_CHECK(bvk_sort(s, keys, values, 9, BVK_KEY_U64, BVK_ORDER_DESCENDING, &stats));
  check_sorted("a host sort after the errors", BVK_KEY_U64, BVK_ORDER_DESCENDING, input, keys, values, 9, 0);
  CHECK(stats.count == 9, "stats.count %llu", (unsigned long long)stats.count);
  BVK_CHECK(bvk_sorter_validation_errors(s, &count));
  CHECK(count == 0, "the sorter's validation layer reported %u error(s)", count);
  bvk_destroy_sorter(s);
  bvk_destroy_sorter(NULL);
}

static void messages_panics_and_names(void) {
  EXPECT(BVK_ERROR_PANIC, bvk_test_panic());
  char message[256];
  bvk_test_panic();
  bvk_last_error_message(message, sizeof message);
  CHECK(strstr(message, "bvk_test_panic was called") != NULL, "the panic's message: %s", message);
  /* snprintf's contract: the whole length back, at most size - 1 bytes and a NUL written. */
  size_t len = bvk_last_error_message(NULL, 0);
  CHECK(len == strlen(message), "length %zu for a message of %zu", len, strlen(message));
  char small[8];
  memset(small, 'x', sizeof small);
  CHECK(bvk_last_error_message(small, sizeof small) == len, "a short buffer changed the length");
  CHECK(memcmp(small, message, 7) == 0 && small[7] == '\0', "a short buffer holds %.8s", small);
  small[0] = 'x';
  CHECK(bvk_last_error_message(small, 1) == len && small[0] == '\0', "a buffer of 1 byte");
  valid_call_works("the panics");
  CHECK(strcmp(bvk_result_name(BVK_ERROR_OVER_CAPACITY), "BVK_ERROR_OVER_CAPACITY") == 0, "a code's name");
  CHECK(strcmp(bvk_result_name(VK_ERROR_OUT_OF_DEVICE_MEMORY), "a VkResult error code") == 0, "a VkResult's name");
  CHECK(strcmp(bvk_result_name(4242), "not a BvkResult") == 0, "an unknown code's name");
  CHECK(bvk_version() == BVK_VERSION, "the library is %x, the header %x", bvk_version(), BVK_VERSION);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0); /* in order with the library's and the layer's stderr */
  Gpu gpu;
  gpu_open(&gpu, 1);
  enum { CAPACITY = 1000 };
  VkDeviceSize a = gpu.limits.minStorageBufferOffsetAlignment;
  VkDeviceSize size = align_up(CAPACITY * 4, a) + CAPACITY * 4;
  Buffer staging = host_buffer(&gpu, size), storage = storage_buffer(&gpu, size), readback = host_buffer(&gpu, size);
  BvkRecorderDesc rd = recorder_desc(&gpu);
  BVK_CHECK(bvk_create_recorder(&rd, &good_recorder));
  BvkBindDesc d = keys_desc(storage.buffer, 0, CAPACITY);
  d.values = region(storage.buffer, align_up(CAPACITY * 4, a), CAPACITY * 4);
  BVK_CHECK(bvk_bind(good_recorder, &d, &good_binding));

  printf("recorder creation:\n");
  recorder_creation(&gpu);
  printf("binding:\n");
  binding(&gpu, storage.buffer);
  printf("host sorts:\n");
  host_sorts();
  printf("messages and panics:\n");
  messages_panics_and_names();

  /* Recording errors go into a command buffer that then sorts for real: they recorded nothing. */
  uint64_t random = 5;
  fill_keys(BVK_KEY_F32, staging.mapped, CAPACITY, &random);
  uint32_t *values = (uint32_t *)(staging.mapped + d.values.offset);
  for (uint32_t i = 0; i < CAPACITY; i++) values[i] = i;
  VkCommandPool pool;
  VkCommandBuffer cmd = commands_begin(&gpu, &pool);
  VkBufferCopy whole = {0, 0, size};
  vkCmdCopyBuffer(cmd, staging.buffer, storage.buffer, 1, &whole);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  printf("recording:\n");
  recording(&gpu, cmd, CAPACITY);
  BVK_CHECK(bvk_cmd_sort(good_recorder, cmd, good_binding, CAPACITY, BVK_KEY_F32, BVK_ORDER_DESCENDING));
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT);
  vkCmdCopyBuffer(cmd, storage.buffer, readback.buffer, 1, &whole);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
  commands_finish(&gpu, pool, cmd);
  check_sorted("a recorded sort after the errors", BVK_KEY_F32, BVK_ORDER_DESCENDING, staging.mapped,
               readback.mapped, (const uint32_t *)(readback.mapped + d.values.offset), CAPACITY, 0);

  bvk_destroy_recorder(good_recorder);
  buffer_free(&gpu, &staging);
  buffer_free(&gpu, &storage);
  buffer_free(&gpu, &readback);
  gpu_close(&gpu);
  printf("errors: %d error paths, each its code and message, each followed by a valid call; then a sort as "
         "qsort's\n", errors_seen);
  return 0;
}
