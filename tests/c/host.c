/* The standalone sorter from C: host arrays of each of the six key types, keys alone and pairs,
 * in both orders, and stable sorts of the 4-byte types, on a device of its own with the validation
 * layer on; each checked against qsort. An argument picks the kernels: compact or unrolled (by
 * default the device's). */
#include <string.h>

#include "util.h"

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0); /* in order with the library's and the layer's stderr */
  BvkSorterDesc desc;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  if (argc > 1) {
    CHECK(!strcmp(argv[1], "compact") || !strcmp(argv[1], "unrolled"), "usage: host [compact|unrolled]");
    desc.tuning.kernels = strcmp(argv[1], "compact") ? BVK_KERNELS_UNROLLED : BVK_KERNELS_COMPACT;
  }
  desc.validation = BVK_VALIDATION_ON;
  desc.pipeline_cache = BVK_PIPELINE_CACHE_OFF;
  BvkSorter *sorter = NULL;
  BVK_CHECK(bvk_create_sorter(&desc, &sorter));

  enum { N = 3000 };
  uint64_t input[N], keys[N]; /* 8-byte aligned for every key type */
  uint32_t values[N];
  uint64_t random = 4;
  for (uint32_t key_type = BVK_KEY_U32; key_type <= BVK_KEY_F64; key_type++) {
    for (uint32_t order = BVK_ORDER_ASCENDING; order <= BVK_ORDER_DESCENDING; order++) {
      /* 0: keys alone, 1: pairs, 2: stable pairs (4-byte keys). */
      for (int kind = 0; kind < 3; kind++) {
        if (kind == 2 && key_bytes(key_type) == 8) continue;
        fill_keys(key_type, input, N, &random);
        memcpy(keys, input, sizeof keys);
        for (uint32_t i = 0; i < N; i++) values[i] = i;
        BvkSortStats stats;
        memset(&stats, 0, sizeof stats);
        stats.struct_size = sizeof stats;
        if (kind == 2) {
          BVK_CHECK(bvk_sort_stable(sorter, keys, values, N, key_type, order, &stats));
        } else {
          BVK_CHECK(bvk_sort(sorter, keys, kind ? values : NULL, N, key_type, order, &stats));
        }
        const char *what[] = {"host keys", "host pairs", "stable host pairs"};
        check_sorted(what[kind], key_type, order, input, keys, kind ? values : NULL, N, kind == 2);
        CHECK(stats.count == N && stats.passes > 0, "stats: count %llu, %u passes", (unsigned long long)stats.count,
              stats.passes);
      }
    }
    printf("ok: %d %s keys, pairs%s, both orders\n", N, key_name(key_type),
           key_bytes(key_type) == 4 ? " and stable pairs" : "");
  }
  /* Nothing to sort: no pointer needed. */
  BVK_CHECK(bvk_sort(sorter, NULL, NULL, 0, BVK_KEY_F64, BVK_ORDER_ASCENDING, NULL));
  uint32_t errors = 1;
  BVK_CHECK(bvk_sorter_validation_errors(sorter, &errors));
  CHECK(errors == 0, "the validation layer reported %u error(s) (above)", errors);
  bvk_destroy_sorter(sorter);
  printf("host (%s kernels): every sort as qsort's, no validation error\n", argc > 1 ? argv[1] : "default");
  return 0;
}
