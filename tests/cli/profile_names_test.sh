#!/bin/sh
# Issue 16 item 10: --profile tables keep the distinguishing end of long node
# names (shortened in the middle, ir/name_cut.h), so two layers' Transposes
# are told apart and read as Transposes; a fused node shows its first member
# and how many more.
# Usage: profile_names_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
model=$2/long_names.onnx
. "$(dirname "$0")/lib.sh"

"$kiln" bench "$model" --backend ref --iterations 2 --warmup-ms 0 --profile --export-json "$dir/b.json" >"$out" 2>&1 \
  || fail "bench exit $?"
for row in '^/bert/encoder/layer\.10/\.\.\./dense/Transpose +transpose ' \
           '^/bert/encoder/layer\.11/\.\.\./dense/Transpose +transpose ' \
           '^/bert/encoder/layer\.3/\.\.\./dense/Add \+ 1 more +fused '; do
  grep -Eq "$row" "$out" || fail "profile lacks /$row/"
done
python3 - "$dir/b.json" <<'PY' || fail "the JSON keeps whole names"
import json, sys
names = {p["name"] for p in json.load(open(sys.argv[1]))["profile"]}
assert "/bert/encoder/layer.10/attention/output/dense/Transpose" in names, names
PY
echo PASS
