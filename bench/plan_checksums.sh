#!/usr/bin/env bash
# Compiles the real models (tools/prepare_models.sh's folders) into plans and
# prints one "sha256  model/target/precision" line per plan, so a refactoring
# can show that it leaves the compiler's output byte-identical:
#
#   bench/plan_checksums.sh [--kiln build/bin/kiln] [--models DIR] > after.txt
#   diff bench/results/plan_checksums.txt after.txt
#
# Not a ctest gate on purpose: every legitimate codegen change alters plan
# bytes. The committed list (bench/results/plan_checksums.txt) is the one the
# redesign (issue 13) was checked against; regenerate it when plans change
# on purpose and say why in the commit.
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=build/bin/kiln
MODELS=${KILN_BUILD_DIR:-build}/models
NAMES="resnet50 mobilenet_v2 vit_b_16 bert_base gpt2"
VARIANTS="sm_90:fp16 sm_80:fp32"
while [ $# -gt 0 ]; do
  case "$1" in
    --kiln) KILN=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --names) NAMES=${2//,/ }; shift 2 ;;
    --variants) VARIANTS=${2//,/ }; shift 2 ;;
    *) echo "usage: $0 [--kiln K] [--models DIR] [--names a,b] [--variants sm_90:fp16,...]" >&2; exit 1 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in $NAMES; do
  model=$MODELS/$name/model.onnx
  [ -f "$model" ] || { echo "$model: missing (run tools/prepare_models.sh)" >&2; exit 1; }
  for v in $VARIANTS; do
    target=${v%%:*} precision=${v##*:}
    plan=$tmp/$name-$target-$precision.plan
    "$KILN" compile "$model" --target "$target" --precision "$precision" -o "$plan" >/dev/null
    echo "$(sha256sum "$plan" | cut -d' ' -f1)  $name/$target/$precision"
  done
done
