#!/bin/bash
# The runtime library must load without protobuf, ONNX, NVRTC, the CUDA
# driver, RE2 or the image libraries (the frontend's, for RegexFullMatch and
# ImageDecoder): its ELF NEEDED list may name none of them (libcuda is dlopen'ed),
# and its SONAME is versioned. Usage: check_needed.sh LIBRARY
set -euo pipefail
lib=$1
dyn=$(readelf -d "$lib")
echo "$dyn" | grep -E "NEEDED|SONAME"
if echo "$dyn" | grep NEEDED | grep -Eiq "protobuf|onnx|nvrtc|libcuda|libcudart|re2|absl|jpeg|png|tiff|webp|openjp"; then
  echo "FAIL: $lib needs a forbidden library" >&2
  exit 1
fi
echo "$dyn" | grep -q "SONAME.*\[libkiln_runtime\.so\.[0-9]\+\]" || { echo "FAIL: no versioned SONAME" >&2; exit 1; }
# Only the C API is exported.
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^kiln_' | grep -v '^_init$\|^_fini$' || true)
if [ -n "$extra" ]; then
  echo "FAIL: exported symbols besides kiln_*:" >&2
  echo "$extra" | head >&2
  exit 1
fi
echo "ok: $lib"
