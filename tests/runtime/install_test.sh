#!/bin/bash
# Packaging end to end: `cmake --install` into a temporary prefix, then
#  - the installed libkiln_runtime.so passes check_needed.sh;
#  - the installed `kiln` compiles examples/models/tiny_cnn.onnx to a plan,
#    twice, byte-identically;
#  - examples/embed (C++) and examples/embed_c (C) build against the
#    INSTALLED package with CMake (find_package(kiln)), and embed_c also with
#    pkg-config; all three run the plan and print the same outputs, which
#    equal `kiln run tiny.plan --inputs` on the same ramp input;
#  - every binary built against the package starts WITHOUT LD_LIBRARY_PATH
#    (the prefix is no system library folder: the link line must carry the
#    rpath: kiln.pc's Libs, CMake's build-tree rpath for imported targets,
#    and, once the application is installed, the examples'
#    CMAKE_INSTALL_RPATH_USE_LINK_PATH);
#  - the C walk-through of docs/embedding.md compiles (-Werror) and runs.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(find "$prefix" -name 'libkiln_runtime.so.[0-9]' | head -1)
[ -n "$lib" ] || { echo "FAIL: libkiln_runtime.so.N not installed" >&2; exit 1; }
"$(dirname "$0")/check_needed.sh" "$lib"
for f in include/kiln/kiln.h include/kiln/kiln.hpp bin/kiln; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed" >&2; exit 1; }
done
pc=$(find "$prefix" -name kiln.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: kiln.pc not installed" >&2; exit 1; }
pcdir=$(dirname "$pc")

"$prefix/bin/kiln" compile "$src/examples/models/tiny_cnn.onnx" --target cpu -o "$tmp/tiny.plan" 2>/dev/null
"$prefix/bin/kiln" compile "$src/examples/models/tiny_cnn.onnx" --target cpu -o "$tmp/tiny2.plan" 2>/dev/null
cmp "$tmp/tiny.plan" "$tmp/tiny2.plan" || { echo "FAIL: two compiles differ" >&2; exit 1; }

# Only the installed package is visible to the examples' builds. No rpath is
# passed here: what an application gets by default is what is tested.
for ex in embed embed_c; do
  cmake -S "$src/examples/$ex" -B "$tmp/build-$ex" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
    >/dev/null
  cmake --build "$tmp/build-$ex" >/dev/null
  # The application installed too: CMake strips build-tree rpaths at install.
  cmake --install "$tmp/build-$ex" --prefix "$tmp/app" >/dev/null
done
# Exactly the command docs/embedding.md gives, with nothing added.
export PKG_CONFIG_PATH=$pcdir
cc -std=c99 -Wall -Wextra -Werror "$src/examples/embed_c/main.c" $(pkg-config --cflags --libs kiln) \
  -o "$tmp/embed_c_pc"

# Run without LD_LIBRARY_PATH, so a missing rpath fails here as it would for
# a user ("libkiln_runtime.so.0: cannot open shared object file").
no_ld_path() { env -u LD_LIBRARY_PATH "$@"; }
no_ld_path "$tmp/build-embed/embed" "$tmp/tiny.plan" | tee "$tmp/cpp.txt"
no_ld_path "$tmp/build-embed_c/embed_c" "$tmp/tiny.plan" > "$tmp/c.txt"
for ex in embed embed_c; do
  no_ld_path "$tmp/app/bin/$ex" "$tmp/tiny.plan" > "$tmp/app-$ex.txt" ||
    { echo "FAIL: installed $ex does not start without LD_LIBRARY_PATH" >&2; exit 1; }
done
cmp "$tmp/app-embed_c.txt" "$tmp/c.txt" || { echo "FAIL: installed embed_c differs" >&2; exit 1; }
no_ld_path "$tmp/embed_c_pc" "$tmp/tiny.plan" > "$tmp/c_pc.txt" ||
  { echo "FAIL: the pkg-config build does not start without LD_LIBRARY_PATH (no rpath from kiln.pc?)" >&2; exit 1; }

# docs/embedding.md's C walk-through is a whole program: the first ```c block
# after its heading, compiled as the doc says and run on the plan.
awk '/^## C walk-through/ {h = 1} h && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' \
  "$src/docs/embedding.md" > "$tmp/walkthrough.c"
grep -q 'int main' "$tmp/walkthrough.c" || { echo "FAIL: no C walk-through program in docs/embedding.md" >&2; exit 1; }
cc -std=c99 -Wall -Wextra -Werror "$tmp/walkthrough.c" $(pkg-config --cflags --libs kiln) -o "$tmp/walkthrough"
no_ld_path "$tmp/walkthrough" "$tmp/tiny.plan" > "$tmp/walk.txt" || { cat "$tmp/walk.txt"; echo "FAIL: walk-through" >&2; exit 1; }
grep -q '^engine: CPU reference path (' "$tmp/walk.txt" && grep -q '^probs: [-0-9.e]' "$tmp/walk.txt" ||
  { cat "$tmp/walk.txt"; echo "FAIL: walk-through printed no engine or probs line" >&2; exit 1; }
grep -q '^engine: CPU reference path (' "$tmp/cpp.txt" || { echo "FAIL: no CPU path notice" >&2; exit 1; }
cmp "$tmp/cpp.txt" "$tmp/c.txt" || { echo "FAIL: C and C++ examples differ" >&2; diff "$tmp/cpp.txt" "$tmp/c.txt"; exit 1; }
cmp "$tmp/c.txt" "$tmp/c_pc.txt" || { echo "FAIL: pkg-config build differs" >&2; exit 1; }

# The same ramp through `kiln run --inputs/--outputs`.
python3 - "$tmp" <<'PY'
import struct, sys
tmp = sys.argv[1]
n = 1 * 3 * 32 * 32
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 32, 32), }"
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
with open(tmp + "/ramp.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<%df" % n, *[(i % 17 - 8) / 8.0 for i in range(n)]))
PY
"$prefix/bin/kiln" run "$tmp/tiny.plan" --inputs input:"$tmp/ramp.npy" --outputs "$tmp/out" >/dev/null
want=$(python3 - "$tmp/out/probs.npy" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
hl = struct.unpack("<H", b[8:10])[0]
vals = struct.unpack("<10f", b[10 + hl:10 + hl + 40])
print("probs:" + "".join(" %.6g" % v for v in vals))
PY
)
got=$(grep '^probs:' "$tmp/cpp.txt")
[ "$got" = "$want" ] || { echo "FAIL: example printed '$got', kiln run gives '$want'" >&2; exit 1; }
echo "ok: install, embed, embed_c (cmake + pkg-config, no LD_LIBRARY_PATH) agree with kiln run; doc walk-through runs"
