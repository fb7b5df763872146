#!/bin/bash
cd /tmp/cm
for ks in avx512ifma avx2; do for sd in 1 0; do
  echo "== $ks seeded=$sd"
  export ENCMATCH_KERNELS=$ks ENCMATCH_BENCH_DIR=/tmp/cm/k17s$sd ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_N1=32 ENCMATCH_BENCH_FOLD=1 ENCMATCH_BENCH_K=131072 ENCMATCH_BENCH_BUDGET=4000000000 ENCMATCH_BENCH_CMP=recorded
  if [ $sd = 1 ]; then export ENCMATCH_BENCH_SEEDED=1; else unset ENCMATCH_BENCH_SEEDED; fi
  /usr/bin/time -f "%e s %M KB" ./engine.test -test.run '^$' -test.bench Search -test.benchtime 2x -test.v 2>&1 | grep -E 'Benchmark.*ns/op| KB'
done; done
for ks in scalar; do
  echo "== $ks k14"
  ENCMATCH_KERNELS=$ks ENCMATCH_BENCH_DIR=/tmp/cm/k14 ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_N1=32 ENCMATCH_BENCH_FOLD=1 ENCMATCH_BENCH_K=16384 ENCMATCH_BENCH_CMP=recorded ./engine.test -test.run '^$' -test.bench Search -test.benchtime 3x -test.v 2>&1 | grep -E 'Benchmark.*ns/op'
done
