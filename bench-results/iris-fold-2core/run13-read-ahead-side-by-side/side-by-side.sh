#!/bin/bash
# Run 13 side by side: the fold pass alone on a kept database, keys and
# query ($3: the bench's work directory), with the library $1 (tag $2),
# vmstat every 5 s beside it (the CPU's user, system, idle and I/O-wait
# shares while the product reads the database).
LIB=$1; TAG=$2; K=$3; O=/tmp/sbs-$TAG; rm -rf $O; mkdir -p $O
export ENCMATCH_LIB=$LIB GOMEMLIMIT=17GiB PYTHONPATH=/work/main/python
PY=/tmp/ci5/.venv/bin/python
date
vmstat -n 5 > $O/vmstat.txt & VM=$!
/usr/bin/time -v env -u OPENBLAS_CORETYPE $PY -m encmatch iris match --keys $K/keys --db $K/db $K/query.bin -o $O/r1.bin --stats $O/s1.json > $O/fold.log 2>&1
echo "fold rc $?"
kill $VM
$PY -m encmatch iris decrypt --keys $K/keys $O/r1.bin > $O/d.txt 2>&1; cat $O/d.txt
grep -E "Elapsed|Maximum resident|File system inputs|User time|System time" $O/fold.log
date
