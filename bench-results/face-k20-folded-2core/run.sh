#!/bin/bash
# K = 2^20 at the folded default (issue 35): keys and the key owner's
# seeded index made first (setup only, its own process), then both modes
# streamed from disk under a 4 GB budget in a process of their own, every
# answer decrypted and compared with brute force by the benchmark.
set -u
cd /work/main/core
go test -c -o /tmp/engine.test ./face/engine/ || exit 1
export ENCMATCH_BENCH_DIR=/tmp/k20 ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe \
	ENCMATCH_BENCH_FOLD=1 ENCMATCH_BENCH_SEEDED=1 ENCMATCH_BENCH_K=1048576
mkdir -p /tmp/k20
cd face/engine
echo "== setup $(date -u +%H:%M:%S)"
ENCMATCH_BENCH_SETUP_ONLY=1 /usr/bin/time -v /tmp/engine.test -test.run '^$' -test.bench Search -test.benchtime 1x -test.v -test.timeout 60m 2>&1 | grep -E 'keygen|enroll|Elapsed|Maximum resident|SKIP|FAIL|ok'
du -sb /tmp/k20/index-* /tmp/k20/keys-*/server
echo "== search $(date -u +%H:%M:%S)"
ENCMATCH_BENCH_NO_WARMUP=1 ENCMATCH_BENCH_BUDGET=4000000000 ENCMATCH_BENCH_CMP=lattigo GOGC=25 \
	/usr/bin/time -v /tmp/engine.test -test.run '^$' -test.bench Search -test.benchtime 1x -test.v -test.timeout 60m 2>&1 \
	| grep -E 'Benchmark|streamed|Elapsed|Maximum resident|User time|System time|FAIL|ok'
echo "== done $(date -u +%H:%M:%S)"
