#!/usr/bin/env bash
# Builds the crate as a renderer would take it: the package as crates.io hands it out (`cargo
# package`), a new crate outside this repository (so .cargo/config.toml does not apply) that
# depends on it with `default-features = false`, SHADERC_LIB_DIR unset, and the README's library
# example as its main. Fails if shaderc is anywhere in its dependency graph, if the build fails,
# or if the example does not print the sorted keys and values. Prints the build's time. Then the
# same for a wgpu renderer: a crate with the `wgpu` feature and its own wgpu, whose main is the
# package's examples/wgpu_sort.rs.
#   EMBEDDER_TARGET_DIR  the test crate's target folder (default target/embedder, kept between
#                        runs so that CI rebuilds only bitonic-vk; an empty folder times a first build)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${EMBEDDER_TARGET_DIR:-$root/target/embedder}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
cargo package --quiet --no-verify --allow-dirty
tar -xzf "target/package/bitonic-vk-$version.crate" -C "$work"

# The README's example, between "## As a library" and the end of its first code block.
example=$(sed -n '/^## As a library/,/^```$/p' README.md | sed '1,/^```rust$/d; /^```$/d')
[ -n "$example" ] || { echo "embedder: no \`\`\`rust block under \"## As a library\" in README.md" >&2; exit 1; }
mkdir -p "$work/embedder/src"
cat >"$work/embedder/Cargo.toml" <<EOF
[package]
name = "embedder"
version = "0.1.0"
edition = "2021"

[dependencies]
bitonic-vk = { path = "../bitonic-vk-$version", default-features = false }

[workspace]
EOF
{
  echo 'fn main() -> Result<(), bitonic_vk::Error> {'
  echo "$example"
  echo '    println!("sorted keys {keys:?} values {values:?}");'
  echo '    Ok(())'
  echo '}'
} >"$work/embedder/src/main.rs"
unset SHADERC_LIB_DIR
export CARGO_TARGET_DIR=$target
# A warning in a build without the default features (dead code behind a feature) fails it.
export RUSTFLAGS="-D warnings"

# check CRATE WHAT EXPECTED [ARGS...]: builds the crate in $work/CRATE with the package's lock
# file (the versions this repository tested), refusing shaderc in its graph, runs it with ARGS
# and checks that its output has the line EXPECTED.
check() {
  local crate=$1 what=$2 expected=$3
  shift 3
  cp "$work/bitonic-vk-$version/Cargo.lock" "$work/$crate/Cargo.lock"
  cd "$work/$crate"
  if cargo tree -e build,normal --prefix none | grep -i shaderc; then
    echo "embedder: shaderc is in the dependency graph of $what (above); see Cargo.toml's glsl feature" >&2
    exit 1
  fi
  local start output
  start=$(date +%s)
  cargo build --release --quiet
  echo "embedder: cargo build --release of $what: $(($(date +%s) - start)) s"
  output=$("$target/release/$crate" "$@")
  if ! grep -qxF -- "$expected" <<<"$output"; then
    printf '%s\n' "$output" >&2
    echo "embedder: $what printed the above, not \"$expected\"" >&2
    exit 1
  fi
  echo "$expected"
}

check embedder "a crate on bitonic-vk (default-features = false)" \
  "sorted keys [-1.0, -0.0, 0.0, 3.5, NaN] values [4, 1, 3, 0, 2]"

# A wgpu renderer's crate: the README's dependency line with `features = ["wgpu"]`, its own wgpu,
# and the packaged wgpu example as its main.
mkdir -p "$work/wgpu-embedder/src"
cat >"$work/wgpu-embedder/Cargo.toml" <<EOF
[package]
name = "wgpu-embedder"
version = "0.1.0"
edition = "2021"

[dependencies]
bitonic-vk = { path = "../bitonic-vk-$version", default-features = false, features = ["wgpu"] }
bytemuck = "1"
pollster = "0.4"
wgpu = { version = "30", default-features = false, features = ["vulkan", "std", "wgsl"] }

[workspace]
EOF
cp "$work/bitonic-vk-$version/examples/wgpu_sort.rs" "$work/wgpu-embedder/src/main.rs"
check wgpu-embedder "a wgpu crate on bitonic-vk (features = [\"wgpu\"])" \
  "sorted 4096 f32 keys with their indices: in order true, values a permutation true" 4096
