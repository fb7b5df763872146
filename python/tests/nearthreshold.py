"""Helpers of the near-threshold tests (test_near_threshold.py): crowded galleries and the exactness judge.

The comparator's promise (docs/COMPARATOR.md, issue 13 part 5): a probe
none of whose scores lies within the *value band* of delta gets exactly the
brute-force membership count (and so the exact enrolled bit); a probe with
scores inside the band gets a count between ``#(s >= delta + band) - 0.5``
and ``#(s >= delta - band) + 0.5`` (each score inside adds a fraction).
Identification is exact for every entry outside the *decision band*. The
bands come from the core (:func:`encmatch.params.comparator`) for the
index's own kappa and delta, so these helpers hold for whichever comparator
the core has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import encmatch
from encmatch.evaluation.bruteforce import cosine_scores
from encmatch.params import comparator


def index_bands(index) -> dict:
    """The comparator bands of ``index`` (its own kappa and delta), as the core reports them."""
    b = comparator(int(index.params["kappa"]), index.delta)
    return {"kappa": int(index.params["kappa"]), "delta": float(index.delta),
            "value_band": float(b["value_band"]), "decision_band": float(b["decision_band"])}


def default_kappa(preset: str = "toy", dim: int = 64) -> int:
    """The core's default comparator depth (``describe`` with kappa 0)."""
    return int(encmatch.params.describe(preset, 0, dim)["kappa"])


def orthonormal(rng: np.random.Generator, dim: int, k: int) -> np.ndarray:
    """``k`` random orthonormal rows of dimension ``dim``."""
    q, _ = np.linalg.qr(rng.standard_normal((dim, k)))
    return q.T.copy()


def at_scores(rng: np.random.Generator, probe_basis: np.ndarray, j: int, scores) -> np.ndarray:
    """Unit vectors whose cosine to probe ``j`` of ``probe_basis`` is ``scores`` and to every other probe 0.

    ``g = s * q_j + sqrt(1 - s^2) * u`` with ``u`` a random unit vector
    orthogonal to every probe, so one gallery can hold the crowds of several
    probes without disturbing each other.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    d = probe_basis.shape[1]
    u = rng.standard_normal((len(s), d))
    u -= (u @ probe_basis.T) @ probe_basis
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return s[:, None] * probe_basis[j][None, :] + np.sqrt(np.clip(1 - s * s, 0, None))[:, None] * u


def filler(rng: np.random.Generator, probe_basis: np.ndarray, n: int, high: float) -> np.ndarray:
    """``n`` unit vectors scoring uniformly in ``[-high, high]`` against every probe (independently)."""
    k, d = probe_basis.shape
    a = rng.uniform(-high, high, (n, k))
    u = rng.standard_normal((n, d))
    u -= (u @ probe_basis.T) @ probe_basis
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    rest = np.sqrt(np.clip(1 - np.sum(a * a, axis=1), 0, None))
    return a @ probe_basis + rest[:, None] * u


@dataclass
class ProbeCheck:
    """One probe judged against brute force."""

    name: str
    exact: int               # brute-force count (scores >= delta)
    in_value_band: int       # scores within the value band of delta
    gap: float               # distance of the score nearest to delta
    count: int | None = None
    raw_count: float | None = None
    enrolled: bool | None = None
    low: int = 0              # count bounds the value band allows
    high: int = 0
    in_decision_band: int = 0  # scores within the decision band of delta
    identified: int | None = None  # positions the encrypted identification returned
    ident_errors: list = field(default_factory=list)   # positions wrong outside the decision band
    ident_in_band: int = 0    # identification disagreements inside the decision band (allowed)
    membership_error: str = ""

    @property
    def exact_case(self) -> bool:
        """No score inside the value band: membership must be exact."""
        return self.in_value_band == 0

    def line(self) -> str:
        """The probe's report: a membership line and/or an identification line."""
        ok = "FAIL" if (self.membership_error or self.ident_errors) else "ok"
        lines = []
        if self.count is not None:
            raw = "-" if self.raw_count is None else f"{self.raw_count:.4f}"
            lines.append(
                f"  {self.name:<30} membership     exact {self.exact:>5}  enc {self.count:>5} (raw {raw:>11})  "
                f"in value band {self.in_value_band:>4}  nearest |s-delta| {self.gap:.2e}  "
                f"{'exact' if self.exact_case else 'banded'}  {ok}"
                + (f"  [{self.membership_error}]" if self.membership_error else ""))
        if self.identified is not None:
            lines.append(
                f"  {self.name:<30} identification exact {self.exact:>5}  enc {self.identified:>5}  "
                f"in decision band {self.in_decision_band:>3} (differing there {self.ident_in_band})  {ok}"
                + (f"  [wrong outside the decision band at positions {self.ident_errors[:10]}"
                   f"{' ...' if len(self.ident_errors) > 10 else ''} ({len(self.ident_errors)})]"
                   if self.ident_errors else ""))
        return "\n".join(lines)


