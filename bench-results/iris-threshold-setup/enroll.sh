#!/usr/bin/env bash
# The threshold iris system at the 128-bit `threshold` preset through its roles: setup, public
# enrollment of 1,000 generated codes (one block), the parties' contributions, completion, a query
# of 4 eyes x 31 rotations, the match. Every command under /usr/bin/time (wall s, peak RSS KB).
set -euo pipefail
cd /tmp/thr && rm -rf work && mkdir work && cd work
E="env -u OPENBLAS_CORETYPE GOMEMLIMIT=17GiB /work/main/.venv/bin/python -m encmatch"
T="/usr/bin/time -f %e_s_%M_KB"
$E iris setup init --setup setup.json --preset threshold --threshold 2 --blocks 1
for i in 1 2 3; do $E iris setup round1 --setup setup.json --party $i --private p$i --bulletin board; done
for i in 1 2 3; do for j in 1 2 3; do mkdir -p in$j; mv p$i/shamir-$i-to-$j.share in$j/; done; done
for i in 1 2 3; do $E iris setup round2 --setup setup.json --party $i --private p$i --bulletin board --shares in$i; done
$E iris setup finalize --setup setup.json --bulletin board --keys keys
rm -rf board
mkdir -p data && $E iris generate data --gallery 1000 --queries 4 --enrolled 2 --seed 5
echo "enroll (enroller)"; $T $E iris enroll --keys keys --db db --t 0.34 data/gallery.npz
for i in 1 2 3; do echo "contribute party $i"; $T $E iris contribute --setup setup.json --party $i --private p$i --keys keys --db db -o c$i.bin; done
echo complete; $T $E iris complete --keys keys --db db c1.bin c2.bin c3.bin
echo query; $T $E iris query --keys keys data/queries.npz -o q.bin
echo match; $T $E iris match --keys keys --db db q.bin -o r.bin --stats stats.json
du -sb db db/* c1.bin q.bin r.bin
cat stats.json
