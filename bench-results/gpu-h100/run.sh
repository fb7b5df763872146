#!/usr/bin/env bash
# The device commands of runs 2 and 3 (issue 37), from the repository root on
# the GPU machine, with python/encmatch/_lib (the core, built here) and .whl
# (cryptography, cffi, pycparser for Python 3.12) carried; OUT is where the
# files come back from.
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/python
# run 2
timeout 150 python3 -m pytest -q --noconftest -p no:cacheprovider python/tests/test_gpu.py -k cuda | tee $OUT/pytest.txt
timeout 330 python3 -m encmatch.gpu.bench --out $OUT --work /tmp/w --toy-strategies bsgs-tbe --groups 2 --replicate 4 --trials 5 --processes 2
# run 3
timeout 100 python3 -m encmatch.gpu.bench --out $OUT/profile --work /tmp/wp --toy-strategies "" --groups 1 --replicate 1 --trials 3 --profile --cpu-queries 0 --owner-enroll
timeout 250 python3 -m encmatch.gpu.bench --out $OUT/k17 --work /tmp/wk --toy-strategies "" --groups 8 --replicate 1 --trials 3 --cpu-queries 0 --owner-enroll
