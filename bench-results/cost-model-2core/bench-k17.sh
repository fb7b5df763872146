#!/bin/bash
cd /work/main
for n1 in 32 16; do
  env -u OPENBLAS_CORETYPE .venv/bin/python -m encmatch bench --sizes 131072 --strategies bsgs-tbe --n1 $n1 --trials 3 --encryption secret-key,public-key --memory-budget 4 --out /tmp/cm/b17n$n1 --work /tmp/cm/b17w > /tmp/cm/b17n$n1.log 2>&1
done
