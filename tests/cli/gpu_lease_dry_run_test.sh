#!/bin/bash
# bench/gpu_lease.sh end to end without a GPU (ctest bench_gpu_lease_dry_run,
# label bench): --dry-run --quick on the strict fake driver, so the lease's
# one command cannot rot between leases. Every lane must start, reach its own
# work and end before its deadline; the fake driver computes nothing, so the
# value checks fail by design and are not what is checked. No step may need
# the reference backend's BLAS (the lease bundle has none): the script puts a
# library that is not a BLAS under the BLAS's name first, and this test fails
# on any message naming it. The whole run must take under 3 minutes here.
# Usage: gpu_lease_dry_run_test.sh KILN REPO
# shellcheck disable=SC2154  # $dir and $out come from lib.sh
set -u
kiln=$1
repo=$2
. "$(dirname "$0")/lib.sh"
start=$(date +%s)
# The onnx 1.23 suites the conformance tests use, when written already (the
# lease writes them itself otherwise: 13k files, slow on this machine's disk).
o123=${KILN_ONNX_TESTS:-$HOME/.cache/kiln/onnx-1.23-tests}
[ -d "$o123/node" ] && export KILN_LEASE_ONNX123=$o123
KILN=$kiln "$repo/bench/gpu_lease.sh" "$dir/lease" --budget 150 --quick --dry-run --archive "$dir/lease.tar.gz" \
  >"$out" 2>&1 || fail "gpu_lease.sh --dry-run: exit $?"
took=$(($(date +%s) - start))
res=$dir/lease
head -1 "$res/summary.txt" | grep -q "DRY RUN on the fake driver: no figure is a GPU figure" ||
  fail "summary.txt does not say it is a dry run"
grep -q "^no BLAS: a reference GEMM fails here" "$res/summary.txt" || fail "the BLAS was not hidden"
for lane in first suites models zoo zoo_dyn profiles perf wgmma; do
  grep -Eq "^$lane +[0-9]+ s to +[0-9]+ s  exit [0-9]+$" "$res/lanes.txt" ||
    fail "lane $lane did not end on its own before its deadline: $(cat "$res/lanes.txt")"
done
grep -q "^autotune  not run: a dry run" "$res/lanes.txt" || fail "autotune: no line in lanes.txt"
# Each lane reached its work.
grep -q "^test_add_bcast sm_80: output sum: .* elements outside" "$res/first.log" ||
  fail "first: gpu_test.sh --expected compared nothing with the tests' expected outputs"
grep -Eq "^onnx 1.12: [1-9][0-9]* tests to run, [1-9][0-9]* the same as 1.23's" "$res/suites.log" ||
  fail "suites: no 1.12 list, or nothing found the same as 1.23's"
for s in onnx-1.12_00 onnx-1.23_00; do
  [ -s "$res/conformance_$s.json" ] || fail "suites: no conformance_$s.json"
done
[ "$(grep -c "^node \[gpu\]: " "$res/suites.log")" = 2 ] || fail "suites: not both suites' node tests ran on the GPU path"
[ "$(grep -c "^models \[gpu\]: .* of 1 " "$res/models.log")" = 3 ] || fail "models: not 3 runs (fp32, fp16, sm_90a fp16)"
for c in fp32 fp16 bf16; do
  grep -q "^zoo \[gpu-$c\]: .* of 1 models" "$res/zoo.log" || fail "zoo: no gpu-$c run"
done
for p in fp32 fp16; do
  grep -q "^zoo dynamic \[$p, gpu\]: .* of 1 models" "$res/zoo_dyn.log" || fail "zoo_dyn: no $p run on gpu"
done
grep -q "plan on gpu at seq_past 8_0 differs from ONNX Runtime" "$res/profiles.log" ||
  fail "profiles: the decoder's plan was not run on the GPU path and compared with ONNX Runtime"
grep -q "^-- gpu_profiles (gpu): " "$res/profiles.log" || fail "profiles: gpu_profiles did not run"
grep -q "^mobilenet_v2 (fp16, sm_90, model of h100): modelled .* measured" "$res/perf.log" || fail "perf: no figures"
grep -q "^mobilenet_v2 fp16 (median ms, two rounds): sm_90 .* sm_90a (wgmma) .* sm_90a / sm_90 = " "$res/wgmma.log" ||
  fail "wgmma: no comparison"
if grep -r "BLAS library" "$res" | grep -v ":no BLAS: a reference GEMM fails here"; then
  fail "a step of the lease needs the reference backend's BLAS"
fi
if grep -l "^Traceback" "$res"/*.log; then fail "a Python step crashed"; fi
tar -tzf "$dir/lease.tar.gz" | grep -q "^lease/summary.txt$" || fail "--archive: no summary.txt in the archive"
echo "ok: bench/gpu_lease.sh --dry-run --quick in $took s"
cat "$res/lanes.txt"
