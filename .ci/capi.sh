#!/usr/bin/env bash
# Builds the C API (capi/) and tests it from C and C++ as a C renderer takes it: the committed
# header is what capi/src declares (a cargo test); it compiles as C99 and as C++17 with every
# warning an error, and so do the README's C lines; programs linked to libbitonic_vk.a run on the
# default Vulkan device (lavapipe in CI) with the validation layer on, any error of it failing
# them: a renderer's own device, buffers and command buffers (tests/c/renderer.c), host sorts of
# every key type (host.c) and every error path (errors.c, with the test hook that panics); the
# timing program (bench.c) runs once, small. Then the CMake example (examples/c) builds on
# libbitonic_vk.so and runs, and the sizes of both libraries stripped are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Vulkan headers and libvulkan.so for the C programs, CMake for the example.
bash .ci/setup.sh libvulkan-dev cmake
start=$(date +%s)
out=target/capi-tests
mkdir -p "$out"

cargo test --release --locked -p bitonic-vk-capi --features test-hooks
cargo build --release --locked -p bitonic-vk-capi --features test-hooks
# What a Rust static library needs besides libvulkan (`--print native-static-libs` lists them).
link=(target/release/libbitonic_vk.a -lvulkan -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)
warnings=(-Wall -Wextra -Werror -pedantic)
for program in renderer host errors bench; do
  "${CC:-cc}" -std=c99 "${warnings[@]}" -O2 -Iinclude -DBVK_TEST_HOOKS -o "$out/$program" \
    "tests/c/$program.c" tests/c/util.c "${link[@]}"
done
"${CXX:-c++}" -std=c++17 "${warnings[@]}" -O2 -Iinclude -o "$out/cxx" tests/c/cxx.cpp "${link[@]}"
# The README's lines under "### From C or C++" compile as the body of a renderer's function.
snippet=$(sed -n '/^### From C or C++/,/^```$/p' README.md | sed '1,/^```c$/d; /^```$/d')
[ -n "$snippet" ] || { echo "capi: no \`\`\`c block under \"### From C or C++\" in README.md" >&2; exit 1; }
{
  echo '#include "bitonic_vk.h"'
  echo 'void record_frame(VkInstance instance, VkPhysicalDevice physical, VkDevice device, VkBuffer keys_buf,'
  echo '                  VkBuffer index_buf, VkBuffer counter_buf, uint32_t capacity, VkCommandBuffer cmd);'
  echo 'void record_frame(VkInstance instance, VkPhysicalDevice physical, VkDevice device, VkBuffer keys_buf,'
  echo '                  VkBuffer index_buf, VkBuffer counter_buf, uint32_t capacity, VkCommandBuffer cmd) {'
  echo "$snippet"
  echo '}'
} >"$out/readme.c"
"${CC:-cc}" -std=c99 "${warnings[@]}" -Iinclude -c -o "$out/readme.o" "$out/readme.c"
# host runs both builds of the kernels: lavapipe's default is the compact one, a GPU's the other.
for program in cxx errors host "host unrolled" renderer; do
  echo "capi: $program"
  t=$(date +%s)
  # shellcheck disable=SC2086 # a program and its argument
  "$out/"$program
  echo "capi: $program passed in $(($(date +%s) - t)) s"
done
# The timing program of the C API against `bitonic-vk bench --time-from transfer` on a GPU; here
# it only has to run and sort.
"$out/bench" 4096 2

# The libraries as shipped: without the test hook.
cargo build --release --locked -p bitonic-vk-capi
if nm -D --defined-only target/release/libbitonic_vk.so | grep -qw bvk_test_panic; then
  echo "capi: libbitonic_vk.so exports bvk_test_panic without the test-hooks feature" >&2
  exit 1
fi
cmake -S examples/c -B target/capi-example -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build target/capi-example
expected="sorted keys [-1, -0, 0, 3.5, nan] values [4, 1, 3, 0, 2]"
output=$(target/capi-example/sort_floats)
if [ "$output" != "$expected" ]; then
  echo "capi: the CMake example printed \"$output\", not \"$expected\"" >&2
  exit 1
fi
echo "capi: the CMake example on libbitonic_vk.so: $output"
# Sizes as shipped: the archive without debug sections (a fully stripped one cannot be linked),
# the shared library fully stripped.
strip --strip-debug -o "$out/libbitonic_vk.a" target/release/libbitonic_vk.a
strip -o "$out/libbitonic_vk.so" target/release/libbitonic_vk.so
echo "capi: stripped sizes: libbitonic_vk.a $(stat -c %s "$out/libbitonic_vk.a") bytes (debug sections" \
  "stripped), libbitonic_vk.so $(stat -c %s "$out/libbitonic_vk.so") bytes"
echo "capi: the C API's build and tests took $(($(date +%s) - start)) s"
