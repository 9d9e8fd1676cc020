/* The C tests' shared renderer, checks and reference: see util.h. */
#include "util.h"

#include <math.h>
#include <string.h>

static int error_count;

void bvk_check(BvkResult result, const char *call, const char *file, int line) {
  if (result == BVK_SUCCESS) return;
  char message[1024];
  bvk_last_error_message(message, sizeof message);
  fprintf(stderr, "%s:%d: %s returned %s (%d): %s\n", file, line, call, bvk_result_name(result), (int)result,
          message);
  exit(1);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  (void)types;
  (void)user;
  int error = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0;
  fprintf(stderr, "[validation %s] %s\n", error ? "error" : "warning", data && data->pMessage ? data->pMessage : "");
  if (error) error_count++;
  return VK_FALSE;
}

int validation_errors(void) { return error_count; }

/* Whether the device offers an extension. */
static int has_extension(VkPhysicalDevice physical, const char *name) {
  uint32_t count = 0;
  VK_CHECK(vkEnumerateDeviceExtensionProperties(physical, NULL, &count, NULL));
  VkExtensionProperties *props = malloc((count ? count : 1) * sizeof *props);
  CHECK(props != NULL, "out of memory");
  VK_CHECK(vkEnumerateDeviceExtensionProperties(physical, NULL, &count, props));
  int found = 0;
  for (uint32_t i = 0; i < count && !found; i++) found = strcmp(props[i].extensionName, name) == 0;
  free(props);
  return found;
}

/* The device on `physical` with one queue of `family`, shaderInt16 and computeFullSubgroups where
 * offered. */
