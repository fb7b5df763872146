#!/usr/bin/env bash
# Issue 33: the database with 3-byte residues (after run 8): a 2^14-code
# enrollment at preset `default`, its files' sizes. It shared the CPUs with
# a CI run, so its time is not a measurement.
set -u
cd "$(dirname "$0")/../.."
w=/tmp/iris-3byte-work
rm -rf $w && mkdir -p $w/g
{
  .venv/bin/python -m encmatch iris generate $w/g --gallery 16384 --queries 4 --enrolled 2 --seed 0
  .venv/bin/python -m encmatch iris keygen --keys $w/k
  env -u OPENBLAS_CORETYPE GOMEMLIMIT=17GiB /usr/bin/time -v \
    .venv/bin/python -m encmatch iris enroll --keys $w/k --db $w/d --t 0.34 $w/g/gallery.npz
  ls -l $w/d
  du -sb $w/d
} > bench-results/iris-seeded-2core/2p14-3byte-enroll.log 2>&1
rm -rf $w
