"""Statistics of a template population: impostor/genuine distances, degrees of freedom, FMR and FNMR.

:func:`measure` matches a query batch against a gallery with the
plaintext model (:mod:`encmatch.iris.model`) and reports, over
(query eye, gallery entry) pairs:

- impostor FHD at a single rotation (shift 0): mean, std and Daugman's
  degrees of freedom ``DoF = p (1 - p) / var``;
- impostor and genuine FHD minimised over the ``rho`` rotations;
- mask coverage;
- per threshold ``t``: FMR (impostor pairs with min FHD ``< t``), FNMR
  (genuine pairs with min FHD ``>= t``), and, since a measured FMR of 0
  says little, the binomial model's single-rotation FMR
  ``P[Binomial(DoF, 1/2) / DoF < t]`` and its union bound over ``rho``
  rotations.

``encmatch iris calibrate`` prints it; ``docs/IRIS.md`` records a run.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgument
from .encoding import DEFAULT_ROTATION_SHIFT
from .model import match
from .templates import NOT_ENROLLED, Templates

__all__ = ["measure", "binomial_fmr", "summary"]


def binomial_fmr(t: float, dof: float) -> float:
    """``P[X / N < t]`` for ``X ~ Binomial(N, 1/2)``, ``N = round(dof)``: Daugman's model of one impostor comparison."""
    n = int(round(dof))
    if n < 1:
        raise InvalidArgument(f"degrees of freedom must be >= 1, got {dof}")
    top = math.ceil(t * n) - 1
    logs = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2) for k in range(top + 1)]
    return float(sum(math.exp(x) for x in logs))


def summary(x: np.ndarray) -> dict:
    """Count, mean, std, min and max of a 1-D sample."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return {"count": 0}
    return {"count": int(x.size), "mean": float(x.mean()), "std": float(x.std()),
            "min": float(x.min()), "max": float(x.max())}


def _genuine_mask(queries: Templates, gallery: Templates) -> np.ndarray:
    """``[q, n]`` True on (query eye, its enrolled gallery entry) pairs."""
    if queries.truth is None:
        raise InvalidArgument("the queries carry no ground truth (truth), so genuine pairs are unknown")
    position = {g: i for i, g in enumerate(gallery.ids)}
    out = np.zeros((len(queries), len(gallery)), dtype=bool)
    for e, tr in enumerate(queries.truth):
        if tr != NOT_ENROLLED:
            if tr not in position:
                raise InvalidArgument(f"query {queries.ids[e]} is enrolled as {tr!r}, which is not in the gallery")
            out[e, position[tr]] = True
    return out


def measure(
    queries: Templates,
    gallery: Templates,
    thresholds: tuple[float, ...] = (0.34, 0.375),
    rotation_shift: int = DEFAULT_ROTATION_SHIFT,
    progress: bool | None = None,
) -> dict:
    """Distance statistics and FMR/FNMR per threshold of ``queries`` (with ``truth``) against ``gallery``."""
    genuine = _genuine_mask(queries, gallery)
    single = match(queries, gallery, 0.5, rotation_shift=0, pairs=True, progress=progress).min_fhd
    rotated = match(queries, gallery, 0.5, rotation_shift=rotation_shift, pairs=True, progress=progress).min_fhd
    imp0, imp, gen = single[~genuine], rotated[~genuine], rotated[genuine]
    p, var = float(imp0.mean()), float(imp0.var())
    dof = p * (1 - p) / var if var > 0 else float("inf")
    rho = 2 * rotation_shift + 1
    rates = {
        str(t): {
            "fmr": float(np.mean(imp < t)), "fmr_count": int(np.sum(imp < t)),
            "fnmr": float(np.mean(gen >= t)) if gen.size else None, "fnmr_count": int(np.sum(gen >= t)),
            "binomial_fmr_one_rotation": binomial_fmr(t, dof),
            "binomial_fmr_union_bound": min(1.0, rho * binomial_fmr(t, dof)),
        }
        for t in thresholds
    }
    coverage = np.concatenate([gallery.mask_coverage(), queries.mask_coverage()])
    return {
        "gallery": len(gallery), "queries": len(queries), "genuine_pairs": int(genuine.sum()),
        "impostor_pairs": int(imp.size), "rotations": rho,
        "impostor_one_rotation": {**summary(imp0), "dof": dof},
        "impostor_min_over_rotations": summary(imp),
        "genuine_min_over_rotations": summary(gen),
        "mask_coverage": summary(coverage),
        "thresholds": rates,
    }
