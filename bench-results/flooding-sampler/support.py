"""The support of Lattigo v6.2.0's discrete Gaussian sampler at large sigma.

ring/sampler_gaussian.go draws a sample as round(x * sigma) where, in more
than 99 % of draws, x = j * wn[i] for a 31-bit integer j with i = j & 0x7F
(the ziggurat of Go's math/rand; the tail strip and the wedges' rejection
keep the same grid). Each layer i is therefore an arithmetic progression of
step 128 * wn[i] * sigma over [0, x_i sigma]. This script reads kn, wn and fn
from the patched tree the build uses, computes the exact probability of
every integer in windows of the sampler's output (acceptance of the wedges
included), and reports, per window, the fraction of integers the sampler can
output and the statistical distance between the sample and the sample
shifted by e, relative to the window's mass. A flooding that hides a noise
e needs that distance far below 1.

    .venv/bin/python bench-results/flooding-sampler/support.py            # the table below
    .venv/bin/python bench-results/flooding-sampler/support.py --check    # draws of the sampler itself

--check draws 2^17 samples at sigma = 2^30 and 2^40 from Lattigo's sampler
(core/threshold/internal/floodsamples, through `go run` in core/) and counts
those that lie on the grid computed here: a smooth discrete Gaussian would
put about the grid's share of the integers (the table's third column) there.
Run from the repository root after `make core` (which unpacks the patched
tree).
"""
import math
import re
import subprocess
import sys

import numpy as np

SRC = "core/build/lattigo/ring/sampler_gaussian.go"


def table(name, text):
    body = re.search(r"var %s = \[128\]\w+\{(.*?)\}" % name, text, re.S).group(1)
    return [float(int(v, 16)) if v.startswith("0x") else float(v) for v in re.findall(r"0x[0-9a-f]+|[0-9.e+-]+", body)]


def window_pmf(sigma, lo, width, kn, wn, fn):
    """Unnormalised probability of each integer in [lo, lo + width) (one sign)."""
    pmf = np.zeros(width + 1)
    for i in range(128):
        step = float(np.float64(np.float32(wn[i])))  # x = float64(j) * float64(wn[i])
        jlo = max(0, math.floor(lo / (step * sigma)) - 2)
        jhi = math.ceil((lo + width) / (step * sigma)) + 2
        # j = i + 128 m
        mlo, mhi = max(0, (jlo - i) // 128), (jhi - i) // 128 + 1
        m = np.arange(mlo, mhi, dtype=np.int64)
        j = i + 128 * m
        j = j[j < 2**31]
        x = j.astype(np.float64) * step
        v = np.floor(x * sigma + 0.5).astype(np.int64)
        acc = np.where(j < kn[i], 1.0, 0.0)
        if i > 0:  # the wedge: accepted with probability (exp(-x^2/2) - fn[i]) / (fn[i-1] - fn[i])
            wedge = (np.exp(-0.5 * x * x) - fn[i]) / (fn[i - 1] - fn[i])
            acc = np.where(j < kn[i], 1.0, np.clip(wedge, 0, 1))
        else:
            acc = np.where(j < kn[0], 1.0, 0.0)  # the base strip's tail draws are continuous
        keep = (v >= lo) & (v <= lo + width)
        np.add.at(pmf, v[keep] - lo, acc[keep])
    return pmf


def on_grid(v, sigma, wn):
    """Which |draws| equal round(j wn[i] sigma) for some j = i mod 128."""
    v = np.abs(v)
    hit = np.zeros(len(v), bool)
    for i in range(128):
        step = float(np.float64(np.float32(wn[i])))
        j0 = np.round(v / (step * sigma)).astype(np.int64)
        for d in (-1, 0, 1):
            j = j0 + d
            hit |= (j >= 0) & (j % 128 == i) & (np.floor(j.astype(np.float64) * step * sigma + 0.5).astype(np.int64) == v)
    return hit


def check(wn):
    print("log2 sigma | draws | on the grid")
    for log_sigma in (30, 40):
        out = subprocess.run(["go", "run", "./threshold/internal/floodsamples", "-log-sigma", str(log_sigma), "-n", str(1 << 17)],
                             cwd="core", check=True, capture_output=True, text=True).stdout
        v = np.array(out.split(), dtype=np.int64)
        print(f"{log_sigma} | {len(v)} | {on_grid(v, 2.0**log_sigma, wn).mean():.4f}")


def main():
    text = open(SRC).read()
    kn, wn, fn = table("kn", text), table("wn", text), table("fn", text)
    assert len(kn) == len(wn) == len(fn) == 128
    if sys.argv[1:] == ["--check"]:
        check(wn)
        return
    width, margin = 1 << 16, 1 << 13
    smooth = 2.0**9.5  # the honest share's own PCKS terms u e_R + e1 s_R, about 2^9.5 wide
    x = np.arange(-int(8 * smooth), int(8 * smooth) + 1)
    kernel = np.exp(-x * x / (2 * smooth * smooth))
    kernel /= kernel.sum()
    print("sigma | window start | integers the sampler can output | SD(D, D+1) | SD(D, D+2^12) | SD(D*G, D*G+2^12), G of width 2^9.5 (each relative to the window)")
    for log_sigma in (20, 24, 30, 40, 56):
        sigma = 2.0**log_sigma
        for k in (0.25, 0.5, 1.0, 2.0, 3.0):
            lo = int(k * sigma)
            pmf = window_pmf(sigma, lo - margin, width + 2 * margin, kn, wn, fn)
            p = pmf[margin:margin + width]
            if p.sum() == 0:
                print(f"2^{log_sigma} | {k} sigma | 0 (no integer of the window can be drawn) | 1 | 1 | 1")
                continue
            row = [f"2^{log_sigma}", f"{k} sigma", f"{np.count_nonzero(p) / len(p):.4f}"]
            smoothed = np.convolve(pmf, kernel, mode="same")
            for dist, e in ((pmf, 1), (pmf, 4096), (smoothed, 4096)):
                a, b = dist[margin:margin + width], dist[margin - e:margin - e + width]
                row.append(f"{0.5 * np.abs(a / a.sum() - b / b.sum()).sum():.3g}")
            print(" | ".join(row))


if __name__ == "__main__":
    main()
