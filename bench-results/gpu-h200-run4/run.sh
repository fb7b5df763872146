#!/usr/bin/env bash
# Run 4 (issue 37): the shared-memory NTT kernels (two launches per
# transform) against the per-stage ones (five), same machine, same run.
# From the repository root on the GPU machine, with python/encmatch/_lib
# and .whl carried; OUT is where the files come back from.
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/python
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | grep -E 'Model name|^CPU\(s\)'; python3 -c 'import cupy; print("cupy", cupy.__version__)'; } > $OUT/env.txt 2>&1
timeout 120 python3 -m pytest -q --noconftest -p no:cacheprovider python/tests/test_gpu.py -k cuda 2>&1 | tail -15 | tee $OUT/pytest.txt
timeout 160 python3 -m encmatch.gpu.bench --out $OUT/block --work /tmp/wb --toy-strategies "" --groups 1 --replicate 4 --trials 5 --profile --cpu-queries 1 --owner-enroll 2>&1 | tail -40
ENCMATCH_GPU_NTT=stages timeout 120 python3 -m encmatch.gpu.bench --out $OUT/stages --work /tmp/ws --toy-strategies "" --groups 1 --replicate 4 --trials 5 --profile --cpu-queries 0 --owner-enroll 2>&1 | tail -40
