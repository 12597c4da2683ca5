#!/usr/bin/env bash
# Installs what kiln needs to build and test, from Debian's packages, only
# when something is missing (so a second run costs a second). Needs root or sudo.
#   tools/install_deps.sh              everything tools/test.sh needs
#   tools/install_deps.sh --build-only what building the kiln CLI needs
#                                      (tools/quickstart.sh)
set -euo pipefail

# Building kiln (CMake's configure needs GTest and Boost.Context too); the CUDA
# headers and NVRTC come from the toolkit or from PyPI wheels (quickstart).
BUILD_PACKAGES=(
  build-essential cmake ccache pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev
  libopenblas-dev libgtest-dev libgmock-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev libxxhash-dev libboost-context-dev libjemalloc-dev
  # ImageDecoder (frontend/image_decode/): JPEG, PNG, TIFF, WebP, JPEG 2000
  libjpeg-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev
  # RegexFullMatch (ops/string_ops.cpp)
  libre2-dev
  python3 python3-venv
)
# The test suite besides: conformance data, benchmarks, lit/FileCheck, dot,
# the sanitizer build, Python bindings, and debootstrap for the bare-chroot
# tests (labels bundle and fresh).
TEST_PACKAGES=(
  libonnx-testdata libbenchmark-dev
  llvm-14-tools graphviz
  strace clang libclang-rt-14-dev
  python3-dev python3-pybind11 debootstrap
)
PACKAGES=("${BUILD_PACKAGES[@]}")
case ${1:-} in
  --build-only) ;;
  "") PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *) echo "install_deps.sh: unknown argument '$1' (--build-only, or nothing)" >&2; exit 1 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "kiln: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# onnx 1.23's backend tests for `kiln conformance` (generated once, cached).
"$(dirname "$0")/onnx_suite.sh"
