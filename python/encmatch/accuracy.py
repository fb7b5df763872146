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
encrypted pipeline (:func:`encmatch.validate.run`: keys, enrollment,
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

:func:`plot` draws the ROC and DET curves: the plaintext curve, and the
encrypted operating points.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from . import validate as validate_mod
from .bruteforce import cosine_scores
from .data import FaceSet
from .errors import InvalidArgument
from .validate import Confusion, format_table
from .defaults import DEFAULT_KAPPA

__all__ = ["Split", "split", "Roc", "OperatingPoint", "AccuracyReport", "run", "plot", "search_rates",
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

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {
            "name": self.name, "delta": self.delta, "decision_band": self.decision_band,
            "plaintext": dict(self.plaintext.to_dict(), far=self.far[0], tar=self.tar[0], **self.searches[0]),
            "encrypted": dict(self.encrypted.to_dict(), far=self.far[1], tar=self.tar[1], **self.searches[1]),
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

    @property
    def errors(self) -> int:
        """Encrypted decisions unlike the plaintext ones outside the guard band, over every point."""
        return sum(p.errors for p in self.points)

    @property
    def ok(self) -> bool:
        """True when the encrypted decisions equal the plaintext ones outside the guard band everywhere."""
        return self.errors == 0

    def point(self, name: str) -> OperatingPoint | None:
        """The operating point called ``name`` (``EER``, ``FAR 1%``, ``FAR 0.1%``, ``FPIR 5%``, ``delta``)."""
        return next((p for p in self.points if p.name == name), None)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        return {
            "ok": self.ok, "errors": self.errors, "description": self.description, "preset": self.preset,
            "kappa": self.kappa, "plaintext": {
                "eer": self.eer[0], "eer_threshold": self.eer[1],
                "tar_at_far": {f"{far:g}": {"tar": v[0], "threshold": v[1]} for far, v in self.tar_at.items()},
            },
            "encrypted": {
                "eer": _enc_eer(self.point("EER")),
                "tar_at_far": {f"{far:g}": _enc_tar(self.point(_far_name(far))) for far in self.tar_at},
            },
            "points": [p.to_dict() for p in self.points], "timings": self.timings,
            "gallery_size": self.gallery_size, "target_fpir": self.target_fpir, "fpir_note": self.fpir_note,
        }

    def table(self) -> str:
        """Two tables: ground truth (plaintext and encrypted against the identities), then their agreement."""
        n = self.gallery_size
        headers = ["point", "delta", "", f"FPIR (N = {n:,})", "FNIR", "TP", "FP", "TN", "FN", "precision",
                   "recall", "FAR"]
        rows = []
        for p in self.points:
            for i, (side, c) in enumerate((("plaintext", p.plaintext), ("encrypted", p.encrypted))):
                s = p.searches[i]
                rows.append([p.name if i == 0 else "", f"{p.delta:.4f}" if i == 0 else "", side,
                             _frac(s.get("accepted"), s.get("non_mated")), _frac(s.get("missed"), s.get("mated")),
                             str(c.tp), str(c.fp), str(c.tn), str(c.fn), _pct(c.precision), _pct(c.recall),
                             _pct(p.far[i])])
        agree = [[p.name, f"{p.delta:.4f}", f"{p.decision_band:.2g}", str(p.agreement.disagreements),
                  str(p.searches_differ), str(p.errors)] for p in self.points]
        return "\n".join([
            "ground truth (against the identities; FPIR: non-mated probes given any candidate, FNIR: mated probes "
            "whose own entry is not returned; TP/FP/TN/FN per pair):",
            format_table(headers, rows), "",
            "agreement: encrypted decisions against the plaintext ones (the encryption's correctness, not accuracy):",
            format_table(["point", "delta", "decision band", "pairs differ", "searches differ", "outside band"], agree),
        ])

    def summary(self) -> str:
        """EER and TAR@FAR of both, and the verdict."""
        enc_eer = _enc_eer(self.point("EER"))
        lines = [self.description,
                 f"preset {self.preset}, kappa {self.kappa}",
                 f"EER: plaintext {_pct(self.eer[0])} (threshold {self.eer[1]:.4f}), "
                 f"encrypted {_pct(enc_eer)} at the same threshold"]
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
        for far, (tar, thr) in self.tar_at.items():
            enc = _enc_tar(self.point(_far_name(far)))
            lines.append(f"TAR at FAR {100 * far:g} %: plaintext {_pct(tar)} (threshold {thr:.4f}), "
                         f"encrypted {_pct(enc['tar'])} (its FAR {_pct(enc['far'])})")
        lines.append("verdict: " + ("encrypted decisions EQUAL the plaintext ones outside the guard band"
                                    if self.ok else f"{self.errors} encrypted decision(s) DIFFER outside the guard band"))
        return "\n".join(lines)


def _frac(k: int | None, n: int | None) -> str:
    """``k/n (p %)``; a zero count with its rule-of-three bound; ``n/a`` without trials."""
    if not n or k is None:
        return "n/a"
    if k == 0:
        return f"0/{n} (< {100 * 3 / n:.2g} %)"
    return f"{k}/{n} ({100 * k / n:.1f} %)"


def _far_name(far: float) -> str:
    """Name of the operating point at FAR ``far``."""
    return f"FAR {100 * far:g}%"


def _fpir_name(fpir: float) -> str:
    """Name of the 1:N operating point at FPIR ``fpir``."""
    return f"FPIR {100 * fpir:g}%"


def _enc_eer(p: OperatingPoint | None) -> float | None:
    """Encrypted (FAR + FRR) / 2 at the plaintext EER threshold."""
    return None if p is None else (p.far[1] + (1 - p.tar[1])) / 2


def _enc_tar(p: OperatingPoint | None) -> dict:
    """Encrypted TAR and FAR at a plaintext FAR threshold."""
    return {"tar": None, "far": None} if p is None else {"tar": p.tar[1], "far": p.far[1], "threshold": p.delta}


def _pct(x: float | None) -> str:
    """A rate as a percentage (``n/a`` for None)."""
    return "n/a" if x is None else f"{100 * x:.2f} %"


def run(
    sp: Split,
    *,
    preset: str = "toy",
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
    """ROC (TAR vs FAR) and DET (FRR vs FAR) of the plaintext scores with the encrypted operating points, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fmr, fnmr = report.roc.far, report.roc.frr
    floor_a, floor_r = 0.5 / report.roc.n_impostor, 0.5 / report.roc.n_genuine
    names: dict[float, list[str]] = {}
    for p in report.points:
        names.setdefault(p.delta, []).append(p.name)
    pts = sorted({p.delta: p for p in report.points}.values(), key=lambda p: p.far[1])
    enc_far = np.array([max(p.far[1], floor_a) for p in pts])
    enc_frr = np.array([max(1 - p.tar[1], floor_r) for p in pts])
    fig, (roc, det) = plt.subplots(1, 2, figsize=(11, 4.6))
    roc.plot(np.maximum(fmr, floor_a), 1 - fnmr, lw=1.5, label="plaintext (cosine, all thresholds)")
    roc.plot(enc_far, 1 - enc_frr, "o--", ms=6, label="encrypted (operating points)")
    roc.set_xscale("log")
    roc.set_xlabel("false accept rate (FAR)")
    roc.set_ylabel("true accept rate (TAR)")
    roc.set_title("ROC")
    det.plot(np.maximum(fmr, floor_a), np.maximum(fnmr, floor_r), lw=1.5, label="plaintext")
    det.plot(enc_far, enc_frr, "o--", ms=6, label="encrypted")
    det.set_xscale("log")
    det.set_yscale("log")
    det.set_xlabel("false accept rate (FAR)")
    det.set_ylabel("false reject rate (FRR)")
    det.set_title("DET")
    for k, (p, x, y) in enumerate(zip(pts, enc_far, enc_frr)):
        label = ", ".join(names[p.delta]) + f" ({p.delta:.3f})"
        roc.annotate(label, (x, 1 - y), fontsize=7, xytext=(4, -12 - 12 * k), textcoords="offset points",
                     arrowprops={"arrowstyle": "-", "lw": 0.5})
        det.annotate(label, (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
    for ax in (roc, det):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right" if ax is roc else "upper right", fontsize=8)
    fig.suptitle(f"{report.description}\npreset {report.preset}, kappa {report.kappa}", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

