/* Times u32 pairs sorted through the C API as `bitonic-vk bench --time-from transfer` times the
 * Rust sorter's: each sort copies the input into place, and its time runs from the end of that
 * copy to the end of its last pass, sorts back to back in one command buffer after as many
 * warm-up sorts; prints the median and the minimum. The binding is the one the Rust sorter makes
 * for a sort of n (capacity n, no count, not batched), on a device made with the same features,
 * so both run the same kernels.
 *   usage: bench [n (default 2^20)] [sorts (default 20)] */
#include <string.h>

#include "util.h"

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* One sort as the Rust bench records it: the input copied into place (after the previous sort's
 * passes), a timestamp at the copy's end, the "before" barrier, the sort, a timestamp at its end. */
static void record_sort(VkCommandBuffer cmd, BvkRecorder *recorder, BvkBinding *binding, uint32_t n,
                        VkBuffer pristine, VkBuffer work, VkDeviceSize bytes, VkQueryPool queries, int query) {
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
  VkBufferCopy whole = {0, 0, bytes};
  vkCmdCopyBuffer(cmd, pristine, work, 1, &whole);
  if (query >= 0) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, queries, (uint32_t)query);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  BVK_CHECK(bvk_cmd_sort(recorder, cmd, binding, n, BVK_KEY_U32, BVK_ORDER_ASCENDING));
  if (query >= 0) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries, (uint32_t)query + 1);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 1u << 20;
  uint32_t sorts = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 0) : 20;
  CHECK(n >= 2 && sorts >= 1 && sorts <= 1000, "usage: bench [n >= 2] [sorts 1 to 1000]");
  Gpu gpu;
  gpu_open(&gpu, 0);
  CHECK(gpu.timestamp_bits > 0, "the queue has no timestamps");
  VkDeviceSize bytes = (VkDeviceSize)n * 4, values = align_up(bytes, gpu.limits.minStorageBufferOffsetAlignment);
  VkDeviceSize size = values + bytes;
  Buffer staging = host_buffer(&gpu, size), pristine = storage_buffer(&gpu, size), work = storage_buffer(&gpu, size);
  uint64_t random = 7;
  fill_keys(BVK_KEY_U32, staging.mapped, n, &random);
  uint32_t *input_values = (uint32_t *)(staging.mapped + values);
  for (uint32_t i = 0; i < n; i++) input_values[i] = i;
  uint32_t *input = malloc(bytes);
  CHECK(input != NULL, "out of memory");
  memcpy(input, staging.mapped, bytes);

  BvkRecorderDesc rd = recorder_desc(&gpu);
  BvkRecorder *recorder = NULL;
  BVK_CHECK(bvk_create_recorder(&rd, &recorder));
  BvkBindDesc bd;
  memset(&bd, 0, sizeof bd);
  bd.struct_size = sizeof bd;
  bd.keys.buffer = work.buffer;
  bd.keys.size = bytes;
  bd.values.buffer = work.buffer;
  bd.values.offset = values;
  bd.values.size = bytes;
  bd.capacity = n;
  BvkBinding *binding = NULL;
  BVK_CHECK(bvk_bind(recorder, &bd, &binding));
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = 2 * sorts;
  VkQueryPool queries;
  VK_CHECK(vkCreateQueryPool(gpu.device, &qi, NULL, &queries));

  /* The upload and the warm-up sorts, untimed; then the timed ones; then the result read back. */
  VkCommandPool pool;
  VkCommandBuffer cmd = commands_begin(&gpu, &pool);
  VkBufferCopy whole = {0, 0, size};
  vkCmdCopyBuffer(cmd, staging.buffer, pristine.buffer, 1, &whole);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT);
  for (uint32_t i = 0; i < sorts; i++) record_sort(cmd, recorder, binding, n, pristine.buffer, work.buffer, size, queries, -1);
  commands_finish(&gpu, pool, cmd);
  cmd = commands_begin(&gpu, &pool);
  vkCmdResetQueryPool(cmd, queries, 0, 2 * sorts);
  for (uint32_t i = 0; i < sorts; i++) {
    record_sort(cmd, recorder, binding, n, pristine.buffer, work.buffer, size, queries, (int)(2 * i));
  }
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT);
  vkCmdCopyBuffer(cmd, work.buffer, staging.buffer, 1, &whole);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
  commands_finish(&gpu, pool, cmd);
  check_sorted("the last timed sort", BVK_KEY_U32, BVK_ORDER_ASCENDING, input, staging.mapped,
               (const uint32_t *)(staging.mapped + values), n, 0);

  uint64_t *stamps = malloc(2 * sorts * sizeof *stamps), *ticks = malloc(sorts * sizeof *ticks);
  CHECK(stamps && ticks, "out of memory");
  VK_CHECK(vkGetQueryPoolResults(gpu.device, queries, 0, 2 * sorts, 2 * sorts * sizeof *stamps, stamps, 8,
                                 VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  for (uint32_t i = 0; i < sorts; i++) ticks[i] = stamps[2 * i + 1] - stamps[2 * i];
  qsort(ticks, sorts, sizeof *ticks, compare_u64);
  double period_us = gpu.limits.timestampPeriod / 1000.0;
  printf("c-api bench: %u u32 pairs, %u sorts back to back: median %.1f us, min %.1f us\n", n, sorts,
         (double)ticks[sorts / 2] * period_us, (double)ticks[0] * period_us);

  free(stamps);
  free(ticks);
  free(input);
  vkDestroyQueryPool(gpu.device, queries, NULL);
  bvk_destroy_recorder(recorder);
  buffer_free(&gpu, &staging);
  buffer_free(&gpu, &pristine);
  buffer_free(&gpu, &work);
  gpu_close(&gpu);
  return 0;
}
