#!/bin/bash
cd /tmp/cm
export ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_N1=32 ENCMATCH_BENCH_FOLD=1 ENCMATCH_BENCH_K=65536 ENCMATCH_BENCH_CMP=recorded
for sd in 1 0; do
  export ENCMATCH_BENCH_DIR=/tmp/cm/k16s$sd
  if [ $sd = 1 ]; then export ENCMATCH_BENCH_SEEDED=1; else unset ENCMATCH_BENCH_SEEDED; fi
  ENCMATCH_BENCH_SETUP_ONLY=1 ./engine.test -test.run '^$' -test.bench Search -test.benchtime 1x > /dev/null 2>&1
done
for ks in avx512ifma avx2; do
for cfg in "0 0" "0 4000000000" "1 4000000000"; do set -- $cfg
  export ENCMATCH_KERNELS=$ks ENCMATCH_BENCH_DIR=/tmp/cm/k16s$1 ENCMATCH_BENCH_BUDGET=$2
  if [ $1 = 1 ]; then export ENCMATCH_BENCH_SEEDED=1; else unset ENCMATCH_BENCH_SEEDED; fi
  echo "== $ks seeded=$1 budget=$2"
  ./engine.test -test.run '^$' -test.bench Search -test.benchtime 2x -test.v 2>&1 | grep -E 'ns/op'
done; done
