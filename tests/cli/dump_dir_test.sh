#!/bin/sh
# kiln compile --dump-dir writes per-pass IR, every kernel's .cu source, the
# SVG picture and an index.html whose every link resolves.
# Usage: dump_dir_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
. "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; ls -R "$dir"; exit 1; }
"$kiln" compile "$2/small.onnx" --target cpu --dump-dir "$dir/d" >/dev/null 2>&1 || fail "kiln compile exit $?"
d=$dir/d
[ -f "$d/index.html" ] || fail "no index.html"
[ -f "$d/000.input.kir" ] || fail "no per-pass IR"
grep -q '<svg' "$d/final.svg" || fail "no final.svg"
n=$(ls "$d"/kernels/*.cu 2>/dev/null | wc -l)
[ "$n" -eq 3 ] || fail "$n kernel sources, expected 3 (fused pointwise, transpose, reduce_max)"
for f in "$d"/kernels/*.cu; do grep -q '__global__' "$f" || fail "$f is not a kernel"; done
links=$(grep -o 'href="[^"]*"' "$d/index.html" | sed 's/href="//; s/"$//')
[ -n "$links" ] || fail "index.html links nothing"
for l in $links; do [ -f "$d/$l" ] || fail "index.html links missing $l"; done
for want in 000.input.kir final.svg kernels/kiln_pw_fused_ kernels/kiln_inj_transpose_ kernels/kiln_red_reduce_max_; do
  echo "$links" | grep -q "^$want" || fail "index.html does not link $want"
done
grep -q '<td>add_bias+relu+tanh</td><td>fused</td>' "$d/index.html" || fail "kernel table lacks the fused node"
echo "PASS ($n kernels, $(echo "$links" | wc -l) links)"
