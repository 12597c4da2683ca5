#!/bin/sh
# kiln compile --dump-dir writes per-pass IR, every kernel's .cu source, the
# SVG picture and an index.html whose every link resolves. An interrupted
# command leaves no dump, whole or partial (tools/kiln/dump_dir_staging.h).
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

# Interrupted: `kiln run --target sm_90` writes the whole dump while it
# compiles, then waits for its input on a FIFO nobody writes; terminated
# there (SIGTERM: a background job of sh ignores SIGINT, and kiln leaves an
# ignored signal ignored; SIGINT and SIGHUP take the same handler), it leaves
# neither the staged dump nor the folder it made for it, and dies of the signal.
mkfifo "$dir/x.fifo"
"$kiln" run "$2/small.onnx" --target sm_90 --backend sim --dump-dir "$dir/cut" --inputs "x:$dir/x.fifo" \
  >"$dir/cut.out" 2>&1 &
pid=$!
dumped() {
  for f in "$dir"/cut.kiln-tmp-*/index.html "$dir/cut/index.html"; do [ -f "$f" ] && return 0; done
  return 1
}
i=0
until dumped; do
  i=$((i + 1))
  [ $i -le 1200 ] || { kill $pid; fail "no dump after 120 s: $(cat "$dir/cut.out")"; }
  sleep 0.1
done
if [ -d "$dir/cut" ] && [ -n "$(ls -A "$dir/cut")" ]; then
  kill $pid
  fail "the dump was written into --dump-dir before the command ended"
fi
kill -TERM $pid
wait $pid 2>/dev/null
rc=$?
[ $rc -eq 143 ] || fail "terminated run: exit $rc, expected 143 (SIGTERM)"
[ -e "$dir/cut" ] && fail "an interrupted run left its --dump-dir"
ls "$dir" | grep -q kiln-tmp && fail "an interrupted run left its staged dump"
echo "PASS ($n kernels, $(echo "$links" | wc -l) links)"
