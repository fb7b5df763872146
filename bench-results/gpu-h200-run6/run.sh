#!/usr/bin/env bash
# Run 6 (issue 37): shift-and-mask index arithmetic in the kernels (no
# 64-bit divisions) and the similarity phase's key switches batched over
# the groups, against the previous engine (HEAD b32ff53's gpu package, in
# .baseline-gpu), same machine, same run. From the repository root on the
# GPU machine, with python/encmatch/_lib, .whl and .baseline-gpu carried.
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p /tmp/base && cp -r python/encmatch /tmp/base/ && cp .baseline-gpu/* /tmp/base/encmatch/gpu/
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | grep -E 'Model name|^CPU\(s\)'; python3 -c 'import cupy; print("cupy", cupy.__version__)'; which nsys ncu; } > $OUT/env.txt 2>&1
export PYTHONPATH=/tmp/site:$PWD/python
timeout 150 python3 -m pytest -q --noconftest -p no:cacheprovider python/tests/test_gpu.py -k cuda 2>&1 | tail -15 | tee $OUT/pytest.txt
timeout 170 python3 -m encmatch.gpu.bench --out $OUT/new --work /tmp/wn --toy-strategies "" --groups 1 --replicate 8 --trials 5 --profile --cpu-queries 1 --owner-enroll 2>&1 | tail -40
PYTHONPATH=/tmp/site:/tmp/base timeout 150 python3 -m encmatch.gpu.bench --out $OUT/base --work /tmp/wb --toy-strategies "" --groups 1 --replicate 8 --trials 5 --profile --cpu-queries 0 --owner-enroll 2>&1 | tail -40
