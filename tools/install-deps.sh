#!/usr/bin/env bash
# Installs what vkattn needs on Debian 12 / Ubuntu 22.04+: compiler and CMake, the Vulkan loader
# and headers, volk, glslangValidator, cmocka, utf8proc (the BPE tokenizer's Unicode classes),
# Mesa's software Vulkan driver (lavapipe, for machines without a GPU) and the Khronos
# validation layers, python3 (the binding's test), and clang with its sanitizer and libFuzzer
# runtimes (tools/fuzz.sh). Safe to run again.
# Elsewhere: install the LunarG Vulkan SDK (it ships volk and glslangValidator), CMake, a C11
# compiler and cmocka; see README.md, "Quick start".
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libvulkan1 libvulkan-dev libvulkan-volk-dev glslang-tools
  libcmocka-dev libutf8proc-dev python3
  mesa-vulkan-drivers vulkan-validationlayers
  clang libclang-rt-dev
)

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps.sh: this script needs apt-get (Debian/Ubuntu). Install instead:" >&2
  echo "  ${packages[*]}" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-deps.sh: run as root or install sudo" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
