"""Accuracy report: encrypted vs plaintext 1:N identification on a labelled set.

:func:`split` makes an open-set identification protocol from labelled
embeddings: half the identities with at least two faces are *enrolled*
(their first face in the gallery), *mated* probes are their other faces,
*non-mated* probes are faces of the other identities. Every (probe,
gallery entry) pair is a decision; it is genuine when both faces belong to
the same identity.

:func:`run` scores every pair in plaintext (cosine) for the plaintext ROC:
equal error rate (EER) and true-accept rate (TAR) at false-accept rates
(FAR) of 1 % and 0.1 %, and the 1:N threshold at a target FPIR at the
gallery size (the lowest threshold at which at most that fraction of the
non-mated probes returns a candidate; only when there are the ``3 / FPIR``
non-mated probes the rule of three asks for). It then runs the full
encrypted pipeline (:func:`encmatch.evaluation.validate.run`: keys, enrollment,
encrypted identification queries, decryption) at the thresholds of those
points and at the operating delta (default: the FPIR point's, else FAR
0.1 %), and reports two separate things at each:

- **ground truth** (against the identities), plaintext and encrypted: the
  1:N rates over searches at gallery size N = the enrolled identities -
  FPIR, the fraction of non-mated probes given any candidate, and FNIR,
  the fraction of mated probes whose own entry is not returned - and per
  pair TP/FP/TN/FN, precision, recall (TAR) and FAR;
- **agreement**: the encrypted decisions against the plaintext ones - they
  must be equal outside the comparator's decision band (``errors`` counts
  those that are not).

Every rate is printed with its sample size (``FNIR 2/200 (1.0 %)``; a zero
count with its rule-of-three bound, ``0/30 (< 10 %)``). The EER is a
plaintext figure only: it needs the whole ROC, and the encrypted side sees
match bits at a few thresholds, not scores, so at the plaintext EER
threshold the report gives the encrypted FAR and FRR (an operating point,
not an EER), with how many pair decisions differ there and that they all
lie within the decision band.

:func:`plot` draws the ROC and DET: the plaintext curve, and the encrypted
operating points as separate markers (never joined into a curve), each
with its counts; a zero count cannot be drawn on a log axis and is drawn
at its 95 % upper bound ``3 / n`` with a marker pointing the way the true
rate lies, and labelled so.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .._util.plots import pyplot
from .._util.defaults import DEFAULT_KAPPA
from ..data import FaceSet
from ..errors import InvalidArgument
from . import validate as validate_mod
from .bruteforce import cosine_scores
from .validate import Confusion, format_table

__all__ = ["Split", "split", "Roc", "OperatingPoint", "AccuracyReport", "run", "plot", "figure", "inputs_line", "search_rates",
           "threshold_at_fpir"]

#: False-accept rates at which the TAR is reported.
FARS = (0.01, 0.001)
#: Target FPIR of the 1:N operating point when none is given.
DEFAULT_TARGET_FPIR = 0.05


@dataclass
class Split:
    """Gallery and probes of an identification protocol, with identity names."""

    gallery: np.ndarray
    gallery_ids: list[str]
    probes: np.ndarray
    probe_ids: list[str]
    mated: np.ndarray

    @property
    def truth(self) -> np.ndarray:
        """``[probes, gallery]``: True where the probe and the gallery entry are the same identity."""
        return np.asarray(self.probe_ids)[:, None] == np.asarray(self.gallery_ids)[None, :]

    def describe(self) -> str:
        """One line: gallery size, probes, pairs."""
        t = self.truth
        return (f"gallery N = {len(self.gallery):,} identities (one face each); probes {len(self.probes):,} "
                f"({int(self.mated.sum())} mated, {int((~self.mated).sum())} non-mated); "
                f"pairs {t.size:,} ({int(t.sum()):,} genuine, {int((~t).sum()):,} impostor)")


def split(faces: FaceSet, probes: int = 200, max_gallery: int | None = None, seed: int = 0) -> Split:
    """Split labelled ``faces`` into an enrolled gallery and at most ``probes`` probes (half mated).

    Half of the identities with at least two faces (at most
    ``max_gallery``) are enrolled with one face each; the rest of their
    faces are the mated probes, the faces of every other identity the
    non-mated ones. ``seed`` chooses identities and probes.
    """
    rng = np.random.default_rng(seed)
    ids, counts = np.unique(faces.label, return_counts=True)
    multi = rng.permutation(ids[counts >= 2])
    n_enrolled = len(multi) // 2 if max_gallery is None else min(len(multi) // 2, max_gallery)
    if n_enrolled < 1:
        raise InvalidArgument("need at least two identities with two faces or more to make mated probes")
    enrolled = set(int(i) for i in multi[:n_enrolled])
    gallery_rows, mated_rows, other_rows = [], [], []
    for i in sorted(enrolled):
        rows = np.flatnonzero(faces.label == i)
        gallery_rows.append(int(rows[0]))
        mated_rows += [int(r) for r in rows[1:]]
    other_rows = [int(r) for r in np.flatnonzero(~np.isin(faces.label, list(enrolled)))]
    n_mated = min(len(mated_rows), (probes + 1) // 2)
    n_other = min(len(other_rows), probes - n_mated)
    pick_mated = rng.choice(mated_rows, n_mated, replace=False) if n_mated else np.zeros(0, np.int64)
    pick_other = rng.choice(other_rows, n_other, replace=False) if n_other else np.zeros(0, np.int64)
    probe_rows = np.concatenate([pick_mated, pick_other]).astype(np.int64)
    if len(probe_rows) == 0:
        raise InvalidArgument("no probes: the set has no face outside the gallery")
    names = faces.name
    return Split(
        gallery=faces.emb[gallery_rows], gallery_ids=[str(names[r]) for r in gallery_rows],
        probes=faces.emb[probe_rows], probe_ids=[str(names[r]) for r in probe_rows],
        mated=np.array([True] * n_mated + [False] * n_other),
    )


@dataclass
class Roc:
    """The exact plaintext ROC of genuine and impostor scores.

    Thresholds lie midway between consecutive distinct scores (and just
    outside the extremes), so every threshold is as far from every score as
    the data allows: the encrypted comparator then decides as the plaintext
    one except for scores within its decision band of such a midpoint.
    """

    thresholds: np.ndarray
    far: np.ndarray
    frr: np.ndarray
    n_genuine: int
    n_impostor: int

    @classmethod
    def from_scores(cls, genuine: np.ndarray, impostor: np.ndarray) -> "Roc":
        """The ROC of the given scores (both non-empty)."""
        gen, imp = np.sort(np.ravel(genuine)), np.sort(np.ravel(impostor))
        if gen.size == 0 or imp.size == 0:
            raise InvalidArgument("need at least one genuine and one impostor pair")
        s = np.unique(np.concatenate([gen, imp]))
        t = np.concatenate([[s[0] - 1e-3], (s[:-1] + s[1:]) / 2, [s[-1] + 1e-3]])
        far = (imp.size - np.searchsorted(imp, t, side="left")) / imp.size
        frr = np.searchsorted(gen, t, side="left") / gen.size
        return cls(t, far, frr, gen.size, imp.size)

    def at_far(self, far: float) -> tuple[float, float]:
        """``(TAR, threshold)`` at the lowest threshold whose FAR is at most ``far``."""
        i = int(np.argmax(self.far <= far))
        return float(1 - self.frr[i]), float(self.thresholds[i])

    def eer(self) -> tuple[float, float]:
        """Equal error rate and its threshold: where FAR and FRR are closest (their mean there)."""
        i = int(np.argmin(np.abs(self.far - self.frr)))
        return float((self.far[i] + self.frr[i]) / 2), float(self.thresholds[i])

    def eer_point(self) -> dict:
        """The EER with what it rests on: at the threshold where FAR and FRR are closest, both as counts.

        Keys: ``eer`` (their mean), ``threshold``, ``far``, ``frr``,
        ``false_accepts`` of ``n_impostor``, ``false_rejects`` of ``n_genuine``.
        On a discrete ROC the two rates rarely meet: the EER lies between them.
        """
        i = int(np.argmin(np.abs(self.far - self.frr)))
        return {"eer": float((self.far[i] + self.frr[i]) / 2), "threshold": float(self.thresholds[i]),
                "far": float(self.far[i]), "frr": float(self.frr[i]),
                "false_accepts": int(round(self.far[i] * self.n_impostor)), "n_impostor": self.n_impostor,
                "false_rejects": int(round(self.frr[i] * self.n_genuine)), "n_genuine": self.n_genuine}


def search_rates(decisions: np.ndarray, truth: np.ndarray, mated: np.ndarray) -> dict:
    """1:N rates over searches from pair ``decisions`` ``[probes, gallery]`` against ``truth``.

    ``fpir``: non-mated probes with any candidate; ``fnir``: mated probes
    whose own entry is not among the candidates (``None`` without such probes).
    """
    d, t, m = np.asarray(decisions, bool), np.asarray(truth, bool), np.asarray(mated, bool)
    accepted = int(d[~m].any(axis=1).sum())
    missed = int((~(d[m] & t[m]).any(axis=1)).sum())
    n_non, n_mated = int((~m).sum()), int(m.sum())
    return {"fpir": accepted / n_non if n_non else None, "fnir": missed / n_mated if n_mated else None,
            "accepted": accepted, "non_mated": n_non, "missed": missed, "mated": n_mated}


def threshold_at_fpir(scores: np.ndarray, mated: np.ndarray, target: float, thresholds: np.ndarray) -> float:
    """The lowest of ``thresholds`` (ascending) at which at most ``target`` of the non-mated probes get a candidate."""
    best = np.sort(np.asarray(scores)[~np.asarray(mated, bool)].max(axis=1))
    fpir = (len(best) - np.searchsorted(best, thresholds, side="left")) / len(best)
    return float(thresholds[int(np.argmax(fpir <= target))])


@dataclass
class OperatingPoint:
    """Decisions at one delta: plaintext and encrypted, each against the identities, and against each other."""

    name: str
    delta: float
    plaintext: Confusion
    encrypted: Confusion
    agreement: Confusion
    decision_band: float
    far: tuple[float, float] = (0.0, 0.0)
    tar: tuple[float, float] = (0.0, 0.0)
    #: 1:N rates over searches (:func:`search_rates`), plaintext and encrypted.
    searches: tuple[dict, dict] = ({}, {})
    #: Probes whose encrypted candidates differ from the plaintext ones.
    searches_differ: int = 0

    @property
    def errors(self) -> int:
        """Encrypted decisions unlike the plaintext ones outside the decision band."""
        return self.agreement.errors

    def counts(self, side: int) -> dict:
        """Pair counts of one side (0 plaintext, 1 encrypted): false accepts of the impostor pairs, false
        rejects of the genuine pairs."""
        c = (self.plaintext, self.encrypted)[side]
        return {"false_accepts": c.fp, "impostor_pairs": c.fp + c.tn, "false_rejects": c.fn,
                "genuine_pairs": c.tp + c.fn}

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {
            "name": self.name, "delta": self.delta, "decision_band": self.decision_band,
            "plaintext": dict(self.plaintext.to_dict(), far=self.far[0], tar=self.tar[0], **self.counts(0),
                              **self.searches[0]),
            "encrypted": dict(self.encrypted.to_dict(), far=self.far[1], tar=self.tar[1], **self.counts(1),
                              **self.searches[1]),
            "disagreements": self.agreement.disagreements, "errors": self.errors,
            "searches_differ": self.searches_differ,
        }


@dataclass
class AccuracyReport:
    """Plaintext ROC figures and the encrypted operating points of a run."""

    description: str
    preset: str
    kappa: int
    eer: tuple[float, float]
    tar_at: dict[float, tuple[float, float]]
    points: list[OperatingPoint]
    roc: Roc
    timings: dict[str, float] = field(default_factory=dict)
    #: Gallery size N of the 1:N rates, the target FPIR and what became of its point.
    gallery_size: int = 0
    target_fpir: float | None = None
    fpir_note: str = ""
    #: What the labelled set was made from, when photos: ``photos`` tried, ``embedded``, ``skipped``
    #: (a list of ``{"path", "reason"}``); set by the caller, printed in the summary and the JSON.
    inputs: dict | None = None

    @property
    def errors(self) -> int:
        """Encrypted decisions unlike the plaintext ones outside the guard band, over every encrypted run
        (named points at one delta share a run and count once)."""
        return sum(p.errors for p in self._distinct_points())

    @property
    def ok(self) -> bool:
        """True when the encrypted decisions equal the plaintext ones outside the guard band everywhere."""
        return self.errors == 0

    def point(self, name: str) -> OperatingPoint | None:
        """The operating point called ``name`` (``EER``, ``FAR 1%``, ``FAR 0.1%``, ``FPIR 5%``, ``delta``)."""
        return next((p for p in self.points if p.name == name), None)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable).

        ``encrypted`` holds no EER (the encrypted side has no ROC): at the
        plaintext EER threshold it gives the encrypted FAR and FRR with their
        counts (``at_eer_threshold``).
        """
        ep = self.roc.eer_point()
        return {
            "ok": self.ok, "errors": self.errors, "description": self.description, "preset": self.preset,
            "kappa": self.kappa, "plaintext": {
                "eer": self.eer[0], "eer_threshold": self.eer[1], "eer_point": ep,
                "tar_at_far": {f"{far:g}": {"tar": v[0], "threshold": v[1]} for far, v in self.tar_at.items()},
            },
            "encrypted": {
                "at_eer_threshold": _enc_at(self.point("EER")),
                "tar_at_far": {f"{far:g}": _enc_tar(self.point(_far_name(far))) for far in self.tar_at},
            },
            "points": [p.to_dict() for p in self.points], "timings": self.timings,
            "gallery_size": self.gallery_size, "target_fpir": self.target_fpir, "fpir_note": self.fpir_note,
            "inputs": self.inputs,
        }

    def table(self) -> str:
        """Two tables: ground truth (plaintext and encrypted against the identities), then their agreement.

        Every rate carries its sample size (``k/n (p %)``).
        """
        n = self.gallery_size
        headers = ["point", "delta", "", f"FPIR (N = {n:,})", "FNIR", "TP", "FP", "TN", "FN", "precision",
                   "recall (TAR)", "FAR"]
        rows = []
        for p in self.points:
            for i, (side, c) in enumerate((("plaintext", p.plaintext), ("encrypted", p.encrypted))):
                s = p.searches[i]
                rows.append([p.name if i == 0 else "", f"{p.delta:.4f}" if i == 0 else "", side,
                             _frac(s.get("accepted"), s.get("non_mated")), _frac(s.get("missed"), s.get("mated")),
                             str(c.tp), str(c.fp), str(c.tn), str(c.fn), _frac(c.tp, c.tp + c.fp),
                             _frac(c.tp, c.tp + c.fn), _frac(c.fp, c.fp + c.tn)])
        agree = []
        for p in self.points:
            c, s = p.plaintext, p.searches[0]
            searches = (s.get("mated") or 0) + (s.get("non_mated") or 0)
            agree.append([p.name, f"{p.delta:.4f}", f"+-{p.decision_band:.2g}",
                          f"{p.agreement.disagreements}/{c.tp + c.fp + c.tn + c.fn:,}",
                          f"{p.searches_differ}/{searches:,}", str(p.errors)])
        return "\n".join([
            "ground truth (against the identities; FPIR: non-mated probes given any candidate, FNIR: mated probes "
            "whose own entry is not returned; TP/FP/TN/FN per pair; every rate as count/sample size):",
            format_table(headers, rows), "",
            "agreement: encrypted decisions against the plaintext ones (the encryption's correctness, not accuracy):",
            format_table(["point", "delta", "decision band", "pairs differ", "searches differ", "outside band"], agree),
        ])

    def summary(self) -> str:
        """The plaintext EER (with the counts it rests on), the 1:N and TAR@FAR points of both sides, the verdict.

        The encrypted side is given at the EER threshold as an operating
        point (FAR and FRR with counts), never as an EER of its own.
        """
        ep = self.roc.eer_point()
        lines = [self.description, f"preset {self.preset}, kappa {self.kappa}"]
        if self.inputs is not None:
            lines.append(inputs_line(self.inputs))
        rates = (f"FAR {_frac(ep['false_accepts'], ep['n_impostor'])} and FRR "
                 f"{_frac(ep['false_rejects'], ep['n_genuine'])}")
        if ep["false_accepts"] == 0 and ep["false_rejects"] == 0:
            lines.append(f"EER (plaintext ROC): not measurable here: at threshold {ep['threshold']:.4f} no pair is "
                         f"wrong, {rates}; the genuine and impostor scores of this sample do not overlap")
        else:
            meet = ep["false_accepts"] * ep["n_genuine"] == ep["false_rejects"] * ep["n_impostor"]
            lines.append(f"EER (plaintext ROC) about {_pct(ep['eer'])}: at threshold {ep['threshold']:.4f}, where FAR "
                         f"and FRR are closest, {rates}"
                         + ("" if meet else " (they never meet: the EER lies between them)"))
        p = self.point("EER")
        if p is not None:
            c = p.counts(1)
            lines.append(
                f"  encrypted at that threshold (an operating point, not an EER: the encrypted side sees match bits "
                f"at one threshold, not scores): FAR {_frac(c['false_accepts'], c['impostor_pairs'])}, FRR "
                f"{_frac(c['false_rejects'], c['genuine_pairs'])}; {_differ_text(p)}")
        if self.fpir_note:
            lines.append(self.fpir_note)
        fpir_deltas = {p.delta for p in self.points if p.name.startswith("FPIR")}
        for p in self.points:
            if p.name.startswith("FPIR") or (p.name == "delta" and p.delta not in fpir_deltas):
                s0, s1 = p.searches
                lines.append(f"1:N at {p.name} ({p.delta:.4f}), N = {self.gallery_size:,}: FPIR plaintext "
                             f"{_frac(s0.get('accepted'), s0.get('non_mated'))}, encrypted "
                             f"{_frac(s1.get('accepted'), s1.get('non_mated'))}; FNIR plaintext "
                             f"{_frac(s0.get('missed'), s0.get('mated'))}, encrypted "
                             f"{_frac(s1.get('missed'), s1.get('mated'))}")
        for far, (_tar, thr) in self.tar_at.items():
            p = self.point(_far_name(far))
            if p is None:
                continue
            c0, c1 = p.counts(0), p.counts(1)
            lines.append(
                f"TAR at FAR {100 * far:g} % (threshold {thr:.4f}): plaintext "
                f"{_frac(c0['genuine_pairs'] - c0['false_rejects'], c0['genuine_pairs'])} (FAR "
                f"{_frac(c0['false_accepts'], c0['impostor_pairs'])}), encrypted "
                f"{_frac(c1['genuine_pairs'] - c1['false_rejects'], c1['genuine_pairs'])} (FAR "
                f"{_frac(c1['false_accepts'], c1['impostor_pairs'])})")
        if self.ok:
            differ = sum(p.agreement.disagreements for p in self._distinct_points())
            verdict = ("encrypted decisions EQUAL the plaintext ones outside the comparator's decision band"
                       + (f" ({differ} pair decision(s) inside it differ, as the band allows)" if differ else
                          " (and inside it: no pair decision differs)"))
        else:
            runs = sum(1 for p in self._distinct_points() if p.errors)
            verdict = (f"{self.errors} encrypted pair decision(s) DIFFER from the plaintext ones outside the "
                       f"comparator's decision band (at {runs} of {len(self._distinct_points())} thresholds)")
        lines.append("verdict: " + verdict)
        return "\n".join(lines)

    def _distinct_points(self) -> list[OperatingPoint]:
        """One point per distinct delta (named points at one delta share one encrypted run)."""
        return list({p.delta: p for p in self.points}.values())


