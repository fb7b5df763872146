#!/bin/bash
# side-by-side: fold pass then pair pass on the kept DB with the library $1, tag $2, pair eyes $3
LIB=$1; TAG=$2; EYES=$3; K=/tmp/irisw-keep/tmpo6sjo7ew; O=/tmp/sbs-$TAG; rm -rf $O; mkdir -p $O
export ENCMATCH_LIB=$LIB GOMEMLIMIT=17GiB PYTHONPATH=/work/main/python
PY=/tmp/ci5/.venv/bin/python
date
/usr/bin/time -v env -u OPENBLAS_CORETYPE $PY -m encmatch iris match --keys $K/keys --db $K/db $K/query.bin -o $O/r1.bin --product $O/product.bin --stats $O/s1.json > $O/fold.log 2>&1
rc=$?; echo "fold rc $rc"; [ $rc = 0 ] || exit 1
date
/usr/bin/time -v env -u OPENBLAS_CORETYPE $PY -m encmatch iris match --keys $K/keys --db $K/db $K/query.bin -o $O/r2.bin --pair-eyes $EYES --product $O/product.bin --stats $O/s2.json > $O/pair.log 2>&1
echo "pair rc $?"
$PY -m encmatch iris decrypt --keys $K/keys $O/r1.bin --pairs $O/r2.bin > $O/d.txt 2>&1
cat $O/d.txt
rm -f $O/product.bin
date
