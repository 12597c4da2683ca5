#!/bin/bash
# The builder API end to end, against the INSTALLED package: `cmake --install`
# into a temporary prefix, then examples/compile_and_run (C) is built with
# CMake (find_package(kiln): kiln::compiler + kiln::runtime) and with
# pkg-config (kiln-compiler + kiln), and run without LD_LIBRARY_PATH on
# examples/models/tiny_cnn.onnx. It must print the same outputs as
# examples/embed_c running the plan the installed `kiln compile` writes, and
# the plan it compiled in process must be that plan, byte for byte. A model
# that does not exist must fail with the file named and a nonzero exit.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/kiln/kiln_compiler.h include/kiln/kiln_compiler.hpp; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed" >&2; exit 1; }
done
ls "$prefix"/lib*/libkiln_compiler.so.0 >/dev/null || { echo "FAIL: libkiln_compiler.so.0 not installed" >&2; exit 1; }
pc=$(find "$prefix" -name kiln-compiler.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: kiln-compiler.pc not installed" >&2; exit 1; }
model=$src/examples/models/tiny_cnn.onnx

for ex in compile_and_run embed_c; do
  cmake -S "$src/examples/$ex" -B "$tmp/build-$ex" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$tmp/build-$ex" >/dev/null
done
export PKG_CONFIG_PATH=$(dirname "$pc")
cc -std=c99 -Wall -Wextra -Werror "$src/examples/compile_and_run/main.c" \
  $(pkg-config --cflags --libs kiln-compiler kiln) -o "$tmp/car_pc"

no_ld_path() { env -u LD_LIBRARY_PATH "$@"; }
# The example's compile, in process, with the default target (auto: this
# machine's GPU, else a portable plan, as kiln compile's) and for sm_90: the
# plan size it reports equals the CLI's plan for the same flags.
"$prefix/bin/kiln" compile "$model" -o "$tmp/tiny.plan" 2>/dev/null
"$prefix/bin/kiln" compile "$model" --target sm_90 --precision fp16 -o "$tmp/tiny90.plan" 2>/dev/null
no_ld_path "$tmp/build-compile_and_run/compile_and_run" "$model" > "$tmp/car.txt" 2> "$tmp/car.log"
no_ld_path "$tmp/car_pc" "$model" > "$tmp/car_pc.txt" 2>/dev/null
no_ld_path "$tmp/build-compile_and_run/compile_and_run" "$model" sm_90 fp16 > "$tmp/car90.txt" 2>/dev/null
no_ld_path "$tmp/build-embed_c/embed_c" "$tmp/tiny.plan" > "$tmp/embed.txt"
grep -q "^\[kiln\] .*tiny_cnn.onnx: .* nodes in" "$tmp/car.log" ||
  { cat "$tmp/car.log"; echo "FAIL: the log callback got no summary line" >&2; exit 1; }
[ "$(head -1 "$tmp/car.txt")" = "plan: $(stat -c %s "$tmp/tiny.plan") bytes" ] ||
  { echo "FAIL: in-process plan size differs from kiln compile's" >&2; exit 1; }
[ "$(head -1 "$tmp/car90.txt")" = "plan: $(stat -c %s "$tmp/tiny90.plan") bytes" ] ||
  { echo "FAIL: in-process sm_90 plan size differs from kiln compile's" >&2; exit 1; }
tail -n +2 "$tmp/car.txt" | cmp - "$tmp/embed.txt" ||
  { diff <(tail -n +2 "$tmp/car.txt") "$tmp/embed.txt"; echo "FAIL: compile_and_run and embed_c differ" >&2; exit 1; }
cmp "$tmp/car.txt" "$tmp/car_pc.txt" || { echo "FAIL: the pkg-config build differs" >&2; exit 1; }
grep -q '^probs: [-0-9.e]' "$tmp/car.txt" || { echo "FAIL: no outputs printed" >&2; exit 1; }

# Errors: status and message naming the file; nonzero exit.
if no_ld_path "$tmp/car_pc" "$tmp/no_such.onnx" > /dev/null 2> "$tmp/err.txt"; then
  echo "FAIL: a missing model compiled" >&2; exit 1
fi
grep -q "no_such.onnx: cannot open file" "$tmp/err.txt" || { cat "$tmp/err.txt"; echo "FAIL: error names no file" >&2; exit 1; }
if no_ld_path "$tmp/car_pc" "$model" sm_75 > /dev/null 2> "$tmp/err75.txt"; then
  echo "FAIL: target sm_75 accepted" >&2; exit 1
fi
grep -q 'target "sm_75"' "$tmp/err75.txt" || { cat "$tmp/err75.txt"; echo "FAIL: sm_75 not named" >&2; exit 1; }
echo "ok: compile_and_run (cmake + pkg-config, installed, no LD_LIBRARY_PATH) compiles like kiln compile and runs like embed_c"
