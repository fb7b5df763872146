"""Threshold calibration: genuine and impostor score distributions, and a delta for a target false-match rate.

On a labelled set of embeddings every pair of faces is scored (cosine):
pairs of the same identity are *genuine*, the others *impostor*.
:class:`ScoreDistributions` keeps the genuine scores exactly and the
impostor scores as a histogram of :data:`BIN`-wide bins (87 million pairs
for the 13,233 LFW faces), with exact counts, means and extremes.

:func:`calibrate` then suggests delta for a target false-match rate (FMR,
per comparison) and checks the encrypted comparator's guard bands
(:func:`encmatch.comparator`) against the distributions:

- within the **decision band** around delta the encrypted decision may
  differ from ``score >= delta``, so the worst-case encrypted FMR is the
  FMR at ``delta - decision_band`` and the worst-case FNMR the FNMR at
  ``delta + decision_band``. The suggested delta is the plaintext
  threshold at the target plus the decision band, so even the worst case
  meets the target;
- within the **value band** the comparator's output is fractional: the
  membership count of a query gains that fraction for each such score.
  The expected count a non-enrolled query collects from a gallery of
  ``gallery_size`` impostors is computed with the comparator's plaintext
  model and reported next to the exact expected number of false matches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .client import comparator
from .errors import InvalidArgument
from .validate import format_table

__all__ = ["BIN", "ScoreDistributions", "Calibration", "calibrate", "plot_distributions"]

#: Width of the impostor histogram's bins (score units); thresholds are found to this resolution.
BIN = 1e-5
_NBINS = int(round(2 / BIN))


def _bin_index(scores: np.ndarray) -> np.ndarray:
    """Histogram bin of each score (``[-1, 1]`` clipped)."""
    return np.clip(np.floor((np.asarray(scores, np.float64) + 1.0) / BIN).astype(np.int64), 0, _NBINS - 1)


def _edge(k: int | np.ndarray) -> Any:
    """Left edge of bin ``k``."""
    return -1.0 + np.asarray(k) * BIN


@dataclass
class ScoreDistributions:
    """Genuine scores (sorted, exact) and the impostor histogram with its exact moments and extremes."""

    genuine: np.ndarray
    impostor_counts: np.ndarray
    impostor_mean: float
    impostor_sd: float
    impostor_min: float
    impostor_max: float
    _tail: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.genuine = np.sort(np.asarray(self.genuine, dtype=np.float64))
        self._tail = np.concatenate([np.cumsum(self.impostor_counts[::-1])[::-1], [0]])

    @property
    def n_genuine(self) -> int:
        """Number of genuine pairs."""
        return len(self.genuine)

    @property
    def n_impostor(self) -> int:
        """Number of impostor pairs."""
        return int(self._tail[0])

    @classmethod
    def from_scores(cls, genuine: Any, impostor: Any) -> "ScoreDistributions":
        """Distributions of explicit genuine and impostor score arrays."""
        imp = np.asarray(impostor, dtype=np.float64).ravel()
        if imp.size == 0 or np.asarray(genuine).size == 0:
            raise InvalidArgument("need at least one genuine and one impostor pair")
        counts = np.bincount(_bin_index(imp), minlength=_NBINS)
        return cls(np.asarray(genuine, np.float64).ravel(), counts, float(imp.mean()), float(imp.std()),
                   float(imp.min()), float(imp.max()))

    @classmethod
    def from_labelled(cls, emb: Any, label: Any, block: int = 1024) -> "ScoreDistributions":
        """All pairs of a labelled set (``emb`` ``[n, d]``, one label per row), scored blockwise."""
        e = np.asarray(emb, dtype=np.float64)
        if e.ndim != 2 or len(e) < 2:
            raise InvalidArgument(f"need at least two embeddings [n, d], got shape {e.shape}")
        e = e / np.linalg.norm(e, axis=1, keepdims=True)
        lab = np.asarray(label)
        if len(lab) != len(e):
            raise InvalidArgument(f"{len(lab)} labels for {len(e)} embeddings")
        counts = np.zeros(_NBINS, dtype=np.int64)
        genuine = []
        n_imp, s1, s2, lo, hi = 0, 0.0, 0.0, math.inf, -math.inf
        for start in range(0, len(e) - 1, block):
            rows = np.arange(start, min(start + block, len(e) - 1))
            s = e[rows] @ e[start + 1:].T  # columns start+1..n-1
            cols = np.arange(start + 1, len(e))
            upper = cols[None, :] > rows[:, None]
            same = lab[rows][:, None] == lab[cols][None, :]
            genuine.append(s[upper & same])
            imp = s[upper & ~same]
            if imp.size:
                counts += np.bincount(_bin_index(imp), minlength=_NBINS)
                n_imp += imp.size
                s1 += float(imp.sum())
                s2 += float(np.square(imp).sum())
                lo, hi = min(lo, float(imp.min())), max(hi, float(imp.max()))
        gen = np.concatenate(genuine)
        if gen.size == 0 or n_imp == 0:
            raise InvalidArgument("need at least one genuine pair (an identity with two faces) and one impostor pair")
        mean = s1 / n_imp
        return cls(gen, counts, mean, math.sqrt(max(0.0, s2 / n_imp - mean * mean)), lo, hi)

    def fmr(self, t: float) -> float:
        """False-match rate at threshold ``t``: the fraction of impostor scores ``>= t`` (bin resolution)."""
        k = int(np.clip(math.ceil((t + 1.0) / BIN - 1e-9), 0, _NBINS))
        return float(self._tail[k]) / self.n_impostor

    def fnmr(self, t: float) -> float:
        """False non-match rate at ``t``: the fraction of genuine scores ``< t`` (exact)."""
        return float(np.searchsorted(self.genuine, t, side="left")) / self.n_genuine

    def threshold_at_fmr(self, target: float) -> float:
        """The lowest threshold (a bin edge) whose FMR is at most ``target``."""
        if not 0 < target < 1:
            raise InvalidArgument(f"a target false-match rate must be in (0, 1), got {target}")
        k = int(np.argmax(self._tail <= target * self.n_impostor))
        return float(_edge(k))

    def curve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(thresholds, fmr, fnmr)`` at every bin edge (for the EER and plots)."""
        t = _edge(np.arange(_NBINS + 1))
        fmr = self._tail / self.n_impostor
        fnmr = np.searchsorted(self.genuine, t, side="left") / self.n_genuine
        return t, fmr, fnmr

    def eer(self) -> tuple[float, float]:
        """Equal error rate and its threshold: where FMR and FNMR cross (their mean there)."""
        t, fmr, fnmr = self.curve()
        k = int(np.argmin(np.abs(fmr - fnmr)))
        return float((fmr[k] + fnmr[k]) / 2), float(t[k])

    def _impostor_quantile(self, q: float) -> float:
        """Impostor score quantile ``q`` (bin resolution)."""
        cum = np.cumsum(self.impostor_counts)
        return float(_edge(int(np.searchsorted(cum, q * self.n_impostor))))

    def stats(self) -> dict:
        """Summary numbers of both distributions (as ``shared/data/*/SOURCE.txt`` prints them)."""
        g = self.genuine
        return {
            "genuine": {"n": self.n_genuine, "mean": float(g.mean()), "sd": float(g.std()), "min": float(g[0]),
                        "p1": float(np.percentile(g, 1)), "p50": float(np.percentile(g, 50)),
                        "p99": float(np.percentile(g, 99)), "max": float(g[-1])},
            "impostor": {"n": self.n_impostor, "mean": self.impostor_mean, "sd": self.impostor_sd,
                         "min": self.impostor_min, "p1": self._impostor_quantile(0.01),
                         "p50": self._impostor_quantile(0.5), "p99": self._impostor_quantile(0.99),
                         "max": self.impostor_max},
        }


