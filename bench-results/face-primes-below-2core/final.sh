#!/bin/bash
# After side-by-side.sh: main with the masks drawn by the workers (39eb00f,
# this checkout) against 8c06ade again, K = 2^17 as there and K = 2^14
# (public-key store, where no mask is drawn). $1: output folder.
set -u
OUT=$1; PY=/work/main/.venv/bin/python
run() { # tag checkout args...
	local tag=$1 src=$2; shift 2
	mkdir -p $OUT/$tag
	echo "== $tag $(date -u +%H:%M:%S)"
	env -u OPENBLAS_CORETYPE PYTHONPATH=$src/python /usr/bin/time -v $PY -m encmatch bench "$@" \
		--out $OUT/$tag --work /tmp/facew > $OUT/$tag/log.txt 2>&1
	echo "rc $?"; grep -E 'Elapsed|Maximum resident' $OUT/$tag/log.txt
	rm -rf /tmp/facew/*
}
K17="--sizes 131072 --strategies bsgs-tbe --trials 3 --encryption secret-key --memory-budget 4"
K14="--sizes 16384 --strategies bsgs-tbe --trials 4"
mkdir -p /tmp/facew
run k17-39eb00f-1 /work/main $K17
run k14-8c06ade /tmp/old8c $K14
run k14-39eb00f /work/main $K14
run k17-39eb00f-2 /work/main $K17
run k17-8c06ade-2 /tmp/old8c $K17
