#!/usr/bin/env bash
# The threshold iris setup at the 128-bit `threshold` preset, each party's step timed (2-core host).
set -euo pipefail
cd /tmp/thr && rm -rf work && mkdir work && cd work
E="env -u OPENBLAS_CORETYPE /work/main/.venv/bin/python -m encmatch"
T="/usr/bin/time -f %e_s_%M_KB"
$T $E iris setup init --setup setup.json --preset threshold --threshold 2 --blocks 1
for i in 1 2 3; do echo "round1 party $i"; $T $E iris setup round1 --setup setup.json --party $i --private p$i --bulletin board; done
for i in 1 2 3; do for j in 1 2 3; do mkdir -p in$j; mv p$i/shamir-$i-to-$j.share in$j/; done; done
for i in 1 2 3; do echo "round2 party $i"; $T $E iris setup round2 --setup setup.json --party $i --private p$i --bulletin board --shares in$i; done
echo finalize; $T $E iris setup finalize --setup setup.json --bulletin board --keys keys
du -sb board keys keys/* p1 in1
ls board | wc -l; ls keys/server | wc -l
