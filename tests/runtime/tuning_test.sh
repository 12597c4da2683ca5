#!/bin/bash
# kiln compile --tune / --tuning-cache end to end (docs/tuning.md), on the CPU:
#  - --tune without a usable driver: exit 1, "kiln compile --tune needs a GPU: ...";
#  - a malformed cache: exit 1 naming the file;
#  - --tune against the fake driver (FAKE_DIR/libcuda.so.1, whose events read
#    a clock advanced per launch by a cost of the launch's block count) records
#    the candidate the cost model makes fastest: the most blocks (16x16 tiles)
#    with FAKE_CUDA_COST=inverse_blocks, the fewest (64x128) with "blocks";
#    a second --tune finds the problem cached and measures nothing;
#  - applying a cache without --tune (no driver involved): --json reports the
#    stored tile, the GEMM kernel differs from the default build's, and two
#    builds are byte-identical (and differ from the default plan).
# Usage: tuning_test.sh KILN FAKE_DIR SOURCE_DIR
set -euo pipefail
kiln=$(realpath "$1")
fake=$(realpath "$2")
model=$(realpath "$3")/tests/runtime/tuning_matmul.onnx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_CACHE_DIR=$tmp/kernels
flags=(--target sm_90 --precision fp16)
fail() { echo "FAIL: $*" >&2; exit 1; }
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# No usable GPU: the fake driver's cuInit fails (and, where no driver is
# installed at all, the real lookup fails).
if FAKE_CUDA_INIT_ERROR=1 LD_LIBRARY_PATH=$fake "$kiln" compile "$model" "${flags[@]}" --tune \
     --tuning-cache "$tmp/x.json" 2>"$tmp/err.txt"; then fail "--tune without a GPU succeeded"; fi
grep -q "^error: kiln compile --tune needs a GPU: the CUDA driver does not start (cuInit: " "$tmp/err.txt" ||
  fail "unexpected message: $(cat "$tmp/err.txt")"
if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1"; then
  if "$kiln" compile "$model" "${flags[@]}" --tune --tuning-cache "$tmp/x.json" 2>"$tmp/err.txt"; then
    fail "--tune without a driver succeeded"
  fi
  grep -q "^error: kiln compile --tune needs a GPU: no CUDA driver (dlopen libcuda.so.1" "$tmp/err.txt" ||
    fail "unexpected message: $(cat "$tmp/err.txt")"
fi
[ ! -e "$tmp/x.json" ] || fail "a failed --tune wrote a cache"
# A GPU of another arch than the target.
if FAKE_CUDA_ARCH=8.0 LD_LIBRARY_PATH=$fake "$kiln" compile "$model" "${flags[@]}" --tune \
     --tuning-cache "$tmp/x.json" 2>"$tmp/err.txt"; then fail "--tune on an sm_80 GPU for sm_90 succeeded"; fi
grep -q "is sm_80, the target is sm_90: tune with --target sm_80" "$tmp/err.txt" || fail "$(cat "$tmp/err.txt")"

# A candidate that faults (CUDA_ERROR_ILLEGAL_ADDRESS, sticky: every later
# call fails) stops tuning at once with that error, instead of trying every
# other candidate on a dead context.
if FAKE_CUDA_FAIL=cuLaunchKernel:0:700 LD_LIBRARY_PATH=$fake "$kiln" compile "$model" "${flags[@]}" --tune \
     --tuning-cache "$tmp/x.json" 2>"$tmp/err.txt"; then fail "--tune after a faulting candidate succeeded"; fi
grep -q "^error: kiln compile --tune: GEMM f16:b1:m64:n80:k96: tile .* left the GPU unusable, tuning stops: CUDA: launching .*: an illegal memory access was encountered (error 700)" "$tmp/err.txt" ||
  fail "unexpected message: $(cat "$tmp/err.txt")"
[ ! -e "$tmp/x.json" ] || fail "a failed --tune wrote a cache"

# A malformed cache names the file.
echo '{"kiln_tuning_cache": 1, "entries": [{"gpu": 3}]}' > "$tmp/bad.json"
if "$kiln" compile "$model" "${flags[@]}" --tuning-cache "$tmp/bad.json" 2>"$tmp/err.txt"; then
  fail "a malformed cache was accepted"
fi
grep -q "^error: tuning cache $tmp/bad.json: entry 0: \"gpu\" must be a non-empty string" "$tmp/err.txt" ||
  fail "unexpected message: $(cat "$tmp/err.txt")"

