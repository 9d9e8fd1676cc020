#!/usr/bin/env bash
# The barrier study of docs/BARRIERS.md: `bitonic-vk passes --compare` (every barrier flavour, a
# submit per pass, unfused, and empty-dispatch chains) for keys and pairs at each size in SIZES,
# writing each table, JSON and plot to OUT.
# EXTRA adds arguments to each `passes` run.
#   Here (lavapipe):   SIZES="2^16" bash .ci/barrier-study.sh
#                      SIZES="2^20" EXTRA="--reps 5" bash .ci/barrier-study.sh
#   On the GPU machine (tree staged by ../shared/gpu/prepare.sh):
#                      RUN=.gpu/run BIN=.gpu/bitonic-vk bash .ci/barrier-study.sh
set -euo pipefail
out=${OUT:-target/barrier-study}
bin=${BIN:-target/release/bitonic-vk}
run=${RUN:-}
sizes=${SIZES:-"2^16 2^20 2^24"}
read -r -a extra <<<"${EXTRA:-}"
mkdir -p "$out"
$run "$bin" devices >"$out/devices.txt"
for n in $sizes; do
  for payload in keys pairs; do
    flag=()
    [ "$payload" = pairs ] && flag=(--pairs)
    name="passes-${n/^/e}-$payload"
    echo "== bitonic-vk passes --n $n ${flag[*]} --compare ${extra[*]}" | tee "$out/$name.txt"
    $run "$bin" passes --n "$n" "${flag[@]}" --compare "${extra[@]}" --json "$out/$name.json" --plot "$out/$name.svg" \
      | tee -a "$out/$name.txt"
  done
done
