#!/bin/bash
cd /tmp/cm
for sd in 1 0; do
  export ENCMATCH_BENCH_DIR=/tmp/cm/k17s$sd ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_N1=32 ENCMATCH_BENCH_FOLD=1 ENCMATCH_BENCH_K=131072 ENCMATCH_BENCH_SETUP_ONLY=1
  if [ $sd = 1 ]; then export ENCMATCH_BENCH_SEEDED=1; else unset ENCMATCH_BENCH_SEEDED; fi
  /usr/bin/time -f "%e s %M KB" ./engine.test -test.run '^$' -test.bench Search -test.benchtime 1x > /tmp/cm/setup17-$sd.log 2>&1
done
