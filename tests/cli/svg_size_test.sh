#!/bin/sh
# Issue 16: a deep model's picture is not a tall strip. deep_layers.onnx (16
# residual layers named "/encoder/layer.N/...", about BERT-base's shape at
# smaller size) rendered by `kiln dump-ir -O --format svg`: each fused kernel
# is one box (no fused clusters), the graph is cut into parts side by side
# (`cluster_part*`) at layer boundaries (no layer in two parts), the picture
# is at most twice as high as wide and less than half as high as the same
# graph drawn in one column (--no-wrap); --fused-bodies still draws clusters.
# Usage: svg_size_test.sh KILN SOURCE_DIR
set -u
kiln=$1
src=$2
model=$src/tests/cli/deep_layers.onnx
. "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
size() {  # SVG -> "WIDTH HEIGHT" in points
  sed -n 's/^<svg width="\([0-9.]*\)pt" height="\([0-9.]*\)pt".*/\1 \2/p' "$1" | head -1
}

"$kiln" dump-ir "$model" -O --format svg >"$dir/wrapped.svg" || fail "dump-ir --format svg exit $?"
"$kiln" dump-ir "$model" -O --format svg --no-wrap >"$dir/column.svg" || fail "dump-ir --no-wrap exit $?"
"$kiln" dump-ir "$model" -O --format dot >"$dir/wrapped.dot" || fail "dump-ir --format dot exit $?"
"$kiln" dump-ir "$model" -O --format dot --fused-bodies >"$dir/bodies.dot" || fail "dump-ir --fused-bodies exit $?"
set -- $(size "$dir/wrapped.svg")
w=$1 h=$2
set -- $(size "$dir/column.svg")
cw=$1 ch=$2
echo "picture: ${w} x ${h} pt; in one column: ${cw} x ${ch} pt"
awk -v w="$w" -v h="$h" 'BEGIN { exit !(w > 0 && h <= 2 * w) }' || fail "${w} x ${h} pt: more than twice as high as wide"
awk -v h="$h" -v ch="$ch" 'BEGIN { exit !(h > 0 && 2 * h < ch) }' || fail "height ${h} is not under half the one-column ${ch}"

python3 - "$dir/wrapped.dot" "$dir/bodies.dot" <<'PY' || exit 1
import re, sys
text = open(sys.argv[1]).read()
errors = []
if re.search(r'subgraph cluster_n\d+', text):
    errors.append('a fused cluster in the default picture')
# the parts and the layers whose nodes each holds
parts, cur = {}, None
for line in text.splitlines():
    m = re.match(r'\s*subgraph (cluster_part\d+) \{', line)
    if m:
        cur = m.group(1)
        parts[cur] = set()
        continue
    if line.strip() == '}':
        cur = None
        continue
    m = re.search(r'\\nloc: (/encoder/layer\.\d+)/', line)
    if cur and m:
        parts[cur].add(m.group(1))
if len(parts) < 2:
    errors.append(f'{len(parts)} parts: the deep graph is not cut')
seen = {}
for p, layers in parts.items():
    for l in layers:
        if l in seen:
            errors.append(f'{l} is in {seen[l]} and {p}: a cut inside a layer')
        seen[l] = p
if len(seen) != 16:
    errors.append(f'{len(seen)} of 16 layers found in the parts')
# one box per fused kernel: its ops in the label, every member's name in the tooltip
boxes = re.findall(r'label="([a-z_]+(?:\+[a-z_.]+)* \(\d+ ops?\))[^"]*", tooltip="fused \(([^"]*)"', text)
if len(boxes) < 32:
    errors.append(f'{len(boxes)} fused kernel boxes, expected at least 2 per layer')
elif not any('loc: /encoder/layer.0/ffn/up/MatMul' in t and 'loc: /encoder/layer.0/ffn/up/Add' in t
             for _, t in boxes):
    errors.append("no fused box whose tooltip names layer 0's MatMul and Add")
if not re.search(r' -> \w+ \[constraint=false', text):
    errors.append('no edge between parts (constraint=false)')
if not re.search(r'subgraph cluster_n\d+', open(sys.argv[2]).read()):
    errors.append('--fused-bodies draws no fused cluster')
for e in errors:
    print('FAIL:', e)
if errors:
    sys.exit(1)
print(f'{len(parts)} parts, {len(boxes)} fused kernel boxes: {sorted(set(b for b, _ in boxes))}')
PY
python3 "$src/tests/cli/check_dot.py" "$dir/wrapped.dot" || fail "check_dot.py on the wrapped picture"
echo PASS
