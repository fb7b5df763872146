#!/bin/bash
# Issue 35's targets side by side on one host: 8c06ade (the issue's
# baseline, its own worktree and Python package) against HEAD, each with
# its own defaults (8c06ade: plain layout, n1 32; HEAD: folded, n1 16),
# default preset, kappa 13, 512-d synthetic workload, every answer checked
# against brute force by the bench. $1: output folder; $2: HEAD's checkout.
set -u
OUT=$1; NEW=${2:-/work/main}; OLD=/tmp/old8c
PY=$NEW/.venv/bin/python
run() { # tag checkout args...
	local tag=$1 src=$2; shift 2
	mkdir -p $OUT/$tag
	echo "== $tag $(date -u +%H:%M:%S)"
	env -u OPENBLAS_CORETYPE PYTHONPATH=$src/python /usr/bin/time -v $PY -m encmatch bench "$@" \
		--out $OUT/$tag --work /tmp/facew > $OUT/$tag/log.txt 2>&1
	echo "rc $?"; grep -E 'Elapsed|Maximum resident' $OUT/$tag/log.txt
	rm -rf /tmp/facew/*
}
mkdir -p /tmp/facew
for round in 1 2; do
	run k14-8c06ade-$round $OLD --sizes 16384 --strategies bsgs-tbe --trials 4
	run k14-head-$round $NEW --sizes 16384 --strategies bsgs-tbe --trials 4
done
run k17-8c06ade $OLD --sizes 131072 --strategies bsgs-tbe --trials 3 --encryption secret-key --memory-budget 4
run k17-head $NEW --sizes 131072 --strategies bsgs-tbe --trials 3 --encryption secret-key --memory-budget 4
