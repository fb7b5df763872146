#!/bin/bash
# Run 14 side by side: both passes (the fold pass keeping its product,
# then the pair pass on eyes 0 and 1 reading it) on a kept database, keys
# and query ($3: the bench's work directory), with the library $1 (tag $2).
LIB=$1; TAG=$2; K=$3; O=/tmp/sbs-$TAG; rm -rf $O; mkdir -p $O
export ENCMATCH_LIB=$LIB GOMEMLIMIT=17GiB PYTHONPATH=/work/main/python
PY=/tmp/ci5/.venv/bin/python
date
/usr/bin/time -v env -u OPENBLAS_CORETYPE $PY -m encmatch iris match --keys $K/keys --db $K/db $K/query.bin -o $O/r1.bin --stats $O/s1.json --product $O/P.bin > $O/fold.log 2>&1
echo "fold rc $?"
/usr/bin/time -v env -u OPENBLAS_CORETYPE $PY -m encmatch iris match --keys $K/keys --db $K/db $K/query.bin -o $O/r2.bin --stats $O/s2.json --product $O/P.bin --pair-eyes 0,1 > $O/pair.log 2>&1
echo "pair rc $?"
$PY -m encmatch iris decrypt --keys $K/keys $O/r1.bin --pairs $O/r2.bin > $O/d.txt 2>&1; cat $O/d.txt
grep -E "Elapsed|Maximum resident|User time|System time" $O/fold.log $O/pair.log
rm -f $O/P.bin
date
