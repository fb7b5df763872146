#!/usr/bin/env bash
# Run 8 (issue 37 and 35): the GPU engine on folded key sets (each vector's
# halves in complex slots: 256 diagonals per group instead of 512, the real
# part taken per group), beside the plain layout, same engine, same run.
# From the repository root on the GPU machine, with python/encmatch/_lib and
# .whl carried.
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | grep -E 'Model name|^CPU\(s\)'; } > $OUT/env.txt 2>&1
export PYTHONPATH=/tmp/site:$PWD/python
timeout 150 python3 -m pytest -q --noconftest -p no:cacheprovider python/tests/test_gpu.py -k cuda 2>&1 | tail -30 | tee $OUT/pytest.txt
timeout 170 python3 -m encmatch.gpu.bench --out $OUT/folded --work /tmp/wf --toy-strategies "" --groups 1 --replicate 8 --trials 5 --cpu-queries 1 --owner-enroll --fold 2>&1 | tail -25
timeout 150 python3 -m encmatch.gpu.bench --out $OUT/plain --work /tmp/wp --toy-strategies "" --groups 1 --replicate 8 --trials 5 --cpu-queries 0 --owner-enroll 2>&1 | tail -25
