#!/bin/bash
# Side-by-side: engine before (HEAD 9085727) and after the tiled lazy product, same keys and index.
for r in 1 2 3; do
for v in old new; do
  echo "== $v run $r"
  GOGC=25 ENCMATCH_BENCH_DIR=/tmp/bench16 ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_K=16384 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_N1=32 ENCMATCH_BENCH_KAPPA=13 /usr/bin/time -f "peak_rss_kb %M" /tmp/engine_$v.test -test.run '^$' -test.bench 'Search/membership' -test.benchtime 3x 2>&1 | grep -E "ns/op|peak"
done
done
