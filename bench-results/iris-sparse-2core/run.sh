#!/usr/bin/env bash
# Issue 33: the half-bootstrap with sparse-secret encapsulation (preset
# `default`) against the dense one (`default-dense`, the previous
# default), back to back on one host, run 3's workload: 8 eyes (4 enrolled)
# x 3 rotations against 2^14 codes, kappa 12, t = 0.34.
set -u
cd "$(dirname "$0")/../.."
out=bench-results/iris-sparse-2core
for preset in default default-dense; do
  rm -rf /tmp/iris-sparse-work
  env -u OPENBLAS_CORETYPE GOMEMLIMIT=17GiB /usr/bin/time -v \
    .venv/bin/python -m encmatch iris bench --preset "$preset" \
    --gallery 16384 --eyes 8 --enrolled 4 --rotation-shift 1 \
    --out "$out/$preset" --work /tmp/iris-sparse-work > "$out/$preset.log" 2>&1
  du -sb /tmp/iris-sparse-work/* >> "$out/$preset.log" 2>&1
done
rm -rf /tmp/iris-sparse-work
