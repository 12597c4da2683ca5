#!/bin/sh
# NVRTC is loaded at run time (codegen/nvrtc/nvrtc_library.h):
#  - the kiln binary does not link it (ldd lists no libnvrtc), so the CLI
#    starts on a machine without the CUDA toolkit;
#  - without NVRTC, commands that need no GPU code generation still work;
#  - a GPU compile (--target sm_90, or the default auto) fails with exit 1 and
#    a message that says what is missing and how to install it (never exit 2,
#    never a CPU-only plan); --target cpu needs no NVRTC.
# KILN_NVRTC_LIBRARY pointing at a missing file stands for "no NVRTC here".
# Usage: nvrtc_missing_test.sh KILN CLI_TEST_DIR
set -u
KILN=$1
DIR=$2
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ldd "$KILN" | grep -i nvrtc && fail "kiln links NVRTC"

export KILN_NVRTC_LIBRARY="$tmp/no-such/libnvrtc.so.13"
"$KILN" inspect "$DIR/small.onnx" >"$tmp/inspect.out" 2>&1 || { cat "$tmp/inspect.out"; fail "inspect needs no NVRTC"; }
"$KILN" run "$DIR/small.onnx" >"$tmp/run.out" 2>&1 || { cat "$tmp/run.out"; fail "run on the reference needs no NVRTC"; }

"$KILN" compile "$DIR/small.onnx" --target sm_90 -o "$tmp/m.plan" >"$tmp/compile.out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/compile.out"; fail "compile --target sm_90 without NVRTC: exit $rc, expected 1"; }
grep -q "GPU code generation needs NVRTC (libnvrtc.so.13)" "$tmp/compile.out" || { cat "$tmp/compile.out"; fail "no clear message"; }
grep -q "no-such/libnvrtc.so.13" "$tmp/compile.out" || { cat "$tmp/compile.out"; fail "message does not say where it looked"; }
[ -e "$tmp/m.plan" ] && fail "a plan was written without NVRTC"
# Without --target (auto: a GPU plan, never a silent CPU-only one) too.
"$KILN" compile "$DIR/small.onnx" -o "$tmp/m.plan" >"$tmp/compile.out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/compile.out"; fail "compile (auto target) without NVRTC: exit $rc, expected 1"; }
grep -q "GPU code generation needs NVRTC (libnvrtc.so.13)" "$tmp/compile.out" || { cat "$tmp/compile.out"; fail "auto: no clear message"; }
[ -e "$tmp/m.plan" ] && fail "a plan was written without NVRTC (auto target)"
"$KILN" compile "$DIR/small.onnx" --target cpu -o "$tmp/c.plan" >"$tmp/compile.out" 2>&1 ||
  { cat "$tmp/compile.out"; fail "compile --target cpu needs no NVRTC"; }
echo "PASS"
