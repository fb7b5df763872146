#!/usr/bin/env bash
# Issue 36's measurements, every kernel set side by side on one host:
# the kernels' micro-benchmarks (one process, sets compared inside it), the
# face engine's products (BenchmarkChunkProducts) and a K = 2^14 search
# (BenchmarkSearch, default preset, 512-d, bsgs-tbe n1 = 32, both cores),
# each set in turn, twice. Run from the repository root after `make core`.
set -euo pipefail
out=${1:-bench-results/kernels-2core}
cd core
{
	grep -m1 'model name' /proc/cpuinfo
	grep -o 'avx512ifma\|avx512_vnni\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' '
	echo
	nproc
} > "../$out/host.txt"
go test -run '^$' -bench . -benchtime 2000x -count 5 ./kernels/ | tee "../$out/micro.txt"
go test -c -o /tmp/engine.test ./face/engine/
sets=${ENCMATCH_BENCH_SETS:-scalar avx2 avx512ifma}
: > "../$out/products.txt"
: > "../$out/search.txt"
for round in 1 2; do
	for set in $sets; do
		(cd face/engine && ENCMATCH_KERNELS=$set /tmp/engine.test -test.run '^$' -test.bench ChunkProducts/tiled -test.cpu 1 -test.count 3) \
			| sed "s/^Benchmark/$set Benchmark/" | grep Benchmark | tee -a "../$out/products.txt"
		(cd face/engine && ENCMATCH_KERNELS=$set ENCMATCH_BENCH_DIM=512 ENCMATCH_BENCH_STRATEGY=bsgs-tbe ENCMATCH_BENCH_N1=32 \
			ENCMATCH_BENCH_DIR=/tmp/kernels-bench ENCMATCH_BENCH_CMP=recorded \
			/tmp/engine.test -test.run '^$' -test.bench Search -test.benchtime 3x) \
			| sed "s/^Benchmark/$set Benchmark/" | grep Benchmark | tee -a "../$out/search.txt"
	done
done