# --tune on the fake driver.
for cost in inverse_blocks blocks; do
  FAKE_CUDA_COST=$cost LD_LIBRARY_PATH=$fake "$kiln" compile "$model" "${flags[@]}" --tune \
    --tuning-cache "$tmp/$cost.json" --tune-iterations 5 --json "$tmp/$cost.out.json" 2>"$tmp/log.txt" ||
    fail "--tune ($cost): $(cat "$tmp/log.txt")"
  [ "$(json "$tmp/$cost.json" 'len(j["entries"])')" = 1 ] || fail "$cost: not one entry"
  [ "$(json "$tmp/$cost.json" 'j["entries"][0]["gpu"]')" = "Fake GPU (kiln tests)" ] || fail "$cost: gpu"
  [ "$(json "$tmp/$cost.json" 'j["entries"][0]["cc"]')" = "9.0" ] || fail "$cost: cc"
  [ "$(json "$tmp/$cost.json" 'j["entries"][0]["problem"]')" = "f16:b1:m64:n80:k96" ] || fail "$cost: problem"
  [ "$(json "$tmp/$cost.out.json" 'j["tuning"]["tuned"]')" = 1 ] || fail "$cost: not tuned now"
  [ "$(json "$tmp/$cost.out.json" 'j["tuning"]["problems"][0]["from"]')" = cache ] || fail "$cost: winner not used"
done
tile() { json "$1" '"%dx%d" % (j["entries"][0]["config"]["bm"], j["entries"][0]["config"]["bn"])'; }
[ "$(tile "$tmp/inverse_blocks.json")" = 16x16 ] || fail "most blocks should win: $(tile "$tmp/inverse_blocks.json")"
[ "$(tile "$tmp/blocks.json")" = 64x128 ] || fail "fewest blocks should win: $(tile "$tmp/blocks.json")"
# Cached now: a second --tune measures nothing.
LD_LIBRARY_PATH=$fake "$kiln" compile "$model" "${flags[@]}" --tune --tuning-cache "$tmp/blocks.json" \
  --json "$tmp/again.json" 2>/dev/null
[ "$(json "$tmp/again.json" 'j["tuning"]["tuned"]')" = 0 ] || fail "a cached problem was tuned again"
# Another GPU's winners join the same file; applying it then needs --tuning-gpu.
FAKE_CUDA_NAME="Other GPU" FAKE_CUDA_COST=inverse_blocks LD_LIBRARY_PATH=$fake "$kiln" compile "$model" "${flags[@]}" \
  --tune --tune-iterations 5 --tuning-cache "$tmp/blocks.json" 2>/dev/null
[ "$(json "$tmp/blocks.json" '",".join(e["gpu"] for e in j["entries"])')" = "Fake GPU (kiln tests),Other GPU" ] ||
  fail "the first GPU's entry was not kept"
if "$kiln" compile "$model" "${flags[@]}" --tuning-cache "$tmp/blocks.json" 2>"$tmp/err.txt"; then
  fail "an ambiguous cache was applied"
fi
grep -q "several GPUs for cc 9.0 (kiln [0-9.]*): Fake GPU (kiln tests), Other GPU; choose one with --tuning-gpu" \
  "$tmp/err.txt" || fail "unexpected message: $(cat "$tmp/err.txt")"
"$kiln" compile "$model" "${flags[@]}" --tuning-cache "$tmp/blocks.json" --tuning-gpu "Other GPU" \
  --json "$tmp/other.json" 2>/dev/null
[ "$(json "$tmp/other.json" 'j["tuning"]["problems"][0]["tile"].split()[0]')" = 16x16x32 ] ||
  fail "--tuning-gpu did not pick Other GPU's winner"

# Applying a cache: no driver, deterministic, a different GEMM kernel.
"$kiln" compile "$model" "${flags[@]}" --json "$tmp/default.json" -o "$tmp/default.plan" 2>/dev/null
"$kiln" compile "$model" "${flags[@]}" --tuning-cache "$tmp/inverse_blocks.json" --json "$tmp/tuned.json" \
  -o "$tmp/tuned.plan" 2>/dev/null
"$kiln" compile "$model" "${flags[@]}" --tuning-cache "$tmp/inverse_blocks.json" -o "$tmp/tuned2.plan" 2>/dev/null
[ "$(json "$tmp/tuned.json" 'j["tuning"]["problems"][0]["tile"].split()[0]')" = 16x16x32 ] || fail "tile not applied"
[ "$(json "$tmp/tuned.json" 'j["tuning"]["gpu"]')" = "Fake GPU (kiln tests)" ] || fail "gpu not chosen"
kernels() { json "$1" '" ".join(sorted(k["name"] for k in j["kernels_detail"] if "matmul" in k["name"]))'; }
[ -n "$(kernels "$tmp/default.json")" ] || fail "no matmul kernel in the default build"
[ "$(kernels "$tmp/default.json")" != "$(kernels "$tmp/tuned.json")" ] || fail "the tuned GEMM kernel is the default's"
cmp -s "$tmp/tuned.plan" "$tmp/tuned2.plan" || fail "two builds with one tuning cache differ"
! cmp -s "$tmp/tuned.plan" "$tmp/default.plan" || fail "the tuned plan equals the default plan"
echo "ok: --tune errors, fake-driver winners $(tile "$tmp/inverse_blocks.json") / $(tile "$tmp/blocks.json"), cache applied deterministically"
