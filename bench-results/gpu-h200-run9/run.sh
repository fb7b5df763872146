#!/usr/bin/env bash
# Run 9 (issues 37 and 35): a folded key set at n1 32 (8 giant steps
# instead of 16) on the GPU engine. From the repository root on the GPU
# machine, with python/encmatch/_lib and .whl carried.
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/python
timeout 170 python3 -m encmatch.gpu.bench --out $OUT/folded-n1-32 --work /tmp/wf --toy-strategies "" --groups 1 --replicate 8 --trials 5 --cpu-queries 1 --owner-enroll --fold --n1 32 2>&1 | tail -25
