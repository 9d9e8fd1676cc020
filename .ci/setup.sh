#!/usr/bin/env bash
# Installs the system packages bitonic-vk needs to build and run on Debian or Ubuntu, saying what
# it installs; does nothing when they are all present.
#   libvulkan1               the Vulkan loader
#   mesa-vulkan-drivers      lavapipe, the CPU Vulkan driver used where there is no GPU
#   vulkan-validationlayers  the Khronos validation layer (the tests turn it on)
#   cmake ninja-build python3 g++   to build shaderc from source (the shader compiler, build time)
set -euo pipefail
packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers cmake ninja-build python3 g++)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "setup: installing missing system packages: ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo to install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
command -v cargo >/dev/null || { echo "setup: cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
