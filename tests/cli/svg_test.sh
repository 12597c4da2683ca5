#!/bin/sh
# kiln dump-ir --format svg renders real models after the default pipeline:
# Graphviz exits 0 (kiln fails otherwise), the SVG holds a box per fused
# kernel naming its ops, and nodes carry op, type, layout and ONNX names; the
# picture's size is printed (docs/cli.md quotes it).
# Usage: svg_test.sh KILN MODEL.onnx MIN_FUSED_KERNELS
set -u
kiln=$1
model=$2
min=$3
svg=$(mktemp)
trap 'rm -f "$svg"' EXIT
fail() { echo "FAIL: $*"; head -c 2000 "$svg"; exit 1; }
[ -f "$model" ] || fail "missing $model (tools/prepare_models.sh)"
"$kiln" dump-ir "$model" -O --format svg >"$svg" || fail "kiln dump-ir exit $?"
head -c 600 "$svg" | grep -q '<svg' || fail "not an SVG"
# a fused kernel is one box: its title (the tooltip) starts "fused (KIND)"
kernels=$(grep -c '<g id="a_node[0-9]*"><a xlink:title="fused (' "$svg")
[ "$kernels" -ge "$min" ] || fail "$kernels fused kernel boxes, expected at least $min"
grep -q 'default layout' "$svg" || fail "no layout in node labels"
grep -q '>loc: ' "$svg" || fail "no ONNX node names in labels"
# a fused kernel's box says what it computes in its ops (issue 16 item 2), not
# the first of its members' ONNX names (those are in its tooltip)
grep -Eq '>[a-z_]+(\+[a-z_]+)*(\+\.\.\.)? \([0-9]+ ops?\)<' "$svg" || fail "no 'matmul+add (3 ops)' kernel label"
size=$(sed -n 's/^<svg width="\([0-9.]*\)pt" height="\([0-9.]*\)pt".*/\1 x \2 pt/p' "$svg" | head -1)
echo "PASS ($kernels fused kernels, $size)"