@dataclass
class Calibration:
    """The outcome of :func:`calibrate`: distributions, thresholds, the suggested delta and the guard-band check."""

    dist: ScoreDistributions
    target_fmr: float
    kappa: int
    gallery_size: int
    threshold: float
    delta: float
    suggested: bool
    bands: dict
    eer: tuple[float, float]
    thresholds: dict[float, float]
    expected_count: float
    checks: dict[str, Any]

    @property
    def ok(self) -> bool:
        """True when delta meets the target FMR even where the comparator may decide either way."""
        return bool(self.checks["worst_fmr"] <= self.target_fmr)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        return {
            "ok": self.ok, "stats": self.dist.stats(), "target_fmr": self.target_fmr, "kappa": self.kappa,
            "gallery_size": self.gallery_size, "threshold": self.threshold, "delta": self.delta,
            "suggested": self.suggested,
            "bands": {k: v for k, v in self.bands.items() if k != "values"},
            "eer": {"rate": self.eer[0], "threshold": self.eer[1]},
            "thresholds": [{"fmr": f, "threshold": t, "fnmr": self.dist.fnmr(t)} for f, t in self.thresholds.items()],
            "expected_membership_count": self.expected_count, **self.checks,
        }

    def report(self) -> str:
        """The distributions, thresholds, the suggested delta and the verdict, as text."""
        st = self.dist.stats()
        rows = [[k, f"{v['n']:,}", f"{v['mean']:.4f}", f"{v['sd']:.4f}", f"{v['min']:.4f}", f"{v['p1']:.4f}",
                 f"{v['p50']:.4f}", f"{v['p99']:.4f}", f"{v['max']:.4f}"] for k, v in st.items()]
        out = [format_table(["pairs", "n", "mean", "sd", "min", "p1", "p50", "p99", "max"], rows), ""]
        trows = [[f"{f:g}", f"{t:.4f}", _pct(self.dist.fnmr(t))] for f, t in self.thresholds.items()]
        trows.append([f"EER {_pct(self.eer[0])}", f"{self.eer[1]:.4f}", _pct(self.dist.fnmr(self.eer[1]))])
        out += [format_table(["FMR", "threshold", "FNMR"], trows), ""]
        c, b = self.checks, self.bands
        how = "suggested" if self.suggested else "given"
        out += [
            f"target FMR {self.target_fmr:g} per comparison: plaintext threshold {self.threshold:.4f}",
            f"{how} delta {self.delta:.4f} (kappa {self.kappa}: decision band +-{b['decision_band']:.2g}, "
            f"value band +-{b['value_band']:.3f})",
            f"  plaintext at delta:           FMR {c['fmr']:.3g}, FNMR {_pct(c['fnmr'])}",
            f"  worst case in the decision band: FMR {c['worst_fmr']:.3g} (at delta - band), "
            f"FNMR {_pct(c['worst_fnmr'])} (at delta + band)",
            f"  scores in the value band: {_pct(c['impostor_in_value_band'])} of impostor pairs, "
            f"{_pct(c['genuine_in_value_band'])} of genuine pairs",
            f"  a non-enrolled query against {self.gallery_size:,} entries: {c['expected_false_matches']:.3g} "
            f"false matches expected, membership count {self.expected_count:.3g} (comparator model)",
            "verdict: " + ("OK: delta meets the target FMR even inside the comparator's guard band" if self.ok else
                           f"FAIL: inside the guard band the FMR may reach {c['worst_fmr']:.3g} > {self.target_fmr:g}"
                           f" (use delta >= {self.threshold + b['decision_band']:.4f})"),
        ]
        return "\n".join(out)