def inputs_line(inputs: dict) -> str:
    """One line: how many photos made the set, and how many were skipped (and why, counted).

    ``inputs`` as in :attr:`AccuracyReport.inputs`.
    """
    skipped = inputs.get("skipped") or []
    text = f"inputs: {inputs.get('embedded', 0):,} of {inputs.get('photos', 0):,} photo(s) embedded"
    if not skipped:
        return text + ", none skipped"
    why: dict[str, int] = {}
    for s in skipped:
        kind = str(s.get("reason", "")).split(":")[0].split(" (")[0]
        why[kind] = why.get(kind, 0) + 1
    return (text + f"; {len(skipped)} skipped (" + ", ".join(f"{k}: {v}" for k, v in why.items())
            + "), listed on stderr and left out of every figure below")


def _differ_text(p: OperatingPoint) -> str:
    """How many pair decisions differ from the plaintext ones at ``p``, and whether all lie in the band."""
    n = p.plaintext.tp + p.plaintext.fp + p.plaintext.tn + p.plaintext.fn
    d = p.agreement.disagreements
    if d == 0:
        return f"every one of the {n:,} pair decisions equals the plaintext one"
    where = ("all within the comparator's decision band +-" + f"{p.decision_band:.2g} of the threshold"
             if p.errors == 0 else f"{p.errors} of them OUTSIDE the decision band +-{p.decision_band:.2g}")
    return f"{d} of {n:,} pair decisions differ from the plaintext ones, {where}"


