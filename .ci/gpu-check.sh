#!/usr/bin/env bash
# Runs on a machine with a real GPU, from a tree staged by ../shared/gpu/prepare.sh with the
# release binary and the GPU test binary (tests/gpu.rs) in .gpu/:
#   1. the GPU test suite with validation on;
#   2. the large-n test at 2^LOG2 (default 24), repeated REPEAT times (default 20);
#   3. the same test with the barrier before the last stage's flip pass dropped: it must FAIL,
#      which proves the suite catches a missing barrier;
#   4. `bitonic-vk bench` at 2^10, 2^16, 2^20, 2^22 and 2^24, fused (the default) and with one
#      substage per global pass (--max-fused 1, as NVIDIA's CUDA sample runs);
#   5. the barrier study (.ci/barrier-study.sh) at 2^16, 2^20 and 2^24.
# Full logs go to $OUT (or /tmp); a summary is printed last.
set -uo pipefail
out=${OUT:-/tmp}
log2=${LOG2:-24}
repeat=${REPEAT:-20}
tests=$(ls .gpu/gpu-* | head -n 1)
summary=()

.gpu/run .gpu/bitonic-vk devices | tee "$out/devices.txt"

.gpu/run "$tests" --test-threads=1 >"$out/suite.txt" 2>&1
summary+=("suite (validation on): exit $? -- $(grep -E '^test result' "$out/suite.txt")")

BITONIC_VK_TEST_LARGE_LOG2=$log2 BITONIC_VK_TEST_REPEAT=$repeat \
  .gpu/run "$tests" large_sort --test-threads=1 --nocapture >"$out/large.txt" 2>&1
summary+=("large 2^$log2 x $repeat: exit $? -- $(grep -E '^test result|all correct' "$out/large.txt" | tr '\n' ' ')")

BITONIC_VK_TEST_DROP_BARRIER=last-flip BITONIC_VK_TEST_LARGE_LOG2=$log2 BITONIC_VK_TEST_REPEAT=3 \
  .gpu/run "$tests" large_sort --test-threads=1 --nocapture >"$out/dropped.txt" 2>&1
status=$?
summary+=("dropped barrier (must fail): exit $status -- $(grep -E 'dropping|panicked|^test result' "$out/dropped.txt" | head -n 4 | tr '\n' ' ')")
grep -A2 panicked "$out/dropped.txt" | head -n 6

sizes=2^10,2^16,2^20,2^22,2^24
.gpu/run .gpu/bitonic-vk bench --sizes $sizes --reps 30 --warmup 5 | tee "$out/bench.txt"
.gpu/run .gpu/bitonic-vk bench --sizes $sizes --reps 30 --warmup 5 --max-fused 1 >"$out/bench-unfused.txt"
RUN=.gpu/run BIN=.gpu/bitonic-vk OUT="$out" bash .ci/barrier-study.sh >/dev/null

printf '%s\n' "${summary[@]}"
