#!/usr/bin/env bash
# Run 10 (issue 37): the engine at 3e1c724+ (the folded real part through
# Ring.automorphisms, not yet run on a GPU) and payload fetches on the GPU
# (the similarity and comparator on the device, the core's compaction on
# the CPU). From the repository root on the GPU machine, with
# python/encmatch/_lib and .whl carried.
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | grep -E 'Model name|^CPU\(s\)'; } > $OUT/env.txt 2>&1
export PYTHONPATH=/tmp/site:$PWD/python
# 1. the CUDA tests: every strategy and layout byte-identical to the CPU engine, payload fetches, Ray actors.
timeout 170 python3 -m pytest -q --noconftest -p no:cacheprovider python/tests/test_gpu.py -k cuda 2>&1 | tail -30 | tee $OUT/pytest.txt
# 2. run 9's configuration again (folded, n1 32): the same numbers after the refactor?
timeout 120 python3 -m encmatch.gpu.bench --out $OUT/folded-n1-32 --work /tmp/wf --toy-strategies "" --groups 1 --replicate 8 --trials 5 --cpu-queries 1 --owner-enroll --fold --n1 32 2>&1 | tail -22
# 3. payload fetches: a payload key set (one more level), 7 int16 values per record, 2 groups.
timeout 150 python3 -m encmatch.gpu.bench --out $OUT/payload --work /tmp/wp --toy-strategies "" --groups 2 --replicate 1 --trials 5 --cpu-queries 1 --owner-enroll --fold --n1 32 --payload-width 7 2>&1 | tail -22
