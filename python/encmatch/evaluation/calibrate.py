"""Threshold calibration: score distributions, 1:1 and 1:N operating points, and a delta for a target.

On a labelled set of embeddings every pair of faces is scored (cosine):
pairs of the same identity are *genuine*, the others *impostor*.
:class:`ScoreDistributions` keeps the genuine scores exactly and the
impostor scores as a histogram of :data:`BIN`-wide bins (87 million pairs
for the 13,233 LFW faces), with exact counts, means and extremes, and
(:class:`NonMated`) the highest impostor scores of every face taken as a
non-mated search.

**1:1 terms** (per comparison): FMR, the fraction of impostor pairs
``>= delta``; FNMR, the fraction of genuine pairs ``< delta``.

**1:N terms** (NIST FRVT, identification with a threshold: a search
returns every gallery entry ``>= delta``), at gallery size N:

- **FPIR** (false positive identification rate): the fraction of
  non-mated searches (the person is not enrolled) that return at least one
  candidate. For N independent impostors it is ``1 - (1 - FMR)^N``, about
  ``N * FMR``: a 1:1 threshold is far too low at 1:N.
- **FNIR** (false negative identification rate): the fraction of mated
  searches whose mate scores below delta. With one enrolled face per
  identity and no rank limit this is the FNMR over genuine pairs, whatever N.

*Empirical FPIR* (:meth:`NonMated.fpir`): every face of the set is one
non-mated search; its candidates are the ``M`` faces of other identities,
``k`` of which score ``>= delta``. A gallery of N entries drawn at random
from them holds one of those ``k`` with probability exactly
``1 - C(M - k, N) / C(M, N)`` (hypergeometric) when ``N <= M``; the FPIR is
the mean over the searches, i.e. over every search and every such gallery.
When N exceeds ``M`` (a gallery larger than the data) the search's own
rate ``k / M`` is extrapolated as if drawn with replacement,
``1 - (1 - k/M)^N``, and the report says so. The independence model
``1 - (1 - FMR)^N`` of the pooled FMR is reported beside it.

**Support** (rule of three): when none of ``n`` independent trials is a
false match, the rate is below ``3 / n`` with 95 % confidence, so a target
FMR ``p`` needs at least ``3 / p`` impostor pairs, and a target FPIR ``F``
at gallery size N needs ``3 / F`` non-mated searches and ``3 / p`` impostor
pairs with ``p = 1 - (1 - F)^(1/N)`` (about ``F / N``). :func:`calibrate`
refuses a target the data cannot support (:class:`InvalidArgument`), and a
rate with no observed event is printed as "0 of n (< 3/n)", never as 0.

:func:`calibrate` then suggests delta for a target FPIR at gallery size N
(or a target FMR per comparison) and checks the encrypted comparator's
guard bands (:func:`encmatch.comparator`) against the distributions:

- within the **decision band** around delta the encrypted decision may
  differ from ``score >= delta``, so the worst-case encrypted FMR/FPIR are
  those at ``delta - decision_band`` and the worst-case FNMR/FNIR at
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

from .._util.plots import pyplot
from .._util.defaults import DEFAULT_KAPPA
from ..params import check_delta, comparator
from ..errors import InvalidArgument
from .validate import format_table

__all__ = ["BIN", "TOP_K", "RULE_OF_THREE", "DEFAULT_TARGET_FPIR", "NonMated", "ScoreDistributions", "Support",
           "Calibration", "calibrate", "support", "fmr_for_fpir", "fpir_independent", "rate_text",
           "plot_distributions"]

#: Width of the impostor histogram's bins (score units); thresholds are found to this resolution.
BIN = 1e-5
_NBINS = int(round(2 / BIN))
#: Highest impostor scores kept per non-mated search (enough for any FPIR target the data can support).
TOP_K = 64
#: Events needed per unit rate: zero events in ``3 / p`` trials bound the rate below ``p`` at 95 % confidence.
RULE_OF_THREE = 3.0
#: Target FPIR when none is given.
DEFAULT_TARGET_FPIR = 0.01


def fmr_for_fpir(fpir: float, gallery_size: int) -> float:
    """The per-comparison FMR whose FPIR over ``gallery_size`` independent impostors is ``fpir`` (about fpir / N)."""
    return -math.expm1(math.log1p(-fpir) / gallery_size)


def fpir_independent(fmr: float, gallery_size: int) -> float:
    """``1 - (1 - fmr)^N``: the FPIR of a gallery of N independent impostors at per-comparison ``fmr``."""
    return 1.0 if fmr >= 1 else -math.expm1(gallery_size * math.log1p(-fmr))


def rate_text(events: float, trials: int, what: str = "") -> str:
    """A measured rate: ``0 of n ...: below 3/n (95 %)`` when nothing was seen, never a bare 0."""
    what = f" {what}" if what else ""
    if events == 0:
        return f"0 of {trials:,}{what} (below {RULE_OF_THREE / trials:.2g} at 95 % confidence)"
    return f"{events / trials:.3g} ({events:,.0f} of {trials:,}{what})"


@dataclass
class NonMated:
    """Non-mated searches: per search, its highest impostor scores and how many impostor candidates it has.

    ``top`` is ``[S, K]``, each row descending (``-inf`` where a search has
    fewer than K candidates); ``candidates`` ``[S]`` counts each search's
    impostor candidates (M). See the module doc for :meth:`fpir`.
    """

    top: np.ndarray
    candidates: np.ndarray

    def __post_init__(self) -> None:
        self.top = np.asarray(self.top, dtype=np.float64)
        self.candidates = np.asarray(self.candidates, dtype=np.int64)
        keep = self.candidates > 0
        self.top, self.candidates = self.top[keep], self.candidates[keep]
        if len(self.candidates) == 0:
            raise InvalidArgument("no non-mated search: every face has the same identity")

    @classmethod
    def from_searches(cls, searches: Any, k: int = TOP_K) -> "NonMated":
        """From explicit impostor scores of each search (a list of 1-D arrays, or a 2-D array, one row per search)."""
        rows = [np.asarray(s, dtype=np.float64).ravel() for s in searches]
        top = np.full((len(rows), k), -np.inf)
        for i, s in enumerate(rows):
            best = np.sort(s)[::-1][:k]
            top[i, :len(best)] = best
        return cls(top, np.array([len(s) for s in rows], dtype=np.int64))

    @property
    def n_searches(self) -> int:
        """Number of non-mated searches."""
        return len(self.candidates)

    @property
    def k(self) -> int:
        """Scores kept per search."""
        return self.top.shape[1]

    def hits(self, t: float) -> np.ndarray:
        """Per search, how many of its candidates score ``>= t`` (at most :attr:`k`)."""
        return np.sum(self.top >= t, axis=1)

    def fpir(self, t: float, gallery_size: int) -> tuple[float, dict]:
        """Empirical FPIR at threshold ``t`` for galleries of ``gallery_size`` entries, and how it was found.

        The dict gives ``searches``, ``hit`` (searches with any candidate
        ``>= t``), ``extrapolated`` (searches with fewer candidates than N:
        drawn with replacement) and ``truncated`` (searches with at least
        :attr:`k` candidates ``>= t``: their share is a lower bound).
        """
        n = int(gallery_size)
        k = self.hits(t)
        sel = k > 0
        kk, mm = k[sel].astype(np.float64), self.candidates[sel].astype(np.float64)
        p = np.empty(len(kk))
        within = n <= mm
        # Hypergeometric: P(no hit) = C(M-k, N) / C(M, N) = prod_{i<k} (M-N-i) / (M-i).
        i = np.arange(self.k, dtype=np.float64)[None, :]
        m_in, k_in = mm[within][:, None], kk[within][:, None]
        with np.errstate(divide="ignore", invalid="ignore"):  # i >= M only where i >= k: not used
            ratio = np.where(i < k_in, np.clip((m_in - n - i) / (m_in - i), 0.0, 1.0), 1.0)
        p[within] = 1.0 - ratio.prod(axis=1)
        with np.errstate(divide="ignore"):
            p[~within] = -np.expm1(n * np.log1p(-kk[~within] / mm[~within]))
        info = {"searches": self.n_searches, "hit": int(sel.sum()),
                "extrapolated": int(np.sum(self.candidates < n)), "truncated": int(np.sum(k >= self.k))}
        return float(p.sum()) / self.n_searches, info

    def threshold_at_fpir(self, target: float, gallery_size: int) -> float:
        """The lowest threshold (a :data:`BIN` edge) whose empirical FPIR at ``gallery_size`` is at most ``target``."""
        lo, hi = 0, _NBINS  # FPIR(edge(hi)) <= target is invariant (edge(_NBINS) = 1 + ... above every score)
        if self.fpir(float(_edge(hi)), gallery_size)[0] > target:
            return float(_edge(hi))
        while lo < hi:
            mid = (lo + hi) // 2
            if self.fpir(float(_edge(mid)), gallery_size)[0] <= target:
                hi = mid
            else:
                lo = mid + 1
        return float(_edge(lo))


@dataclass
class Support:
    """Whether a set supports a target (rule of three): what the target needs and what the set has."""

    kind: str  # "fmr" or "fpir"
    target: float
    gallery_size: int
    fmr: float  # the per-comparison FMR the target needs
    pairs_needed: int
    pairs: int
    searches_needed: int
    searches: int | None

    @property
    def ok(self) -> bool:
        """True when the set has enough impostor pairs (and non-mated searches) for the target."""
        return self.pairs >= self.pairs_needed and (self.searches is None or self.searches >= self.searches_needed)

    def describe(self) -> str:
        """One sentence: the target, what it needs, what the set has."""
        if self.kind == "fpir":
            what = (f"target FPIR {self.target:g} at gallery size N = {self.gallery_size:,} needs a per-comparison "
                    f"FMR of about {self.fmr:.2g} (1 - (1 - FPIR)^(1/N)), so at least {self.pairs_needed:,} impostor "
                    f"pairs and {self.searches_needed:,} non-mated searches")
            if self.searches is not None:
                have = f"this set has {self.pairs:,} and {self.searches:,}"
            else:
                have = (f"this set has {self.pairs:,} impostor pairs (no non-mated searches: FPIR from the "
                        "independence model)")
        else:
            what = f"target FMR {self.target:g} per comparison needs at least {self.pairs_needed:,} impostor pairs"
            have = f"this set has {self.pairs:,}"
        return (f"{what} (rule of three: 3 / rate for 95 % confidence when none is seen); {have}: "
                + ("supported" if self.ok else "NOT supported"))

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {"kind": self.kind, "target": self.target, "gallery_size": self.gallery_size, "fmr": self.fmr,
                "pairs_needed": self.pairs_needed, "pairs": self.pairs, "searches_needed": self.searches_needed,
                "searches": self.searches, "ok": self.ok}


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
    #: Every face as a non-mated search (from :meth:`from_labelled`), for the empirical FPIR; None: model only.
    nonmated: NonMated | None = None
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

    @property
    def n_searches(self) -> int | None:
        """Number of non-mated searches (None without :attr:`nonmated`)."""
        return None if self.nonmated is None else self.nonmated.n_searches

    @classmethod
    def from_scores(cls, genuine: Any, impostor: Any, nonmated: Any = None) -> "ScoreDistributions":
        """Distributions of explicit genuine and impostor score arrays.

        ``nonmated`` (optional): the impostor scores of each non-mated
        search (:meth:`NonMated.from_searches`), for the empirical FPIR.
        """
        imp = np.asarray(impostor, dtype=np.float64).ravel()
        if imp.size == 0 or np.asarray(genuine).size == 0:
            raise InvalidArgument("need at least one genuine and one impostor pair")
        counts = np.bincount(_bin_index(imp), minlength=_NBINS)
        nm = None if nonmated is None else (nonmated if isinstance(nonmated, NonMated)
                                            else NonMated.from_searches(nonmated))
        return cls(np.asarray(genuine, np.float64).ravel(), counts, float(imp.mean()), float(imp.std()),
                   float(imp.min()), float(imp.max()), nm)

    @classmethod
    def from_labelled(cls, emb: Any, label: Any, block: int = 512, top_k: int = TOP_K) -> "ScoreDistributions":
        """All pairs of a labelled set (``emb`` ``[n, d]``, one label per row), scored blockwise.

        One pass over full rows: the pairs above the diagonal make the
        genuine scores and the impostor histogram; every row is also a
        non-mated search (its ``top_k`` highest scores against the faces of
        other identities). Scores are computed in float32 (within about 1e-7
        of float64, far below the 1e-5 bins; 13,233 LFW faces in about 8 s on
        2 busy cores instead of 20).
        """
        e = np.asarray(emb, dtype=np.float64)
        if e.ndim != 2 or len(e) < 2:
            raise InvalidArgument(f"need at least two embeddings [n, d], got shape {e.shape}")
        e = (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)
        lab = np.asarray(label)
        if len(lab) != len(e):
            raise InvalidArgument(f"{len(lab)} labels for {len(e)} embeddings")
        n = len(e)
        _, inverse, per_id = np.unique(lab, return_inverse=True, return_counts=True)
        k = min(top_k, n)
        counts = np.zeros(_NBINS, dtype=np.int64)
        top = np.full((n, k), -np.inf)
        genuine = []
        n_imp, s1, s2, lo, hi = 0, 0.0, 0.0, math.inf, -math.inf
        cols = np.arange(n)
        for start in range(0, n, block):
            rows = np.arange(start, min(start + block, n))
            s = e[rows] @ e.T
            upper = cols[None, :] > rows[:, None]
            same = lab[rows][:, None] == lab[None, :]
            genuine.append(s[upper & same].astype(np.float64))
            imp = s[upper & ~same]
            if imp.size:
                b = ((imp + np.float32(1.0)) * np.float32(1.0 / BIN)).astype(np.int64)  # floor: imp + 1 >= 0
                counts += np.bincount(np.minimum(b, _NBINS - 1, out=b), minlength=_NBINS)
                n_imp += imp.size
                s1 += float(imp.sum(dtype=np.float64))
                s2 += float(np.square(imp, dtype=np.float64).sum())
                lo, hi = min(lo, float(imp.min())), max(hi, float(imp.max()))
            s[same] = -np.inf  # a search's own identity (itself included) is not a candidate
            part = -np.partition(-s, k - 1, axis=1)[:, :k] if k < n else s
            top[rows] = -np.sort(-part, axis=1)[:, :k]
        gen = np.concatenate(genuine)
        if gen.size == 0 or n_imp == 0:
            raise InvalidArgument("need at least one genuine pair (an identity with two faces) and one impostor pair")
        mean = s1 / n_imp
        nonmated = NonMated(top, n - per_id[inverse])
        return cls(gen, counts, mean, math.sqrt(max(0.0, s2 / n_imp - mean * mean)), lo, hi, nonmated)

    def fmr_count(self, t: float) -> int:
        """Impostor pairs scoring ``>= t`` (bin resolution)."""
        k = int(np.clip(math.ceil((t + 1.0) / BIN - 1e-9), 0, _NBINS))
        return int(self._tail[k])

    def fmr(self, t: float) -> float:
        """False-match rate at threshold ``t``: the fraction of impostor scores ``>= t`` (bin resolution)."""
        return self.fmr_count(t) / self.n_impostor

    def fpir(self, t: float, gallery_size: int) -> tuple[float, str]:
        """FPIR at ``t`` for a gallery of ``gallery_size``, and its method (``empirical`` or ``model``)."""
        if self.nonmated is not None:
            return self.nonmated.fpir(t, gallery_size)[0], "empirical"
        return fpir_independent(self.fmr(t), gallery_size), "model"

    def threshold_at_fpir(self, target: float, gallery_size: int) -> float:
        """The lowest threshold (a bin edge) whose FPIR at ``gallery_size`` is at most ``target``."""
        if not 0 < target < 1:
            raise InvalidArgument(f"a target FPIR must be in (0, 1), got {target}")
        if self.nonmated is not None:
            return self.nonmated.threshold_at_fpir(target, gallery_size)
        return self.threshold_at_fmr(fmr_for_fpir(target, gallery_size))

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
    """The outcome of :func:`calibrate`: distributions, 1:1 and 1:N operating points, delta and the guard-band check."""

    dist: ScoreDistributions
    target_fmr: float | None
    target_fpir: float | None
    kappa: int
    gallery_size: int
    threshold: float
    delta: float
    suggested: bool
    bands: dict
    eer: tuple[float, float]
    thresholds: dict[float, float]
    fpir_thresholds: dict[float, float]
    unsupported: dict[str, list[tuple[float, int]]]
    support: Support
    expected_count: float
    checks: dict[str, Any]

    @property
    def ok(self) -> bool:
        """True when delta meets the target (FPIR at N, or FMR) even where the comparator may decide either way."""
        if self.target_fpir is not None:
            return bool(self.checks["worst_fpir"] <= self.target_fpir)
        return bool(self.checks["worst_fmr"] <= self.target_fmr)

    @property
    def fpir_method(self) -> str:
        """How the FPIR was found, in words."""
        nm, n = self.dist.nonmated, self.gallery_size
        if nm is None:
            return (f"independence model 1 - (1 - FMR)^N (no non-mated searches given): "
                    f"as if the {n:,} entries were independent impostors")
        text = (f"empirical: each of the {nm.n_searches:,} faces as a non-mated search, its gallery of N drawn at "
                f"random from the faces of other identities")
        ext = int(np.sum(nm.candidates < n))
        if ext == nm.n_searches:
            text += (f"; N exceeds their {int(nm.candidates.max()):,} faces, so each search's own rate is extrapolated "
                     f"as if drawn with replacement (1 - (1 - k/M)^N)")
        elif ext:
            text += f"; {ext:,} searches have fewer than N candidates: extrapolated with replacement"
        return text

    def _fpir_text(self, x: float, short: bool = False) -> str:
        """An FPIR as a percentage; zero with its rule-of-three bound, never a bare 0."""
        if x > 0:
            return _pct(x)
        trials = self.dist.n_searches or self.dist.n_impostor
        if short:
            return f"< {RULE_OF_THREE / trials:.2g}"
        what = "non-mated searches hit" if self.dist.n_searches else "impostor pairs (model)"
        return f"0 of {trials:,} {what} (below {RULE_OF_THREE / trials:.2g} at 95 % confidence)"

    def _fnmr_count(self, t: float) -> int:
        """Genuine pairs scoring below ``t`` (the count behind the FNMR there)."""
        return int(np.searchsorted(self.dist.genuine, t, side="left"))

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        d = self.dist
        return {
            "ok": self.ok, "stats": d.stats(), "target_fmr": self.target_fmr, "target_fpir": self.target_fpir,
            "kappa": self.kappa, "gallery_size": self.gallery_size, "threshold": self.threshold, "delta": self.delta,
            "suggested": self.suggested, "support": self.support.to_dict(),
            "non_mated_searches": d.n_searches, "fpir_method": self.fpir_method,
            "bands": {k: v for k, v in self.bands.items() if k != "values"},
            "eer": {"rate": self.eer[0], "threshold": self.eer[1]},
            "thresholds": [{"fmr": f, "threshold": t, "fnmr": d.fnmr(t), "fpir": d.fpir(t, self.gallery_size)[0]}
                           for f, t in self.thresholds.items()],
            "fpir_thresholds": [{"fpir": f, "threshold": t, "fnir": d.fnmr(t)}
                                for f, t in self.fpir_thresholds.items()],
            "unsupported": {k: [{"target": f, "pairs_needed": p} for f, p in v] for k, v in self.unsupported.items()},
            "expected_membership_count": self.expected_count, **self.checks,
        }

    def report(self) -> str:
        """The distributions, 1:1 and 1:N operating points, delta and the verdict, as text."""
        d, n, c, b = self.dist, self.gallery_size, self.checks, self.bands
        st = d.stats()
        rows = [[k, f"{v['n']:,}", f"{v['mean']:.4f}", f"{v['sd']:.4f}", f"{v['min']:.4f}", f"{v['p1']:.4f}",
                 f"{v['p50']:.4f}", f"{v['p99']:.4f}", f"{v['max']:.4f}"] for k, v in st.items()]
        out = [format_table(["pairs", "n", "mean", "sd", "min", "p1", "p50", "p99", "max"], rows), ""]
        out.append("1:1 (per comparison):")
        trows = [[f"{f:g}", f"{t:.4f}", _pct(d.fnmr(t)), self._fpir_text(d.fpir(t, n)[0], short=True)]
                 for f, t in self.thresholds.items()]
        trows.append([f"EER {_pct(self.eer[0])}", f"{self.eer[1]:.4f}", _pct(d.fnmr(self.eer[1])),
                      self._fpir_text(d.fpir(self.eer[1], n)[0], short=True)])
        out += [format_table(["FMR", "threshold", "FNMR", f"FPIR at N = {n:,}"], trows)]
        if self.unsupported["fmr"]:
            out.append("  not supported by " + f"{d.n_impostor:,} impostor pairs: " + ", ".join(
                f"FMR {f:g} (needs {p:,})" for f, p in self.unsupported["fmr"]))
        out += ["", f"1:N at gallery size N = {n:,} (FPIR: {self.fpir_method}; FNIR: mated searches whose mate "
                    f"scores below the threshold):"]
        if self.fpir_thresholds:
            frows = [[f"{f:g}", f"{t:.4f}", _pct(d.fnmr(t)),
                      f"{d.fmr(t):.2g}" if d.fmr_count(t) else f"< {RULE_OF_THREE / d.n_impostor:.2g}"]
                     for f, t in self.fpir_thresholds.items()]
            out.append(format_table(["FPIR", "threshold", "FNIR", "FMR there"], frows))
        if self.unsupported["fpir"]:
            out.append("  not supported by this set: " + ", ".join(
                f"FPIR {f:g} (needs {p:,} impostor pairs)" for f, p in self.unsupported["fpir"]))
        out.append("")
        how = "suggested" if self.suggested else "given"
        target = (f"target FPIR {self.target_fpir:g} at N = {n:,}" if self.target_fpir is not None
                  else f"target FMR {self.target_fmr:g} per comparison")
        out += [
            self.support.describe(),
            f"{target}: plaintext threshold {self.threshold:.4f}",
            f"{how} delta {self.delta:.4f} (kappa {self.kappa}: decision band +-{b['decision_band']:.2g}, "
            f"value band +-{b['value_band']:.3f})",
            f"  1:1 at delta: FMR {rate_text(c['fmr_count'], d.n_impostor, 'impostor pairs')}, "
            f"FNMR {rate_text(self._fnmr_count(self.delta), d.n_genuine, 'genuine pairs')}",
            f"  1:N at delta, N = {n:,}: FPIR {self._fpir_text(c['fpir'])} ({c['fpir_method']}; independence model "
            f"1 - (1 - FMR)^N: "
            f"{_pct(c['fpir_independent'])}), FNIR {rate_text(self._fnmr_count(self.delta), d.n_genuine, 'genuine pairs')}"
            + (f"; the FPIR is a lower bound: {c['fpir_truncated']:,} searches have more than the {d.nonmated.k} "
               f"candidates kept at or above delta" if c["fpir_truncated"] else ""),
            f"  worst case in the decision band: FMR {rate_text(c['worst_fmr_count'], d.n_impostor)}, "
            f"FPIR {self._fpir_text(c['worst_fpir'])} "
            f"(at delta - band), FNMR = FNIR "
            f"{rate_text(self._fnmr_count(self.delta + b['decision_band']), d.n_genuine, 'genuine pairs')} "
            f"(at delta + band)",
            f"  scores in the value band: {_pct(c['impostor_in_value_band'])} of impostor pairs, "
            f"{_pct(c['genuine_in_value_band'])} of genuine pairs",
            f"  a non-enrolled query against {n:,} entries: {c['expected_false_matches']:.3g} "
            f"false matches expected, membership count {self.expected_count:.3g} (comparator model)",
        ]
        if self.ok:
            verdict = "OK: delta meets the " + target + " even inside the comparator's guard band"
        elif self.target_fpir is not None:
            verdict = (f"FAIL: inside the guard band the FPIR at N = {n:,} may reach {_pct(c['worst_fpir'])} > "
                       f"{_pct(self.target_fpir)} (use delta >= {self.threshold + b['decision_band']:.4f})")
        else:
            verdict = (f"FAIL: inside the guard band the FMR may reach {c['worst_fmr']:.3g} > {self.target_fmr:g}"
                       f" (use delta >= {self.threshold + b['decision_band']:.4f})")
        out.append("verdict: " + verdict)
        return "\n".join(out)


def _pct(x: float) -> str:
    """A rate as a percentage."""
    return f"{100 * x:.3g} %"


def support(dist: ScoreDistributions, target_fmr: float | None = None, target_fpir: float | None = None,
            gallery_size: int = 16384) -> Support:
    """What a target needs by the rule of three, and whether ``dist`` has it (see the module doc)."""
    if target_fpir is not None:
        fmr = fmr_for_fpir(target_fpir, gallery_size)
        return Support("fpir", target_fpir, gallery_size, fmr, math.ceil(RULE_OF_THREE / fmr - 1e-9), dist.n_impostor,
                       math.ceil(RULE_OF_THREE / target_fpir - 1e-9), dist.n_searches)
    assert target_fmr is not None
    return Support("fmr", target_fmr, gallery_size, target_fmr, math.ceil(RULE_OF_THREE / target_fmr - 1e-9),
                   dist.n_impostor, 0, None)


def _check_target(name: str, value: float | None) -> None:
    """A target rate must lie in (0, 1)."""
    if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1):
        raise InvalidArgument(f"a target {name} must be in (0, 1), got {value}")


def calibrate(
    dist: ScoreDistributions,
    target_fmr: float | None = None,
    *,
    target_fpir: float | None = None,
    kappa: int = DEFAULT_KAPPA,
    delta: float | None = None,
    gallery_size: int = 16384,
) -> Calibration:
    """Suggest delta for a target (or check the given ``delta``) against the comparator at depth ``kappa``.

    The target is ``target_fpir`` at ``gallery_size`` (1:N; the default,
    :data:`DEFAULT_TARGET_FPIR`, when neither is given) or ``target_fmr``
    per comparison (1:1). A target the set cannot support by the rule of
    three (:func:`support`) raises :class:`InvalidArgument` naming what it
    needs. ``gallery_size`` is the number of gallery entries a query is
    compared with: FPIR, expected false matches and membership count per query.
    """
    if target_fmr is not None and target_fpir is not None:
        raise InvalidArgument("give a target FMR (per comparison) or a target FPIR (at the gallery size), not both")
    if target_fmr is None and target_fpir is None:
        target_fpir = DEFAULT_TARGET_FPIR
    _check_target("false-match rate", target_fmr)
    _check_target("FPIR", target_fpir)
    if isinstance(gallery_size, bool) or not isinstance(gallery_size, (int, np.integer)) or gallery_size < 1:
        raise InvalidArgument(f"the gallery size must be a positive integer, got {gallery_size}")
    n = int(gallery_size)
    if delta is not None:
        delta = check_delta(delta)
    sup = support(dist, target_fmr, target_fpir, n)
    if not sup.ok:
        best = []
        if dist.n_searches is not None:
            lowest = max(RULE_OF_THREE / dist.n_searches, fpir_independent(RULE_OF_THREE / dist.n_impostor, n))
            best.append(f"FPIR >= {lowest:.2g} at N = {n:,}")
        best.append(f"FMR >= {RULE_OF_THREE / dist.n_impostor:.2g} per comparison")
        raise InvalidArgument(f"{sup.describe()}; it supports {' or '.join(best)} (more labelled faces, or a larger "
                              "target)")
    if target_fpir is not None:
        thr = dist.threshold_at_fpir(target_fpir, n)
    else:
        thr = dist.threshold_at_fmr(target_fmr)
    base = comparator(kappa, thr)
    suggested = delta is None
    if delta is None:
        # The band depends a little on delta: move up until delta - band(delta) clears the threshold.
        delta = min(1.0, thr + float(base["decision_band"]))
        for _ in range(8):
            need = min(1.0, thr + float(comparator(kappa, delta)["decision_band"]))
            if need <= delta:
                break
            delta = need
    bands = comparator(kappa, delta)
    db, vb = float(bands["decision_band"]), float(bands["value_band"])
    # Expected comparator output over impostor pairs: 1 above the value band, the model's value inside it.
    k_lo, k_hi = int(_bin_index(np.array([delta - vb]))[0]), int(_bin_index(np.array([delta + vb]))[0])
    centres = _edge(np.arange(k_lo, k_hi + 1)) + BIN / 2
    values = np.asarray(comparator(kappa, delta, centres)["values"], dtype=np.float64)
    mass = float(dist.impostor_counts[k_lo:k_hi + 1] @ values) + float(dist._tail[k_hi + 1])
    g = dist.genuine
    fpir, method = dist.fpir(delta, n)
    truncated = dist.nonmated.fpir(delta, n)[1]["truncated"] if dist.nonmated is not None else 0
    checks = {
        "fmr": dist.fmr(delta),
        "fmr_count": dist.fmr_count(delta),
        "fnmr": dist.fnmr(delta),
        "fpir": fpir,
        "fpir_method": method,
        "fpir_truncated": truncated,
        "fpir_independent": fpir_independent(dist.fmr(delta), n),
        "fnir": dist.fnmr(delta),
        "worst_fmr": dist.fmr(delta - db),
        "worst_fmr_count": dist.fmr_count(delta - db),
        "worst_fpir": dist.fpir(delta - db, n)[0],
        "worst_fnmr": dist.fnmr(delta + db),
        "impostor_in_value_band": (dist.fmr(delta - vb) - dist.fmr(delta + vb)),
        "genuine_in_value_band": float(np.mean(np.abs(g - delta) < vb)),
        "expected_false_matches": n * dist.fmr(delta),
    }
    unsupported: dict[str, list[tuple[float, int]]] = {"fmr": [], "fpir": []}
    thresholds = {}
    for f in sorted({1e-2, 1e-3, 1e-4, 1e-5, 1e-6} | ({target_fmr} if target_fmr else set()), reverse=True):
        s = support(dist, target_fmr=f, gallery_size=n)
        if s.ok:
            thresholds[f] = dist.threshold_at_fmr(f)
        elif f >= 1e-4 or f == target_fmr:
            unsupported["fmr"].append((f, s.pairs_needed))
    fpir_thresholds = {}
    for f in sorted({1e-1, 1e-2, 1e-3, 1e-4} | ({target_fpir} if target_fpir else set()), reverse=True):
        s = support(dist, target_fpir=f, gallery_size=n)
        if s.ok:
            fpir_thresholds[f] = dist.threshold_at_fpir(f, n)
        elif f >= 1e-3 or f == target_fpir:
            unsupported["fpir"].append((f, s.pairs_needed))
    return Calibration(
        dist=dist, target_fmr=target_fmr, target_fpir=target_fpir, kappa=kappa, gallery_size=n, threshold=thr,
        delta=float(delta), suggested=suggested, bands=bands, eer=dist.eer(), thresholds=thresholds,
        fpir_thresholds=fpir_thresholds, unsupported=unsupported, support=sup,
        expected_count=n * mass / dist.n_impostor, checks=checks,
    )


def plot_distributions(cal: Calibration, path: str | Path) -> Path:
    """Histograms of the genuine and impostor scores with delta and its bands, as a PNG."""
    plt = pyplot()
    d = cal.dist
    edges = np.linspace(-1, 1, 201)
    imp = d.impostor_counts.reshape(200, -1).sum(axis=1) / d.n_impostor
    gen = np.histogram(d.genuine, bins=edges)[0] / d.n_genuine
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.stairs(imp, edges, fill=True, alpha=0.5, label=f"impostor ({d.n_impostor:,} pairs)")
    ax.stairs(gen, edges, fill=True, alpha=0.5, label=f"genuine ({d.n_genuine:,} pairs)")
    fmr = (f"FMR {cal.checks['fmr']:.2g}" if cal.checks["fmr_count"] else f"FMR < {RULE_OF_THREE / d.n_impostor:.2g}")
    ax.axvline(cal.delta, color="k", lw=1,
               label=f"delta {cal.delta:.4f} ({fmr}; FPIR {_pct(cal.checks['fpir'])} at N = {cal.gallery_size:,})")
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