def _frac(k: int | None, n: int | None) -> str:
    """``k/n (p %)``; a zero count with its rule-of-three bound; ``n/a`` without trials."""
    if not n or k is None:
        return "n/a"
    if k == 0:
        return f"0/{n:,} (< {100 * 3 / n:.2g} %)"
    pct = 100 * k / n
    return f"{k:,}/{n:,} ({pct:.1f} %)" if pct >= 1 else f"{k:,}/{n:,} ({pct:.2g} %)"


def _far_name(far: float) -> str:
    """Name of the operating point at FAR ``far``."""
    return f"FAR {100 * far:g}%"


def _fpir_name(fpir: float) -> str:
    """Name of the 1:N operating point at FPIR ``fpir``."""
    return f"FPIR {100 * fpir:g}%"


def _enc_at(p: OperatingPoint | None) -> dict | None:
    """Encrypted FAR and FRR, with their counts, at the plaintext EER threshold (an operating point, not an EER)."""
    if p is None:
        return None
    return dict(p.counts(1), threshold=p.delta, far=p.far[1], frr=1 - p.tar[1],
                pairs_differ=p.agreement.disagreements, outside_band=p.errors)


def _enc_tar(p: OperatingPoint | None) -> dict:
    """Encrypted TAR and FAR (with their counts) at a plaintext FAR threshold."""
    return ({"tar": None, "far": None} if p is None
            else dict(p.counts(1), tar=p.tar[1], far=p.far[1], threshold=p.delta))


