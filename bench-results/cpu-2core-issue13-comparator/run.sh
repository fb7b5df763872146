#!/bin/bash
# side-by-side: old comparator (commit 1428144) at kappa 10 vs new at kappa 13 (and 10), 2^14, 512-d, bsgs-tbe
set -u
cd /work/main
old() { (cd /tmp/oldtree && PYTHONPATH=/tmp/oldtree/python ENCMATCH_LIB=/tmp/oldlib/libencmatch.so env -u OPENBLAS_CORETYPE /work/main/.venv/bin/encmatch bench --sizes 16384 --strategies bsgs-tbe --trials 4 --kappa $1 --out /tmp/bench/$2 --work /tmp/benchwork); }
new() { env -u OPENBLAS_CORETYPE .venv/bin/encmatch bench --sizes 16384 --strategies bsgs-tbe --trials 4 --kappa $1 --out /tmp/bench/$2 --work /tmp/benchwork; }
old 10 old10a; new 13 new13a; new 10 new10a; old 10 old10b; new 13 new13b