static void make_device(Gpu *gpu, VkPhysicalDevice physical, uint32_t family) {
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT size_control = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 offered = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  int size_controlled = has_extension(physical, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  if (size_controlled) offered.pNext = &size_control;
  vkGetPhysicalDeviceFeatures2(physical, &offered);
  gpu->shader_int16 = offered.features.shaderInt16;
  gpu->full_subgroups = size_controlled && size_control.computeFullSubgroups;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkPhysicalDeviceFeatures features;
  memset(&features, 0, sizeof features);
  features.shaderInt16 = gpu->shader_int16;
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT enable = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  enable.computeFullSubgroups = VK_TRUE;
  const char *extensions[] = {VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME};
  VkDeviceCreateInfo device = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device.queueCreateInfoCount = 1;
  device.pQueueCreateInfos = &queue;
  device.pEnabledFeatures = &features;
  if (gpu->full_subgroups) {
    device.pNext = &enable;
    device.enabledExtensionCount = 1;
    device.ppEnabledExtensionNames = extensions;
  }
  VK_CHECK(vkCreateDevice(physical, &device, NULL, &gpu->device));
  gpu->physical = physical;
  gpu->family = family;
}

void gpu_open(Gpu *gpu, int validation) {
  memset(gpu, 0, sizeof *gpu);
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_1;
  const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char *extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkValidationFeatureEnableEXT enabled[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enabled;
  VkDebugUtilsMessengerCreateInfoEXT messenger = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
  messenger.pfnUserCallback = on_message;
  /* Chained to the instance too, so that instance creation and destruction are reported. */
  features.pNext = &messenger;
  VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  if (validation) {
    info.pNext = &features;
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = layers;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
  }
  VK_CHECK(vkCreateInstance(&info, NULL, &gpu->instance));
  if (validation) {
    PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(gpu->instance, "vkCreateDebugUtilsMessengerEXT");
    CHECK(create_messenger != NULL, "VK_EXT_debug_utils is missing");
    VK_CHECK(create_messenger(gpu->instance, &messenger, NULL, &gpu->messenger));
  }

  uint32_t count = 0;
  VK_CHECK(vkEnumeratePhysicalDevices(gpu->instance, &count, NULL));
  CHECK(count > 0, "no Vulkan device");
  VkPhysicalDevice physicals[16];
  if (count > 16) count = 16;
  VK_CHECK(vkEnumeratePhysicalDevices(gpu->instance, &count, physicals));
  for (uint32_t d = 0; d < count && gpu->device == VK_NULL_HANDLE; d++) {
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physicals[d], &families, NULL);
    VkQueueFamilyProperties props[16];
    if (families > 16) families = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(physicals[d], &families, props);
    for (uint32_t f = 0; f < families; f++) {
      if (!(props[f].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
      make_device(gpu, physicals[d], f);
      gpu->timestamp_bits = props[f].timestampValidBits;
      break;
    }
  }
  CHECK(gpu->device != VK_NULL_HANDLE, "no device with a compute queue");
  vkGetDeviceQueue(gpu->device, gpu->family, 0, &gpu->queue);
  vkGetPhysicalDeviceMemoryProperties(gpu->physical, &gpu->memory);
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(gpu->physical, &props);
  gpu->limits = props.limits;
  fprintf(stderr, "testing on %s (shaderInt16 %s, full subgroups %s)\n", props.deviceName,
          gpu->shader_int16 ? "on" : "off", gpu->full_subgroups ? "on" : "off");
}

void gpu_close(Gpu *gpu) {
  vkDestroyDevice(gpu->device, NULL);
  if (gpu->messenger != VK_NULL_HANDLE) {
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(gpu->instance, "vkDestroyDebugUtilsMessengerEXT");
    destroy_messenger(gpu->instance, gpu->messenger, NULL);
  }
  vkDestroyInstance(gpu->instance, NULL);
  CHECK(error_count == 0, "the validation layer reported %d error(s) (above)", error_count);
}

BvkRecorderDesc recorder_desc(const Gpu *gpu) {
  BvkRecorderDesc desc;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.get_instance_proc_addr = vkGetInstanceProcAddr;
  desc.instance = gpu->instance;
  desc.physical_device = gpu->physical;
  desc.device = gpu->device;
  desc.shader_int16 = gpu->shader_int16;
  desc.full_subgroups = gpu->full_subgroups;
  return desc;
}

static Buffer make_buffer(const Gpu *gpu, VkDeviceSize size, VkBufferUsageFlags usage, VkMemoryPropertyFlags props) {
  Buffer b;
  memset(&b, 0, sizeof b);
  b.size = size;
  VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size;
  info.usage = usage;
  VK_CHECK(vkCreateBuffer(gpu->device, &info, NULL, &b.buffer));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(gpu->device, b.buffer, &req);
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < gpu->memory.memoryTypeCount && type == UINT32_MAX; i++) {
    if ((req.memoryTypeBits & (1u << i)) && (gpu->memory.memoryTypes[i].propertyFlags & props) == props) type = i;
  }
  CHECK(type != UINT32_MAX, "no memory type for a buffer of %llu bytes", (unsigned long long)size);
  VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = type;
  VK_CHECK(vkAllocateMemory(gpu->device, &alloc, NULL, &b.memory));
  VK_CHECK(vkBindBufferMemory(gpu->device, b.buffer, b.memory, 0));
  if (props & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    void *mapped = NULL;
    VK_CHECK(vkMapMemory(gpu->device, b.memory, 0, VK_WHOLE_SIZE, 0, &mapped));
    b.mapped = mapped;
  }
  return b;
}

Buffer storage_buffer(const Gpu *gpu, VkDeviceSize size) {
  return make_buffer(gpu, size,
                     VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                         VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                     VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
}

Buffer host_buffer(const Gpu *gpu, VkDeviceSize size) {
  return make_buffer(gpu, size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
}

void buffer_free(const Gpu *gpu, Buffer *b) {
  vkDestroyBuffer(gpu->device, b->buffer, NULL);
  vkFreeMemory(gpu->device, b->memory, NULL);
  memset(b, 0, sizeof *b);
}

VkCommandBuffer commands_begin(const Gpu *gpu, VkCommandPool *pool) {
  VkCommandPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  info.queueFamilyIndex = gpu->family;
  VK_CHECK(vkCreateCommandPool(gpu->device, &info, NULL, pool));
  VkCommandBufferAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = *pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd;
  VK_CHECK(vkAllocateCommandBuffers(gpu->device, &alloc, &cmd));
  VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vkBeginCommandBuffer(cmd, &begin));
  return cmd;
}

void commands_finish(const Gpu *gpu, VkCommandPool pool, VkCommandBuffer cmd) {
  VK_CHECK(vkEndCommandBuffer(cmd));
  VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  VK_CHECK(vkCreateFence(gpu->device, &fence_info, NULL, &fence));
  VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  VK_CHECK(vkQueueSubmit(gpu->queue, 1, &submit, fence));
  VK_CHECK(vkWaitForFences(gpu->device, 1, &fence, VK_TRUE, 300ull * 1000 * 1000 * 1000));
  vkDestroyFence(gpu->device, fence, NULL);
  vkDestroyCommandPool(gpu->device, pool, NULL);
}

void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
             VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier m = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  m.srcAccessMask = src_access;
  m.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &m, 0, NULL, 0, NULL);
}

VkDeviceSize align_up(VkDeviceSize x, VkDeviceSize alignment) { return (x + alignment - 1) / alignment * alignment; }

size_t key_bytes(uint32_t key_type) { return key_type >= BVK_KEY_U64 ? 8 : 4; }

const char *key_name(uint32_t key_type) {
  static const char *names[] = {"u32", "i32", "f32", "u64", "i64", "f64"};
  return key_type <= BVK_KEY_F64 ? names[key_type] : "?";
}

uint64_t next_random(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static const uint32_t F32_SPECIAL[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001,
    0x7fffffff, 0xffffffff, 0x00000001, 0x80000001, 0x3f800000, 0xbf800000, 0x7f7fffff, 0xff7fffff,
};
static const uint64_t F64_SPECIAL[] = {
    0x0000000000000000ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
    0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull, 0xfff0000000000001ull,
    0x0000000000000001ull, 0x8000000000000001ull, 0x3ff0000000000000ull, 0xbff0000000000000ull,
};

void fill_keys(uint32_t key_type, void *keys, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next_random(state);
    /* A quarter of the keys from a small pool, so that equal keys meet. */
    uint64_t pool = r % 16;
    int special = (r >> 8) % 8 == 0, repeat = (r >> 16) % 4 == 0;
    uint64_t bits = next_random(state);
    if (repeat) bits = pool * 0x9E3779B97F4A7C15ull;
    switch (key_type) {
      case BVK_KEY_U32:
      case BVK_KEY_I32:
        ((uint32_t *)keys)[i] = (uint32_t)(bits >> 32);
        break;
      case BVK_KEY_F32:
        ((uint32_t *)keys)[i] = special ? F32_SPECIAL[pool] : (uint32_t)(bits >> 32);
        break;
      case BVK_KEY_U64:
      case BVK_KEY_I64:
        ((uint64_t *)keys)[i] = bits;
        break;
      default:
        ((uint64_t *)keys)[i] = special ? F64_SPECIAL[pool % 12] : bits;
        break;
    }
  }
}

/* -1, 0 or 1 from a comparison. */
#define SIGN3(a, b) (((a) > (b)) - ((a) < (b)))

/* The IEEE classes in total order: -NaN, the numbers, +NaN. */
static int float_class(int nan, int negative) { return nan ? (negative ? 0 : 2) : 1; }

static int compare_f32(float a, float b) {
  uint32_t ba, bb;
  memcpy(&ba, &a, 4);
  memcpy(&bb, &b, 4);
  int ca = float_class(isnan(a), signbit(a) != 0), cb = float_class(isnan(b), signbit(b) != 0);
  if (ca != cb) return SIGN3(ca, cb);
  if (ca == 1) {
    if (a != b) return a < b ? -1 : 1;
    return SIGN3(signbit(b) != 0, signbit(a) != 0); /* -0.0 before +0.0 */
  }
  /* NaNs of one sign: the larger payload lies further from the numbers. */
  int by_payload = SIGN3(ba & 0x7fffffffu, bb & 0x7fffffffu);
  return ca == 2 ? by_payload : -by_payload;
}

static int compare_f64(double a, double b) {
  uint64_t ba, bb;
  memcpy(&ba, &a, 8);
  memcpy(&bb, &b, 8);
  int ca = float_class(isnan(a), signbit(a) != 0), cb = float_class(isnan(b), signbit(b) != 0);
  if (ca != cb) return SIGN3(ca, cb);
  if (ca == 1) {
    if (a != b) return a < b ? -1 : 1;
    return SIGN3(signbit(b) != 0, signbit(a) != 0);
  }
  int by_payload = SIGN3(ba & 0x7fffffffffffffffull, bb & 0x7fffffffffffffffull);
  return ca == 2 ? by_payload : -by_payload;
}

int key_compare(uint32_t key_type, const void *a, const void *b) {
  switch (key_type) {
    case BVK_KEY_U32: return SIGN3(*(const uint32_t *)a, *(const uint32_t *)b);
    case BVK_KEY_I32: return SIGN3(*(const int32_t *)a, *(const int32_t *)b);
    case BVK_KEY_F32: return compare_f32(*(const float *)a, *(const float *)b);
    case BVK_KEY_U64: return SIGN3(*(const uint64_t *)a, *(const uint64_t *)b);
    case BVK_KEY_I64: return SIGN3(*(const int64_t *)a, *(const int64_t *)b);
    default: return compare_f64(*(const double *)a, *(const double *)b);
  }
}

/* qsort has no context argument: the reference's input, key type and order, for one sort. */
static struct {
  const unsigned char *input;
  uint32_t key_type, order;
} by;

/* Indices by their keys, in the sort's order, ties by index: the stable order. */
static int compare_indices(const void *a, const void *b) {
  uint32_t ia = *(const uint32_t *)a, ib = *(const uint32_t *)b;
  size_t w = key_bytes(by.key_type);
  int c = key_compare(by.key_type, by.input + ia * w, by.input + ib * w);
  if (by.order == BVK_ORDER_DESCENDING) c = -c;
  return c != 0 ? c : SIGN3(ia, ib);
}

static void print_key(const char *label, const void *key, size_t w) {
  uint64_t bits = 0;
  memcpy(&bits, key, w);
  fprintf(stderr, "  %s 0x%0*llx\n", label, (int)(2 * w), (unsigned long long)bits);
}

void check_sorted(const char *what, uint32_t key_type, uint32_t order, const void *input, const void *keys,
                  const uint32_t *values, size_t n, int stable) {
  size_t w = key_bytes(key_type);
  const unsigned char *in = input, *out = keys;
  uint32_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
  unsigned char *seen = calloc(n ? n : 1, 1);
  CHECK(sorted && seen, "out of memory");
  for (size_t i = 0; i < n; i++) sorted[i] = (uint32_t)i;
  by.input = in;
  by.key_type = key_type;
  by.order = order;
  qsort(sorted, n, sizeof *sorted, compare_indices);
  for (size_t i = 0; i < n; i++) {
    if (memcmp(out + i * w, in + (size_t)sorted[i] * w, w) != 0) {
      fprintf(stderr, "%s (%s, %s, n = %zu): key %zu differs from qsort's\n", what, key_name(key_type),
              order ? "descending" : "ascending", n, i);
      print_key("sorted on the GPU", out + i * w, w);
      print_key("qsort", in + (size_t)sorted[i] * w, w);
      exit(1);
    }
    if (!values) continue;
    uint32_t v = values[i];
    CHECK(v < n && !seen[v], "%s: value %zu is %u: out of range or seen twice", what, i, v);
    seen[v] = 1;
    CHECK(memcmp(out + i * w, in + (size_t)v * w, w) == 0, "%s: pair %zu split: its value %u names another key",
          what, i, v);
    CHECK(!stable || v == sorted[i], "%s: value %zu is %u, the stable order's %u: equal keys out of input order",
          what, i, v, sorted[i]);
  }
  free(sorted);
  free(seen);
}