def _pct(x: float | None) -> str:
    """A rate as a percentage (``n/a`` for None)."""
    return "n/a" if x is None else f"{100 * x:.2f} %"


def run(
    sp: Split,
    *,
    preset: str = "default",
    kappa: int = DEFAULT_KAPPA,
    delta: float | None = None,
    target_fpir: float | None = DEFAULT_TARGET_FPIR,
    work_dir: str | Path | None = None,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
) -> AccuracyReport:
    """Plaintext ROC and encrypted operating points on ``sp`` (see the module doc).

    ``target_fpir`` adds the 1:N point ``FPIR x%`` (when the non-mated
    probes support it: at least ``3 / target_fpir`` of them; ``None``: no
    such point). ``delta`` is the operating threshold (default: that
    point's threshold, else the plaintext threshold at FAR 0.1 %). Keys are
    made once in ``work_dir/keys`` (a temporary directory by default) and
    reused for every threshold.
    """
    scores = cosine_scores(sp.gallery, sp.probes)
    truth = sp.truth
    roc = Roc.from_scores(scores[truth], scores[~truth])
    eer = roc.eer()
    tar_at = {far: roc.at_far(far) for far in FARS}
    wanted = [("EER", eer[1])] + [(_far_name(far), t) for far, (_, t) in tar_at.items()]
    n_non = int((~sp.mated).sum())
    fpir_t, note = None, ""
    if target_fpir is not None:
        if not 0 < target_fpir < 1:
            raise InvalidArgument(f"a target FPIR must be in (0, 1), got {target_fpir}")
        need = int(np.ceil(3 / target_fpir - 1e-9))
        if n_non >= need:
            fpir_t = threshold_at_fpir(scores, sp.mated, target_fpir, roc.thresholds)
            wanted.append((_fpir_name(target_fpir), fpir_t))
            note = (f"1:N point: FPIR {100 * target_fpir:g} % at N = {len(sp.gallery):,}, the lowest threshold at "
                    f"which at most that fraction of the {n_non} non-mated probes get a candidate ({fpir_t:.4f})")
        else:
            note = (f"warning: no 1:N point at FPIR {100 * target_fpir:g} %: it needs at least {need} non-mated probes "
                    f"(rule of three: 3 / FPIR), there are {n_non}" + ("; delta is the FAR 0.1 % threshold"
                                                                       if delta is None else ""))
    if delta is None:
        delta = fpir_t if fpir_t is not None else tar_at[FARS[-1]][1]
    wanted.append(("delta", float(delta)))
    points: list[OperatingPoint] = []
    timings: dict[str, float] = {}
    scratch = tempfile.TemporaryDirectory(prefix="encmatch-accuracy-") if work_dir is None else contextlib.nullcontext(work_dir)
    with scratch as where:
        work = Path(where)
        done: dict[float, OperatingPoint] = {}
        for name, d in wanted:
            key = round(float(d), 6)
            if key in done:
                points.append(_renamed(done[key], name))
                continue
            if log:
                log(f"encrypted identification at {name}: delta {d:.4f}, {len(sp.probes)} queries")
            rep = validate_mod.run(
                sp.gallery, sp.probes, preset=preset, kappa=kappa, delta=float(d), work_dir=work,
                gallery_labels=sp.gallery_ids, query_names=sp.probe_ids, modes=("identification",),
                progress=progress,
            )
            for k, v in rep.timings.items():
                timings[k] = timings.get(k, 0.0) + v
            enc = np.zeros_like(truth)
            for i, q in enumerate(rep.queries):
                enc[i, q.identification.positions] = True
            plain = scores >= d
            p = OperatingPoint(name=name, delta=float(d), plaintext=Confusion(), encrypted=Confusion(),
                               agreement=rep.identification, decision_band=rep.decision_band)
            p.plaintext.add(plain, truth)
            p.encrypted.add(enc, truth)
            p.far = (float(plain[~truth].mean()), float(enc[~truth].mean()))
            p.tar = (float(plain[truth].mean()), float(enc[truth].mean()))
            p.searches = (search_rates(plain, truth, sp.mated), search_rates(enc, truth, sp.mated))
            p.searches_differ = int((plain != enc).any(axis=1).sum())
            done[key] = p
            points.append(p)
    return AccuracyReport(description=sp.describe(), preset=preset, kappa=kappa, eer=eer, tar_at=tar_at,
                          points=points, roc=roc, timings=timings, gallery_size=len(sp.gallery),
                          target_fpir=target_fpir, fpir_note=note)


