#!/bin/sh
# kiln dump-ir -O --format dot on small models (issue 16): with --fused-bodies
# every node sits in exactly one place (fused members in their cluster, edges
# at top level, so Graphviz adopts no outside node into a cluster); by default
# a fused kernel is one box; labels stay short and carry tooltips.
# check_dot.py asks Graphviz (dot -Tjson0) what it makes of it.
# Usage: dot_test.sh KILN SOURCE_DIR
set -u
kiln=$1
src=$2
dot=$(mktemp)
trap 'rm -f "$dot"' EXIT
status=0
check() {  # MODEL UNFUSED_OPS...
  model=$1
  shift
  echo "== $model"
  "$kiln" dump-ir "$src/$model" -O --format dot --fused-bodies >"$dot" || { echo "FAIL: kiln dump-ir exit $?"; status=1; return; }
  python3 "$src/tests/cli/check_dot.py" "$dot" --clusters "$@" || status=1
  "$kiln" dump-ir "$src/$model" -O --format dot >"$dot" || { echo "FAIL: kiln dump-ir exit $?"; status=1; return; }
  python3 "$src/tests/cli/check_dot.py" "$dot" "$@" || status=1
  if grep -q 'subgraph cluster_n' "$dot"; then echo "FAIL: a fused cluster without --fused-bodies"; status=1; fi
}
# graph inputs, max_pool, gemm and softmax are not fused in tiny_cnn; transpose
# and reduce_max are not in small.onnx.
check examples/models/tiny_cnn.onnx max_pool gemm softmax
check tests/cli/small.onnx transpose reduce_max
# the short form must still say what the node is
"$kiln" dump-ir "$src/examples/models/tiny_cnn.onnx" -O --format dot >"$dot"
grep -q 'strides' "$dot" || { echo "FAIL: no conv attributes"; status=1; }
grep -q 'const f32\[8,3,3,3\]' "$dot" || { echo "FAIL: no weight shape"; status=1; }
grep -q 'loc: ' "$dot" || { echo "FAIL: no ONNX node names"; status=1; }
# a fused kernel's box names its ops (issue 16 item 2); members' names only in tooltips
"$kiln" dump-ir "$src/tests/cli/small.onnx" -O --format dot --fused-bodies >"$dot"
grep -q 'label="add+relu+tanh (3 ops)' "$dot" || { echo "FAIL: no 'add+relu+tanh (3 ops)' kernel label"; status=1; }
if grep -q 'label="add\\n[^"]*loc: ' "$dot"; then echo "FAIL: a fused member's label carries its ONNX name"; status=1; fi
# by default the kernel is that one box, its members' names in its tooltip
"$kiln" dump-ir "$src/tests/cli/small.onnx" -O --format dot >"$dot"
grep -q 'label="add+relu+tanh (3 ops)[^"]*", tooltip="fused ([^"]*loc: relu' "$dot" \
  || { echo "FAIL: no one-box 'add+relu+tanh (3 ops)' kernel with its members' names in the tooltip"; status=1; }
[ $status = 0 ] && echo PASS
exit $status
