#!/bin/sh
# The fetch-by-similarity workload (issue 18) at the secure default preset
# with the payload level, 128-d, 7 int16 payloads, t = 0.5 with rule ">",
# bound 32, on this machine's 2 cores: 1,000 and 50,000 records, count and
# payload modes, then the count query on keys without the payload level
# (the level's price). One process per run (peak RSS is per process).
set -e
cd "$(dirname "$0")/../../core"
for n in 1000 50000; do
  for plain in "" 1; do
    ENCMATCH_BENCH_RECORDS=$n ENCMATCH_BENCH_PLAIN=$plain \
      go test -run '^$' -bench PayloadWorkload -benchtime 3x -timeout 60m ./face/engine/ 2>&1 | grep -E 'Benchmark|payload_bench_test'
  done
done