def _renamed(p: OperatingPoint, name: str) -> OperatingPoint:
    """A copy of ``p`` under another name (two named points at one delta share one encrypted run)."""
    return OperatingPoint(name=name, delta=p.delta, plaintext=p.plaintext, encrypted=p.encrypted,
                          agreement=p.agreement, decision_band=p.decision_band, far=p.far, tar=p.tar,
                          searches=p.searches, searches_differ=p.searches_differ)


def plot(report: AccuracyReport, path: str | Path) -> Path:
    """ROC (TAR vs FAR) and DET (FRR vs FAR) of the plaintext scores with the encrypted operating points, as a PNG.

    See :func:`figure`.
    """
    plt = pyplot()
    fig = figure(report)
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


#: Zero counts are drawn at the rule-of-three bound ``RULE_OF_THREE / n`` (95 % upper bound of the rate).
RULE_OF_THREE = 3.0


def figure(report: AccuracyReport):
    """The matplotlib figure of :func:`plot`.

    The plaintext ROC is a curve (every threshold); the encrypted
    operating points are separate markers, never joined, each labelled
    with its name, delta and counts. FAR and FRR are log axes: a zero count
    cannot be drawn there, so it is drawn at its 95 % upper bound ``3 / n``
    with a marker pointing towards lower rates (``<`` for FAR, ``v`` for
    FRR) and "upper bound" in its label; the plaintext curve's thresholds
    with no false accept get one such marker. TAR (a linear axis) is drawn
    as measured, 100 % included.
    """
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    roc_, n_imp, n_gen = report.roc, report.roc.n_impostor, report.roc.n_genuine
    far, frr = roc_.far, roc_.frr
    bound_a = RULE_OF_THREE / n_imp
    fig, (roc, det) = plt.subplots(1, 2, figsize=(12, 6.5))
    curve = f"plaintext (cosine, every threshold; {n_gen:,} genuine, {n_imp:,} impostor pairs)"
    pos = far > 0
    roc.plot(far[pos], 1 - frr[pos], lw=1.5, color="C0", label=curve)
    if (~pos).any():
        best = float(np.max(1 - frr[~pos]))
        roc.plot([bound_a], [best], "<", color="C0", ms=7, ls="none",
                 label=f"plaintext, FAR 0/{n_imp:,}: drawn at its upper bound 3/n = {bound_a:.2g} (TAR up to "
                       f"{100 * best:.1f} %)")
    both = (far > 0) & (frr > 0)
    det.plot(far[both], frr[both], lw=1.5, color="C0", label="plaintext (thresholds where FAR and FRR are both > 0)")
    names: dict[float, list[str]] = {}
    for p in report.points:
        names.setdefault(p.delta, []).append(p.name)
    pts = sorted({p.delta: p for p in report.points}.values(), key=lambda p: p.far[1])
    marks = [("o", "C1")] + [(m, f"C{k + 2}") for k, m in enumerate("sD^Ph*X")]
    for k, p in enumerate(pts):
        c = p.counts(1)
        fa, na, fr, ng = c["false_accepts"], c["impostor_pairs"], c["false_rejects"], c["genuine_pairs"]
        marker, colour = marks[k % len(marks)]
        x = fa / na if fa else RULE_OF_THREE / na
        tar = (ng - fr) / ng if ng else float("nan")
        label = (f"encrypted, {', '.join(names[p.delta])} at delta {p.delta:.3f}: FAR {_frac(fa, na)}, "
                 f"TAR {_frac(ng - fr, ng)}")
        if not fa:
            label += "; FAR 0: drawn at its upper bound 3/n"
        roc.plot([x], [tar], marker="<" if not fa else marker, color=colour, ms=8, ls="none", label=label)
        y = fr / ng if fr else RULE_OF_THREE / ng
        det_marker = marker if fa and fr else ("v" if fa else ("<" if fr else r"$\swarrow$"))
        bounds = [w for w, zero in (("FAR", not fa), ("FRR", not fr)) if zero]
        det.plot([x], [y], marker=det_marker, color=colour, ms=9 if det_marker.startswith("$") else 8, ls="none",
                 label=f"{', '.join(names[p.delta])}: FAR {_frac(fa, na)}, FRR {_frac(fr, ng)}"
                       + (f"; {' and '.join(bounds)} 0: drawn at the upper bound 3/n" if bounds else ""))
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in (roc, det):
        ax.set_xscale("log")
        ax.set_xlabel("false accept rate (FAR)")
        ax.grid(True, which="both", alpha=0.3)
    roc.set_ylabel("true accept rate (TAR)")
    roc.set_ylim(top=1.01)  # a TAR above 100 % means nothing
    roc.set_title("ROC (markers: encrypted operating points, not a curve)", fontsize=10)
    det.set_yscale("log")
    det.set_ylabel("false reject rate (FRR)")
    det.set_title("DET", fontsize=10)
    for axis in (roc.xaxis, det.xaxis, det.yaxis):  # plain numbers, not 6x10^-1 (after the scales are set)
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
    for ax in (roc, det):
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=6.5, frameon=False)
    fig.suptitle(f"{report.description}\npreset {report.preset}, kappa {report.kappa}; a zero count n is drawn "
                 f"at its 95 % upper bound 3/n (marker < or v)", fontsize=8)
    fig.tight_layout()
    return fig
