/* What the C tests share: a renderer's own Vulkan objects (an instance with the validation layer,
 * whose error messages are counted, a device, buffers, one-shot command buffers), checks that end
 * the program with a message, and the reference a sort is checked against (qsort). */
#ifndef BVK_TEST_UTIL_H
#define BVK_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bitonic_vk.h"

#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: failed: %s: ", __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                               \
      fputc('\n', stderr);                                                        \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

#define VK_CHECK(call)                                                            \
  do {                                                                            \
    VkResult vk_result_ = (call);                                                 \
    CHECK(vk_result_ == VK_SUCCESS, "%s returned %d", #call, (int)vk_result_);    \
  } while (0)

/* A bitonic-vk call that must succeed; on failure prints its code and message. */
#define BVK_CHECK(call) bvk_check((call), #call, __FILE__, __LINE__)
void bvk_check(BvkResult result, const char *call, const char *file, int line);

/* The renderer's objects. */
typedef struct Gpu {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice physical;
  VkDevice device;
  uint32_t family;
  VkQueue queue;
  VkPhysicalDeviceMemoryProperties memory;
  VkPhysicalDeviceLimits limits;
  uint32_t timestamp_bits;
  /* Features the device was made with, where offered: shaderInt16, and computeFullSubgroups of
   * VK_EXT_subgroup_size_control (as the standalone sorter makes its device). */
  VkBool32 shader_int16, full_subgroups;
} Gpu;

/* A buffer and its memory; `mapped` for host-visible ones. */
typedef struct Buffer {
  VkBuffer buffer;
  VkDeviceMemory memory;
  unsigned char *mapped;
  VkDeviceSize size;
} Buffer;

/* An instance, with `validation` VK_LAYER_KHRONOS_validation (synchronization validation on) and a
 * messenger that prints warnings and errors and counts the errors; the first device with a compute
 * queue, with shaderInt16 and computeFullSubgroups where it offers them; and that queue. */
void gpu_open(Gpu *gpu, int validation);
/* Destroys the device (the layer then reports leaked objects), the messenger and the instance;
 * exits with 1 if the layer reported any error. */
void gpu_close(Gpu *gpu);
/* Error-severity validation messages so far. */
int validation_errors(void);

/* A recorder description of the renderer's handles and features, through the loader's
 * vkGetInstanceProcAddr. */
BvkRecorderDesc recorder_desc(const Gpu *gpu);

/* A storage buffer usable as a copy source and destination (device memory). */
Buffer storage_buffer(const Gpu *gpu, VkDeviceSize size);
/* A host-visible, coherent, mapped buffer for copies in and out. */
Buffer host_buffer(const Gpu *gpu, VkDeviceSize size);
void buffer_free(const Gpu *gpu, Buffer *b);

/* A command buffer begun for one submission, from a pool of its own. */
VkCommandBuffer commands_begin(const Gpu *gpu, VkCommandPool *pool);
/* Ends, submits and waits for the command buffer, then frees it and its pool. */
void commands_finish(const Gpu *gpu, VkCommandPool pool, VkCommandBuffer cmd);
/* A global memory barrier. */
void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
             VkPipelineStageFlags dst_stage, VkAccessFlags dst_access);

VkDeviceSize align_up(VkDeviceSize x, VkDeviceSize alignment);
size_t key_bytes(uint32_t key_type);
const char *key_name(uint32_t key_type);

/* A deterministic generator (xorshift64*). */
uint64_t next_random(uint64_t *state);
/* n keys of key_type with duplicates and, for floats, NaNs of both signs and payloads, both
 * infinities, both zeros and subnormals. */
void fill_keys(uint32_t key_type, void *keys, size_t n, uint64_t *state);

/* The total order of key_type: integers as integers; floats as Rust's total_cmp, -NaN < -inf <
 * ... < -0.0 < +0.0 < ... < +inf < +NaN, NaNs of one sign by payload. Written from the IEEE
 * classes, not from the library's bit images. */
int key_compare(uint32_t key_type, const void *a, const void *b);

/* Checks a sort of `input` (n keys) against qsort's: `keys` are the reference's bit for bit; with
 * `values` (the sort was given each key's index as its value) they are a permutation of 0..n-1,
 * each naming the input key beside it; with `stable`, they are the stable order's. Exits with a
 * message naming `what` on any difference. */
void check_sorted(const char *what, uint32_t key_type, uint32_t order, const void *input, const void *keys,
                  const uint32_t *values, size_t n, int stable);

#endif
