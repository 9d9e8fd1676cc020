#!/usr/bin/env bash
# The particle example (examples/particles): for each count in COUNTS, a checked run (order and
# image against the CPU reference, 2 frames; validation on at the first count) and a timed run
# (FRAMES frames after WARMUP untimed ones) printing the median GPU time per frame of the depth
# pass, the sort and the draw. Each run's output and last frame go to OUT.
#   Here (lavapipe):   COUNTS="2^12" FRAMES=3 WARMUP=1 bash .ci/particles.sh
#   On the GPU machine (tree staged by ../shared/gpu/prepare.sh target/release/examples/particles):
#                      RUN=.gpu/run BIN=.gpu/particles OUT=$OUT bash .ci/particles.sh
set -euo pipefail
out=${OUT:-target/particles}
bin=${BIN:-target/release/examples/particles}
run=${RUN:-}
counts=${COUNTS:-"2^16 2^18 2^20"}
frames=${FRAMES:-200}
warmup=${WARMUP:-20}
mkdir -p "$out"
validation=(--validation)
for n in $counts; do
  name="particles-${n/^/e}"
  echo "== particles --count $n --frames 2 --check ${validation[*]}" | tee "$out/$name-check.txt"
  $run "$bin" --count "$n" --frames 2 --check "${validation[@]}" | tee -a "$out/$name-check.txt"
  validation=()
  echo "== particles --count $n --frames $frames --warmup $warmup" | tee "$out/$name.txt"
  $run "$bin" --count "$n" --frames "$frames" --warmup "$warmup" --out "$out/$name.png" | tee -a "$out/$name.txt"
done
