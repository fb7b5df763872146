#!/usr/bin/env bash
# Issue 33: the database with its a-part regenerated from a seed (commit
# 8d6589d), preset `default`: (1) iris-sparse-2core's workload again (8 eyes
# x 3 rotations against 2^14 codes), to compare with its `default` run
# (a-part stored); (2) a 2^15-code enrollment, timed, and its files' sizes.
set -u
cd "$(dirname "$0")/../.."
out=bench-results/iris-seeded-2core
rm -rf /tmp/iris-seeded-work && mkdir -p /tmp/iris-seeded-work
env -u OPENBLAS_CORETYPE GOMEMLIMIT=17GiB /usr/bin/time -v \
  .venv/bin/python -m encmatch iris bench --preset default \
  --gallery 16384 --eyes 8 --enrolled 4 --rotation-shift 1 \
  --out "$out/2p14" --work /tmp/iris-seeded-work > "$out/2p14.log" 2>&1
rm -rf /tmp/iris-seeded-work && mkdir -p /tmp/iris-seeded-work/g
{
  .venv/bin/python -m encmatch iris generate /tmp/iris-seeded-work/g --gallery 32768 --queries 4 --enrolled 2 --seed 0
  .venv/bin/python -m encmatch iris keygen --keys /tmp/iris-seeded-work/k
  env -u OPENBLAS_CORETYPE GOMEMLIMIT=17GiB /usr/bin/time -v \
    .venv/bin/python -m encmatch iris enroll --keys /tmp/iris-seeded-work/k --db /tmp/iris-seeded-work/d --t 0.34 /tmp/iris-seeded-work/g/gallery.npz
  ls -l /tmp/iris-seeded-work/d
  du -sb /tmp/iris-seeded-work/d
} > "$out/2p15-enroll.log" 2>&1
rm -rf /tmp/iris-seeded-work
