#!/bin/bash
# Run 10 side by side: the fold pass, then the pair pass on eyes $3 (the
# fold's flagged ones, e.g. 0,1), on the kept database, keys and query of
# run 10, with the library $1 (tag $2). With a fourth argument (a product
# file from an earlier fold pass) only the pair pass runs, on that product.
LIB=$1; TAG=$2; EYES=$3; PRODUCT=$4; K=/tmp/irisw-keep/tmpfpdri8tl; O=/tmp/sbs-$TAG; rm -rf $O; mkdir -p $O
export ENCMATCH_LIB=$LIB GOMEMLIMIT=17GiB PYTHONPATH=/work/main/python
PY=/tmp/ci5/.venv/bin/python
date
if [ -z "$PRODUCT" ]; then
	PRODUCT=$O/product.bin
	/usr/bin/time -v env -u OPENBLAS_CORETYPE $PY -m encmatch iris match --keys $K/keys --db $K/db $K/query.bin -o $O/r1.bin --product $PRODUCT --stats $O/s1.json > $O/fold.log 2>&1
	rc=$?; echo "fold rc $rc"; [ $rc = 0 ] || exit 1
	date
fi
/usr/bin/time -v env -u OPENBLAS_CORETYPE $PY -m encmatch iris match --keys $K/keys --db $K/db $K/query.bin -o $O/r2.bin --pair-eyes $EYES --product $PRODUCT --stats $O/s2.json > $O/pair.log 2>&1
echo "pair rc $?"
[ -f $O/r1.bin ] && $PY -m encmatch iris decrypt --keys $K/keys $O/r1.bin --pairs $O/r2.bin > $O/d.txt 2>&1 && cat $O/d.txt
date
