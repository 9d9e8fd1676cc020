#!/usr/bin/env bash
# Fuzzes every cargo-fuzz target in fuzz/ for a bounded time on the stable toolchain, and exits
# non-zero if any of them crashed (a failed assertion, a panic, a timeout or running out of memory).
# Not part of .ci/run: run it by hand.
#
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_SECONDS_<TARGET>   overrides it for one target, e.g. FUZZ_SECONDS_PLAN=300
#   FUZZ_TARGETS   space-separated targets (default: every target, `cargo fuzz list`)
#   FUZZ_TARGET_DIR   cargo's target dir for the fuzz build (default: the package's target/, so
#                  that the build dependencies already built there, shaderc above all, can be reused)
#
# The targets are built with `--sanitizer none`: the sanitizers need nightly's -Zsanitizer, and
# the code fuzzed is safe Rust, where a sanitizer would find nothing that a panic does not show.
# Inputs that add coverage are kept in fuzz/corpus/<target>/ (ignored by git); a crashing input is
# written to fuzz/artifacts/<target>/ and its path printed. Each target also starts from the
# inputs in fuzz/regressions/<target>/, the crashes found before.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash .ci/setup.sh
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi

seconds=${FUZZ_SECONDS:-60}
target_dir=${FUZZ_TARGET_DIR:-$root/target}
read -r -a targets <<<"${FUZZ_TARGETS:-$(cargo fuzz list | tr '\n' ' ')}"
build=(--sanitizer none --target-dir "$target_dir")

echo "fuzz: building ${targets[*]}" >&2
cargo fuzz build "${build[@]}"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
summary=()
failed=0
for t in "${targets[@]}"; do
  var="FUZZ_SECONDS_$(echo "$t" | tr '[:lower:]-' '[:upper:]_')"
  s=${!var:-$seconds}
  corpus=("fuzz/corpus/$t")
  mkdir -p "fuzz/corpus/$t"
  [ -d "fuzz/regressions/$t" ] && corpus+=("fuzz/regressions/$t")
  echo "fuzz: $t for ${s} s" >&2
  status=0
  start=$SECONDS
  # -timeout: one input running over 10 s counts as a crash (every target is meant to take
  # milliseconds per input).
  cargo fuzz run "${build[@]}" "$t" "${corpus[@]}" -- \
    -max_total_time="$s" -timeout=10 -print_final_stats=1 2>&1 | tee "$logs/$t.log" >&2 || status=$?
  wall=$((SECONDS - start))
  runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$logs/$t.log" | grep -oE '[0-9]+$' || true)
  took=$(grep -oE '^Done [0-9]+ runs in [0-9]+ second' "$logs/$t.log" | grep -oE 'in [0-9]+' | grep -oE '[0-9]+' || true)
  # The last status line: "#N ... cov: C ft: F corp: U/S ...".
  last=$(grep -E '^#[0-9]+' "$logs/$t.log" | tail -n 1 || true)
  cov=$(echo "$last" | grep -oE 'cov: [0-9]+' | grep -oE '[0-9]+' || true)
  ft=$(echo "$last" | grep -oE 'ft: [0-9]+' | grep -oE '[0-9]+' || true)
  corp=$(echo "$last" | grep -oE 'corp: [0-9]+' | grep -oE '[0-9]+' || true)
  if [ "$status" -eq 0 ]; then
    result=ok
  else
    failed=1
    artifact=$(grep -oE "fuzz/artifacts/$t/[A-Za-z0-9_.-]+" "$logs/$t.log" | tail -n 1 || true)
    result="CRASH (exit $status${artifact:+, input $artifact})"
  fi
  summary+=("fuzz $t: ${runs:-?} executions in ${took:-$wall} s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}: $result")
done

printf '%s\n' "${summary[@]}"
exit "$failed"
