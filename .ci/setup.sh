#!/usr/bin/env bash
# Installs the system packages bitonic-vk needs to build and run on Debian or Ubuntu, saying what
# it installs, and makes the system's shaderc linkable; does nothing that is already done. Packages
# named as arguments are installed too (.ci/capi.sh's).
#   libvulkan1               the Vulkan loader
#   mesa-vulkan-drivers      lavapipe, the CPU Vulkan driver used where there is no GPU
#   vulkan-validationlayers  the Khronos validation layer (the tests turn it on)
#   libshaderc-dev glslang-dev spirv-tools   the shader compiler (the `glsl` feature), static
# Debian's libshaderc_combined.a holds shaderc alone; target/shaderc/libshaderc_combined.a (where
# .cargo/config.toml points SHADERC_LIB_DIR) joins it with glslang's and SPIRV-Tools' archives, so
# that the shaderc crate links it in seconds. Where that cannot be made, the build compiles
# shaderc from source (minutes; needs cmake, ninja-build, python3, g++ and git).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers libshaderc-dev glslang-dev spirv-tools "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  echo "setup: installing missing system packages: ${missing[*]}" >&2
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: run as root or install sudo to install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
command -v cargo >/dev/null || { echo "setup: cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }

# One archive of shaderc, glslang and SPIRV-Tools: the linker then resolves their references to
# each other in any order.
combined=target/shaderc/libshaderc_combined.a
libs=(shaderc_combined glslang SPIRV MachineIndependent GenericCodeGen OSDependent OGLCompiler HLSL
  SPIRV-Tools-opt SPIRV-Tools glslang-default-resource-limits)
dir=$(dpkg -L libshaderc-dev 2>/dev/null | grep '/libshaderc_combined\.a$' | xargs -r dirname || true)
if [ -n "$dir" ] && [ ! -f "$combined" ]; then
  script="create $combined"$'\n'
  for lib in "${libs[@]}"; do
    [ -f "$dir/lib$lib.a" ] || { echo "setup: $dir/lib$lib.a missing: shaderc will build from source" >&2; exit 0; }
    script+="addlib $dir/lib$lib.a"$'\n'
  done
  mkdir -p "$(dirname "$combined")"
  printf '%ssave\nend\n' "$script" | ar -M
  echo "setup: made $combined from the system's shaderc, glslang and SPIRV-Tools" >&2
fi
