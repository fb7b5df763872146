#!/bin/bash
# n1 = 32 against n1 = 64 (bsgs-tbe), preset real, K = 65536 (2 groups), in memory, public-key store, kappa 13, 512-d.
B=/tmp/engine_new.test
common="GOGC=25 ENCMATCH_BENCH_DIR=/tmp/bench16 ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_KAPPA=13 ENCMATCH_BENCH_K=65536 ENCMATCH_BENCH_PRESET=real"
for n1 in 32 64; do
  echo "== setup n1=$n1"
  env $common ENCMATCH_BENCH_N1=$n1 ENCMATCH_BENCH_SETUP_ONLY=1 $B -test.run '^$' -test.bench 'Search' -test.benchtime 1x -test.v 2>&1 | grep -E "keygen|enroll"
done
for r in 1 2; do
for n1 in 32 64; do
  echo "== n1=$n1 run $r"
  env $common ENCMATCH_BENCH_N1=$n1 /usr/bin/time -f "peak_rss_kb %M" $B -test.run '^$' -test.bench 'Search/membership' -test.benchtime 3x 2>&1 | grep -E "ns/op|peak"
done
done
