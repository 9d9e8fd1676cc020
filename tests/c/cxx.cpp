// The header from C++17: it compiles without warnings, declares C linkage, and a C++ program links
// the static library and calls it.
#include "bitonic_vk.h"

#include <cstdio>
#include <cstring>

int main() {
  BvkBindDesc desc{};
  desc.struct_size = sizeof desc;
  desc.key_width = BVK_KEY_WIDTH_64;
  BvkSortStats stats{};
  stats.struct_size = sizeof stats;
  // A null recorder: the call fails as the header says, without touching anything.
  BvkBinding *binding = nullptr;
  BvkResult result = bvk_bind(nullptr, &desc, &binding);
  char message[128];
  bvk_last_error_message(message, sizeof message);
  if (result != BVK_ERROR_NULL_POINTER || std::strcmp(message, "recorder is null") != 0 || binding != nullptr) {
    std::fprintf(stderr, "bvk_bind(nullptr, ...) returned %s: %s\n", bvk_result_name(result), message);
    return 1;
  }
  if (bvk_version() != BVK_VERSION) {
    std::fprintf(stderr, "the library is version %x, the header %x\n", bvk_version(), BVK_VERSION);
    return 1;
  }
  std::printf("ok: C++17 includes the header and links the library (version %u.%u.%u)\n", BVK_VERSION_MAJOR,
              BVK_VERSION_MINOR, BVK_VERSION_PATCH);
  return 0;
}
