#!/bin/bash
# K = 2^17 streamed from the key owner's (seeded) store under a 4 GB budget,
# side by side on one host: 8c06ade (issue 35's baseline), 0dfc469 (main
# before the primes changed) and 2a00243 (every prime of Q below its power
# of two), each from its own worktree (`make core` there) and Python
# package, the same virtual environment. $1: output folder.
set -u
OUT=$1; PY=/work/main/.venv/bin/python
run() { # tag checkout
	local tag=$1 src=$2
	mkdir -p $OUT/$tag
	echo "== $tag $(date -u +%H:%M:%S)"
	env -u OPENBLAS_CORETYPE PYTHONPATH=$src/python /usr/bin/time -v $PY -m encmatch bench \
		--sizes 131072 --strategies bsgs-tbe --trials 3 --encryption secret-key --memory-budget 4 \
		--out $OUT/$tag --work /tmp/facew > $OUT/$tag/log.txt 2>&1
	echo "rc $?"; grep -E 'Elapsed|Maximum resident' $OUT/$tag/log.txt
	rm -rf /tmp/facew/*
}
mkdir -p /tmp/facew
run k17-8c06ade /tmp/old8c
run k17-0dfc469-1 /tmp/before
run k17-2a00243-1 /tmp/after
run k17-2a00243-2 /tmp/after
run k17-0dfc469-2 /tmp/before
