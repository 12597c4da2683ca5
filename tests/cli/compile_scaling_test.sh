#!/bin/sh
# bench/compile_scaling.sh --quick runs end to end: it compiles every size of
# both graph shapes, prints a fitted exponent for each and writes its JSON.
# Not a timing gate (the machine's load decides the figures), a harness check.
#   compile_scaling_test.sh KILN OUT.json
set -eu
kiln=$1 out=$2
here=$(cd "$(dirname "$0")/../.." && pwd)
log=$(KILN=$kiln "$here/bench/compile_scaling.sh" --quick --out "$out")
echo "$log"
echo "$log" | grep -Eq '^chain: exponent -?[0-9]+\.[0-9]+' || { echo "no exponent for the chain" >&2; exit 1; }
echo "$log" | grep -Eq '^ladder: exponent -?[0-9]+\.[0-9]+' || { echo "no exponent for the ladder" >&2; exit 1; }
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert all(len(s['runs'])==3 for s in j['shapes'].values()), j" "$out"
