#!/usr/bin/env bash
# Installs what kiln needs to build and test, from Debian's packages, only
# when something is missing (so a second run costs a second). Needs root or sudo.
set -euo pipefail

PACKAGES=(
  build-essential cmake ccache pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  libopenblas-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev libxxhash-dev libboost-context-dev
  llvm-14-tools graphviz python3 python3-venv
  strace clang libclang-rt-14-dev
  python3-dev python3-pybind11
)

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
