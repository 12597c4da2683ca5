#!/usr/bin/env bash
# Packs this machine's kiln build for the device machine (docs/benchmarks.md):
# .devbundle/kiln is a wrapper that runs build/bin/kiln's copy with the
# shared libraries the device image lacks (protobuf, ONNX, OpenBLAS, fmt,
# xxHash, Boost.Context, kiln's runtime), set for kiln's process alone so
# PyTorch in the same shell keeps its own. glibc, libstdc++, libgcc and
# NVRTC are the device's own (its image has CUDA 13's toolkit); the kiln
# binary needs glibc >= the version printed below.
#   bench/device_bundle.sh [BUILD_DIR]      then: run(carry=[".devbundle"], ...)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/bin/kiln" ] || { echo "no $build/bin/kiln: build first (tools/build.sh)" >&2; exit 1; }
rm -rf .devbundle
mkdir -p .devbundle/lib
cp "$build/bin/kiln" .devbundle/kiln.bin
ldd "$build/bin/kiln" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++.so*|libgcc_s.so*|libnvrtc*|libcuda.so*|libz.so*) ;;
    *) cp -L "$lib" .devbundle/lib/ ;;
  esac
done
cat > .devbundle/kiln <<'WRAP'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" exec "$here/kiln.bin" "$@"
WRAP
chmod +x .devbundle/kiln
glibc=$(objdump -T .devbundle/kiln.bin | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)
echo ".devbundle: $(du -sh .devbundle | cut -f1) (kiln needs $glibc)"
