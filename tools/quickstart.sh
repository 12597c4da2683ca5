#!/usr/bin/env bash
# The first command on a fresh machine: installs what is missing, builds the
# kiln CLI into build/ (the `kiln` target only: tools/test.sh builds the
# rest), then runs the bundled example model and compiles it into a GPU plan.
#
# GPU code generation needs NVRTC and the CUDA headers its kernels include.
# With a CUDA 13 toolkit (/usr/local/cuda, or CUDA_PATH) kiln uses it; without
# one, they come from PyPI: the nvidia-cuda-nvrtc (libnvrtc.so.13),
# nvidia-cuda-runtime (cuda.h, cuda_fp16.h, cuda_bf16.h) and nvidia-cuda-crt
# (crt/host_defines.h, which the simulator's host build of vector_types.h
# includes) cu13 wheels, installed
# into the project's .venv, where CMake finds the headers and kiln finds NVRTC
# at run time (codegen/nvrtc/nvrtc_library.h). No GPU is needed to compile.
# KILN_JOBS=N: parallel build jobs (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
tools/install_deps.sh --build-only

toolkit=${CUDA_PATH:-/usr/local/cuda}
if [ -f "$toolkit/include/cuda_fp16.h" ] && ls "$toolkit"/lib64/libnvrtc.so.13* >/dev/null 2>&1; then
  echo "kiln: CUDA toolkit in $toolkit"
else
  echo "kiln: no CUDA toolkit ($toolkit): NVRTC and the CUDA headers from PyPI into .venv"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check \
    "nvidia-cuda-nvrtc>=13,<14" "nvidia-cuda-runtime>=13,<14" "nvidia-cuda-crt>=13,<14"
fi

# Configure once; again if an earlier configure found no CUDA headers.
if [ ! -f build/CMakeCache.txt ] || grep -q '^KILN_CUDA_HEADERS_DIR:PATH=.*NOTFOUND' build/CMakeCache.txt; then
  log=$(mktemp)
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -UKILN_CUDA_HEADERS_DIR -UKILN_CUDA_INCLUDE_DIR > "$log" ||
    { cat "$log"; rm -f "$log"; exit 1; }
  grep "kiln: " "$log" || true
  rm -f "$log"
fi
cmake --build build -j "${KILN_JOBS:-$(nproc)}" --target kiln
echo "kiln: built in $(( $(date +%s) - t0 )) s"

echo
echo "== kiln doctor"
build/bin/kiln doctor
echo
echo "== kiln run examples/models/tiny_cnn.onnx"
build/bin/kiln run examples/models/tiny_cnn.onnx --iterations 10
echo
echo "== kiln compile examples/models/tiny_cnn.onnx --target sm_90 -o build/tiny_cnn.plan"
build/bin/kiln compile examples/models/tiny_cnn.onnx --target sm_90 -o build/tiny_cnn.plan
echo
echo "kiln: quickstart done in $(( $(date +%s) - t0 )) s"
