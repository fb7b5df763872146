#!/bin/bash
# Side by side: default (complex slots) vs real (conjugate-invariant) preset, same code, K entries, bsgs-tbe n1=32, kappa 13, 512-d.
B=/tmp/engine_new.test
common="GOGC=25 ENCMATCH_BENCH_DIR=/tmp/bench16 ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_N1=32 ENCMATCH_BENCH_KAPPA=13"
for K in 32768; do
for p in default real; do
  echo "== setup $p K=$K"
  env $common ENCMATCH_BENCH_K=$K ENCMATCH_BENCH_PRESET=$p ENCMATCH_BENCH_SETUP_ONLY=1 $B -test.run '^$' -test.bench 'Search' -test.benchtime 1x -test.v 2>&1 | grep -E "keygen|enroll"
done
for r in 1 2; do
for p in default real; do
  echo "== $p K=$K run $r"
  env $common ENCMATCH_BENCH_K=$K ENCMATCH_BENCH_PRESET=$p /usr/bin/time -f "peak_rss_kb %M" $B -test.run '^$' -test.bench 'Search/membership' -test.benchtime 3x 2>&1 | grep -E "ns/op|peak"
done
done
done
