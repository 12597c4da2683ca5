#!/usr/bin/env bash
# Builds the libFuzzer targets (tools/build_asan.sh) and runs each for a
# bounded time on its seed corpus (tests/fuzz/corpus/<target>/; the IR parser
# also starts from tests/ir/*.kir). New inputs it finds go to a scratch folder
# in the build tree, a crash to build-asan/fuzz-artifacts/<target>-crash-*.
# Fix the bug, then add the artifact to tests/fuzz/corpus/<target>/.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]     (default: 60 s each; onnx_import ir_parser plan_load)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(onnx_import ir_parser plan_load)
BUILD_DIR=${KILN_ASAN_BUILD_DIR:-build-asan}
tools/install_deps.sh
tools/build_asan.sh "${TARGETS[@]/#/fuzz_}"
mkdir -p "$BUILD_DIR/fuzz-artifacts"
status=0
for t in "${TARGETS[@]}"; do
  work="$BUILD_DIR/tests/fuzz/work/$t"
  mkdir -p "$work"
  seeds=(tests/fuzz/corpus/"$t")
  [ "$t" = ir_parser ] && seeds+=(tests/ir)
  echo "fuzz: $t for $SECS s"
  if ! "$BUILD_DIR/bin/fuzz_$t" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$BUILD_DIR/fuzz-artifacts/$t-" "$work" "${seeds[@]}" 2>"$BUILD_DIR/fuzz-$t.log"; then
    tail -n 60 "$BUILD_DIR/fuzz-$t.log"
    echo "fuzz: $t found a bug; reproduce with $BUILD_DIR/bin/fuzz_$t <artifact above>"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$BUILD_DIR/fuzz-$t.log" | tail -n 2
  fi
done
exit $status