@dataclass
class Judgement:
    """Every probe of one index judged; ``failures`` is empty when the promise holds."""

    title: str
    bands: dict
    probes: list[ProbeCheck]

    @property
    def failures(self) -> list[ProbeCheck]:
        return [p for p in self.probes if p.membership_error or p.ident_errors]

    @property
    def n_exact(self) -> int:
        return sum(p.exact_case for p in self.probes)

    @property
    def n_banded(self) -> int:
        return len(self.probes) - self.n_exact

    def report(self) -> str:
        b = self.bands
        head = (f"{self.title}: delta {b['delta']:.5f}, kappa {b['kappa']}, value band +-{b['value_band']:.3g}, "
                f"decision band +-{b['decision_band']:.3g}; {len(self.probes)} probes, {self.n_exact} with every "
                f"score outside the value band (membership asserted exact), {self.n_banded} with scores inside "
                f"it (counts only bounded); identification asserted outside the decision band; "
                f"{len(self.failures)} failing")
        return "\n".join([head] + [p.line() for p in self.probes])


def judge(title: str, bands: dict, scores: np.ndarray, names, membership=None, identification=None) -> Judgement:
    """Judge encrypted answers (lists of results, one per row of ``scores``) against brute force."""
    delta, vb, db = bands["delta"], bands["value_band"], bands["decision_band"]
    scores = np.atleast_2d(scores)
    out = []
    for i, s in enumerate(scores):
        exact_bits = s >= delta
        p = ProbeCheck(name=str(names[i]), exact=int(exact_bits.sum()),
                       in_value_band=int(np.sum(np.abs(s - delta) <= vb)),
                       gap=float(np.min(np.abs(s - delta))),
                       low=int(np.sum(s >= delta + vb)), high=int(np.sum(s >= delta - vb)))
        if membership is not None:
            m = membership[i]
            p.count, p.raw_count, p.enrolled = int(m.count), m.raw_count, bool(m.enrolled)
            if p.exact_case:
                if p.count != p.exact or p.enrolled != (p.exact > 0):
                    p.membership_error = (f"count {p.count} enrolled {p.enrolled} != brute force "
                                          f"{p.exact} {p.exact > 0}")
            elif not (p.low - 0.5 <= p.count <= p.high + 0.5):
                p.membership_error = f"count {p.count} outside the value band's bounds [{p.low}, {p.high}]"
        if identification is not None:
            enc = np.zeros(len(s), dtype=bool)
            pos = np.asarray(identification[i].positions, dtype=np.int64)
            bad_pos = pos[(pos < 0) | (pos >= len(s))]
            enc[pos[(pos >= 0) & (pos < len(s))]] = True
            wrong = enc != exact_bits
            outside = np.abs(s - delta) > db
            p.ident_errors = [int(x) for x in np.flatnonzero(wrong & outside)] + [int(x) for x in bad_pos]
            p.ident_in_band = int(np.sum(wrong & ~outside))
            p.in_decision_band = int(np.sum(~outside))
            p.identified = len(pos)
        out.append(p)
    return Judgement(title, bands, out)


def search_and_judge(title: str, index, gallery, probes, names, modes=("membership", "identification")) -> Judgement:
    """Search ``probes`` in ``index`` in ``modes`` and judge every answer against brute force on ``gallery``."""
    bands = index_bands(index)
    scores = cosine_scores(gallery, probes)
    res = {m: index.search(np.atleast_2d(probes), m, progress=False) for m in modes}
    return judge(title, bands, scores, names, res.get("membership"), res.get("identification"))