def _pct(x: float) -> str:
    """A rate as a percentage."""
    return f"{100 * x:.3g} %"


def calibrate(
    dist: ScoreDistributions,
    target_fmr: float = 1e-4,
    *,
    kappa: int = 10,
    delta: float | None = None,
    gallery_size: int = 16384,
) -> Calibration:
    """Suggest delta for ``target_fmr`` (or check the given ``delta``) against the comparator at depth ``kappa``.

    ``gallery_size`` is the number of gallery entries a query is compared
    with, for the expected false matches and membership count per query.
    """
    thr = dist.threshold_at_fmr(target_fmr)
    base = comparator(kappa, thr)
    suggested = delta is None
    if delta is None:
        delta = min(1.0, thr + float(base["decision_band"]))
    bands = comparator(kappa, delta)
    db, vb = float(bands["decision_band"]), float(bands["value_band"])
    # Expected comparator output over impostor pairs: 1 above the value band, the model's value inside it.
    k_lo, k_hi = int(_bin_index(np.array([delta - vb]))[0]), int(_bin_index(np.array([delta + vb]))[0])
    centres = _edge(np.arange(k_lo, k_hi + 1)) + BIN / 2
    values = np.asarray(comparator(kappa, delta, centres)["values"], dtype=np.float64)
    mass = float(dist.impostor_counts[k_lo:k_hi + 1] @ values) + float(dist._tail[k_hi + 1])
    g = dist.genuine
    checks = {
        "fmr": dist.fmr(delta),
        "fnmr": dist.fnmr(delta),
        "worst_fmr": dist.fmr(delta - db),
        "worst_fnmr": dist.fnmr(delta + db),
        "impostor_in_value_band": (dist.fmr(delta - vb) - dist.fmr(delta + vb)),
        "genuine_in_value_band": float(np.mean(np.abs(g - delta) < vb)),
        "expected_false_matches": gallery_size * dist.fmr(delta),
    }
    levels = sorted({1e-2, 1e-3, 1e-4, target_fmr}, reverse=True)
    thresholds = {f: dist.threshold_at_fmr(f) for f in levels if f * dist.n_impostor >= 1}
    return Calibration(
        dist=dist, target_fmr=target_fmr, kappa=kappa, gallery_size=gallery_size, threshold=thr, delta=float(delta),
        suggested=suggested, bands=bands, eer=dist.eer(), thresholds=thresholds,
        expected_count=gallery_size * mass / dist.n_impostor, checks=checks,
    )


def plot_distributions(cal: Calibration, path: str | Path) -> Path:
    """Histograms of the genuine and impostor scores with delta and its bands, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = cal.dist
    edges = np.linspace(-1, 1, 201)
    imp = d.impostor_counts.reshape(200, -1).sum(axis=1) / d.n_impostor
    gen = np.histogram(d.genuine, bins=edges)[0] / d.n_genuine
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.stairs(imp, edges, fill=True, alpha=0.5, label=f"impostor ({d.n_impostor:,} pairs)")
    ax.stairs(gen, edges, fill=True, alpha=0.5, label=f"genuine ({d.n_genuine:,} pairs)")
    ax.axvline(cal.delta, color="k", lw=1, label=f"delta {cal.delta:.4f} (FMR {cal.checks['fmr']:.2g})")
    vb = float(cal.bands["value_band"])
    ax.axvspan(cal.delta - vb, cal.delta + vb, color="grey", alpha=0.2, label=f"value band +-{vb:.3f}")
    ax.set_yscale("log")
    ax.set_xlabel("cosine score")
    ax.set_ylabel("fraction of pairs per 0.01")
    ax.set_xlim(-0.8, 1.0)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("genuine and impostor scores")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

