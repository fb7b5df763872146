#!/usr/bin/env bash
# Run 7, second command: the CUDA tests after bsgs-diagonal's giant-step
# rotations were written through a strided slice (a fancy index had copied
# its index list to the device inside the graph capture, which CUDA refuses).
set -o pipefail
export PYTHONUNBUFFERED=1 ENCMATCH_KERNEL_CACHE=/tmp/kc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/python
timeout 150 python3 -m pytest -q --noconftest -p no:cacheprovider python/tests/test_gpu.py -k cuda 2>&1 | tail -40 | tee $OUT/pytest-check.txt
