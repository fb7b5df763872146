#!/usr/bin/env bash
# Run 7 (issue 37): rotations and giant steps batched (one key product,
# division by P and permutation launch for all baby steps; every giant step
# of every group through each kernel together), against run 6's engine
# (61da08d's gpu package, in .baseline-gpu), same machine, same run. From
# the repository root on the GPU machine, with python/encmatch/_lib, .whl and .baseline-gpu carried.
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p /tmp/base && cp -r python/encmatch /tmp/base/ && cp .baseline-gpu/* /tmp/base/encmatch/gpu/
cat > /tmp/one.py <<'PY'
# One eager membership search of the secure index (for ncu).
import numpy as np, encmatch
from encmatch.gpu import GpuServer
q = encmatch.Querier('/tmp/wn/secure/keys/server').encrypt_query(np.ones(512, dtype=np.float32))
with GpuServer('/tmp/wn/secure/index', '/tmp/wn/secure/keys/server', graphs=False) as gpu:
    gpu.search(q, 'membership')
PY
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | grep -E 'Model name|^CPU\(s\)'; python3 -c 'import cupy; print("cupy", cupy.__version__)'; which nsys ncu; } > $OUT/env.txt 2>&1
export PYTHONPATH=/tmp/site:$PWD/python
timeout 150 python3 -m pytest -q --noconftest -p no:cacheprovider python/tests/test_gpu.py -k cuda 2>&1 | tail -15 | tee $OUT/pytest.txt
timeout 170 python3 -m encmatch.gpu.bench --out $OUT/new --work /tmp/wn --toy-strategies "" --groups 1 --replicate 8 --trials 5 --profile --cpu-queries 1 --owner-enroll 2>&1 | tail -40
timeout 150 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv python3 /tmp/one.py > $OUT/ncu-new.csv 2> $OUT/ncu-new.err; tail -3 $OUT/ncu-new.err
PYTHONPATH=/tmp/site:/tmp/base timeout 150 python3 -m encmatch.gpu.bench --out $OUT/base --work /tmp/wb --toy-strategies "" --groups 1 --replicate 8 --trials 5 --profile --cpu-queries 0 --owner-enroll 2>&1 | tail -40
