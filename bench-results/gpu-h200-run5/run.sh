#!/usr/bin/env bash
# Run 5 (issue 37): the shared-memory NTT kernels after their load and
# store loops became shared helpers (ntt_block_load, ntt_block_store):
# the CUDA tests and one secure one-group timing. From the repository root
# on the GPU machine, with python/encmatch/_lib and .whl carried.
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/python
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | grep -E 'Model name|^CPU\(s\)'; } > $OUT/env.txt 2>&1
timeout 120 python3 -m pytest -q --noconftest -p no:cacheprovider python/tests/test_gpu.py -k cuda 2>&1 | tail -4 | tee $OUT/pytest.txt
timeout 150 python3 -m encmatch.gpu.bench --out $OUT/block --work /tmp/wb --toy-strategies "" --groups 1 --replicate 1 --trials 5 --profile --cpu-queries 1 --owner-enroll 2>&1 | tail -30
