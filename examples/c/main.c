/* Sorts five floats with their indices through bitonic-vk's C API, on a device of its own. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bitonic_vk.h"

int main(void) {
  BvkSorterDesc desc;
  memset(&desc, 0, sizeof desc); /* zeroed fields take the defaults */
  desc.struct_size = sizeof desc;
  BvkSorter *sorter = NULL;
  BvkResult result = bvk_create_sorter(&desc, &sorter);
  float keys[] = {3.5f, -0.0f, NAN, 0.0f, -1.0f};
  uint32_t values[] = {0, 1, 2, 3, 4};
  if (result == BVK_SUCCESS) result = bvk_sort(sorter, keys, values, 5, BVK_KEY_F32, BVK_ORDER_ASCENDING, NULL);
  if (result != BVK_SUCCESS) {
    char message[512];
    bvk_last_error_message(message, sizeof message);
    fprintf(stderr, "%s: %s\n", bvk_result_name(result), message);
    bvk_destroy_sorter(sorter);
    return 1;
  }
  printf("sorted keys [%g, %g, %g, %g, %g] values [%u, %u, %u, %u, %u]\n", keys[0], keys[1], keys[2], keys[3], keys[4],
         values[0], values[1], values[2], values[3], values[4]);
  bvk_destroy_sorter(sorter);
  return 0;
}
