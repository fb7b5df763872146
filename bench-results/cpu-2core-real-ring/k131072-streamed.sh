#!/bin/bash
# default vs real at K = 131072 entries, key owner's seeded store, streamed under a 6 GB budget; bsgs-tbe n1=32, kappa 13, 512-d.
B=/tmp/engine_new.test
common="GOGC=25 ENCMATCH_BENCH_DIR=/tmp/bench16 ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_N1=32 ENCMATCH_BENCH_KAPPA=13 ENCMATCH_BENCH_K=131072 ENCMATCH_BENCH_SEEDED=1 ENCMATCH_BENCH_BUDGET=6000000000"
for p in real default; do
  echo "== setup $p"
  env $common ENCMATCH_BENCH_PRESET=$p ENCMATCH_BENCH_SETUP_ONLY=1 $B -test.run '^$' -test.bench 'Search' -test.benchtime 1x -test.v 2>&1 | grep -E "keygen|enroll"
done
for r in 1 2; do
for p in default real; do
  echo "== $p run $r"
  env $common ENCMATCH_BENCH_PRESET=$p ENCMATCH_BENCH_NO_WARMUP=1 /usr/bin/time -f "peak_rss_kb %M" $B -test.run '^$' -test.bench 'Search/membership' -test.benchtime 2x -test.v 2>&1 | grep -E "ns/op|peak|streamed"
done
done
