"""`encmatch demo`: encrypted 1:N face search on real faces, checked against brute force and against the truth.

At the secure ``default`` preset: a gallery of one LFW face (MobileFaceNet,
192-d) per enrolled identity (3,000 identities), padded to one full group
(16,384 vectors) with other real LFW faces not of any query identity and,
if needed, random unit vectors; 4 queries of enrolled people (other images)
and 4 of people who are not enrolled.

Its threshold is a 1:N one: unless ``--delta`` is given, delta is
calibrated (:mod:`encmatch.evaluation.calibrate`) for a target FPIR (default 1 %) at
the demo's own gallery size, on the LFW faces of every identity that is not
queried (so the queries' own scores never choose it). A 1:1 threshold
(FMR 1e-4) would accept about 40 % of unknown people against 16,384 faces.

It runs every step (keygen, enroll, encrypt queries, membership and
identification search, decrypt), times each, and reports two separate
things: the **ground truth** (unknown people accepted = false positives,
enrolled people missed = false negatives, per mode) and the **agreement
with exact brute force** on the same scores (the encryption's correctness).
It exits non-zero only when an encrypted answer differs from brute force
outside the comparator's guard band: misses and false accepts at delta are
the face model's, and brute force makes them too.

Keys in the work directory (``./demo-work/keys``) are reused when their
parameters match, and so is the calibration (``calibration.json``) when its
inputs match; the index is rebuilt every run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import data as data_mod
from .._util.ui import describe_params, warn_if_insecure
from ..params import describe, version
from . import calibrate as calibrate_mod, validate
from .validate import format_table

__all__ = ["DEFAULT_DELTA", "DEFAULT_TARGET_FPIR", "GroundTruth", "ground_truth", "calibrate_delta", "run"]

#: The 1:1 threshold (FMR 1e-4) of ``encmatch validate``; the demo calibrates a 1:N one instead.
DEFAULT_DELTA = validate.DEFAULT_DELTA
#: The demo's target FPIR at its gallery size.
DEFAULT_TARGET_FPIR = calibrate_mod.DEFAULT_TARGET_FPIR


# ---- the threshold ----------------------------------------------------------------


def calibrate_delta(faces: data_mod.FaceSet, exclude: list[str], gallery_size: int, target_fpir: float, kappa: int,
                    cache: Path | None = None) -> dict:
    """Delta for ``target_fpir`` at ``gallery_size``, calibrated on ``faces`` without the identities ``exclude``.

    Returns the calibration's figures (delta, plaintext threshold, FPIR,
    FNIR, FMR at delta, support, method, seconds). ``cache`` (a JSON file)
    is reused when it was written for the same inputs.
    """
    keep = ~np.isin(faces.name, np.asarray(exclude, dtype=str))
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(faces.emb[keep]).tobytes())
    digest.update(np.ascontiguousarray(faces.label[keep]).tobytes())
    digest.update(json.dumps([gallery_size, target_fpir, kappa, calibrate_mod.BIN, calibrate_mod.TOP_K]).encode())
    key = digest.hexdigest()
    if cache is not None and cache.is_file():
        try:
            got = json.loads(cache.read_text())
            if got.get("key") == key:
                got["cached"] = True
                return got
        except (OSError, ValueError):
            pass
    t0 = time.perf_counter()
    dist = calibrate_mod.ScoreDistributions.from_labelled(faces.emb[keep], faces.label[keep])
    cal = calibrate_mod.calibrate(dist, target_fpir=target_fpir, kappa=kappa, gallery_size=gallery_size)
    c = cal.checks
    out = {
        "key": key, "delta": cal.delta, "threshold": cal.threshold, "target_fpir": target_fpir,
        "gallery_size": gallery_size, "fpir": c["fpir"], "fpir_independent": c["fpir_independent"],
        "fnir": c["fnir"], "fmr": c["fmr"], "fmr_count": c["fmr_count"], "impostor_pairs": dist.n_impostor,
        "genuine_pairs": dist.n_genuine, "searches": dist.n_searches, "faces": int(keep.sum()),
        "identities": int(len(np.unique(faces.label[keep]))), "method": cal.fpir_method,
        "support": cal.support.describe(), "seconds": time.perf_counter() - t0, "cached": False,
    }
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(out, indent=1))
    return out


# ---- ground truth ---------------------------------------------------------------------


@dataclass
class GroundTruth:
    """Answers against who is really enrolled (not against brute force), for the encrypted and the brute-force side.

    Per side, ``membership``: ``missed`` enrolled people answered "not
    enrolled" (false negatives), ``accepted`` unknown people answered
    "enrolled" (false positives); ``identification``: enrolled people whose
    own gallery entry was not returned (``missed``), unknown people who got
    any candidate (``accepted``), and the wrong candidates returned to
    enrolled people (``wrong``).
    """

    known: int
    unknown: int
    encrypted: dict = field(default_factory=dict)
    brute_force: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {"known": self.known, "unknown": self.unknown, "encrypted": self.encrypted,
                "brute_force": self.brute_force}

    def table(self) -> str:
        """Per query: who it is, and each answer judged against the truth."""
        return format_table(["#", "query", "truth", "membership", "", "identification: own entry returned",
                             "others returned", ""], self.rows)

    def summary(self) -> str:
        """Misses and false accepts per mode, encrypted (and brute force where it differs)."""
        lines = []
        for mode in ("membership", "identification"):
            e, b = self.encrypted.get(mode), self.brute_force.get(mode)
            if e is None:
                continue
            text = (f"  {mode}: enrolled people missed (false negatives) {e['missed']} of {self.known}, "
                    f"unknown people accepted (false positives) {e['accepted']} of {self.unknown}")
            if mode == "identification":
                text += f"; wrong people returned to enrolled ones: {e['wrong']}"
            if b is not None and b != e:
                text += f" (brute force: missed {b['missed']}, accepted {b['accepted']})"
            elif b is not None:
                text += " (brute force: the same)"
            lines.append(text)
        return "\n".join(lines)


def ground_truth(report: validate.ValidationReport, gallery_labels: list[str]) -> GroundTruth:
    """Judge ``report``'s answers (encrypted and brute force) against its queries' ``expected_enrolled``."""
    labels = np.asarray(gallery_labels, dtype=str)
    known = sum(1 for q in report.queries if q.expected_enrolled)
    gt = GroundTruth(known=known, unknown=sum(1 for q in report.queries if q.expected_enrolled is False))
    zero = lambda: {"missed": 0, "accepted": 0}  # noqa: E731
    enc = {"membership": zero(), "identification": dict(zero(), wrong=0)}
    bf = {"membership": zero(), "identification": dict(zero(), wrong=0)}
    for q in report.queries:
        if q.expected_enrolled is None:
            continue
        truth = bool(q.expected_enrolled)
        own = np.flatnonzero(labels == q.name)
        row = [str(q.index), q.name, "enrolled" if truth else "not enrolled"]
        for side, member, positions in (("encrypted", q.membership.enrolled if q.membership else None,
                                         q.identification.positions if q.identification else None),
                                        ("brute force", q.exact_count > 0, q.exact_positions)):
            tally = enc if side == "encrypted" else bf
            if member is not None and q.membership is not None:
                if truth and not member:
                    tally["membership"]["missed"] += 1
                if not truth and member:
                    tally["membership"]["accepted"] += 1
            if positions is not None and q.identification is not None:
                pos = np.asarray(positions, dtype=np.int64)
                found = bool(np.isin(own, pos).any()) if truth else False
                others = int(np.sum(labels[pos[(pos >= 0) & (pos < len(labels))]] != q.name))
                if truth:
                    tally["identification"]["missed"] += int(not found)
                    tally["identification"]["wrong"] += others
                elif len(pos):
                    tally["identification"]["accepted"] += 1
            if side == "encrypted":
                m_text = "-" if member is None or q.membership is None else ("enrolled" if member else "not enrolled")
                m_ok = "" if m_text == "-" else ("right" if member == truth else
                                                 ("MISSED" if truth else "FALSE ACCEPT"))
                if positions is None or q.identification is None:
                    i_text, o_text, i_ok = "-", "-", ""
                else:
                    i_text = ("yes" if found else "no") if truth else "n/a"
                    o_text = str(others)
                    i_ok = ("right" if (found and not others) else ("MISSED" if not found else "EXTRA")) if truth \
                        else ("right" if not len(pos) else "FALSE ACCEPT")
                row += [m_text, m_ok, i_text, o_text, i_ok]
        gt.rows.append(row)
    if any(q.membership is not None for q in report.queries):
        gt.encrypted["membership"], gt.brute_force["membership"] = enc["membership"], bf["membership"]
    if any(q.identification is not None for q in report.queries):
        gt.encrypted["identification"], gt.brute_force["identification"] = enc["identification"], bf["identification"]
    return gt


# ---- the demo -------------------------------------------------------------------------


def run(args: argparse.Namespace, out=None) -> int:
    """Run the demo with parsed ``args``; returns the exit code (0 = all answers agree with brute force)."""
    out = out or sys.stdout

    def say(line: str = "") -> None:
        """Print one line of demo output, flushed."""
        print(line, file=out, flush=True)

    faces = data_mod.load_faces("lfw", args.model, args.data)
    dim = faces.emb.shape[1]
    params = describe(args.preset, args.kappa, dim)
    v = version()
    say("encmatch demo: encrypted 1:N face search, checked against exact brute force and against the truth")
    say(f"core {v.get('version', '?')} (lattigo {v.get('lattigo', '?')})")
    say(f"parameters: {describe_params(params)}")
    insecure = warn_if_insecure(params, out)
    size = args.size or int(params["group_size"])
    scenario = data_mod.build_scenario(
        faces, size, n_known=args.known, n_unknown=args.unknown, n_enrolled=args.enrolled, seed=args.seed
    )
    say(f"data: {faces.source} ({len(faces):,} faces, {dim}-d)")
    say(scenario.describe())
    cal = None
    if args.delta is None:
        cal = calibrate_delta(faces, scenario.query_names, size, args.target_fpir, args.kappa,
                              cache=args.work / "calibration.json")
        delta = float(cal["delta"])
        say(f"match threshold delta = {delta:.4f}: calibrated for 1:N, FPIR {_pct(args.target_fpir)} at this gallery "
            f"size ({size:,} entries), on {cal['faces']:,} LFW faces of {cal['identities']:,} people not queried"
            + (" (cached)" if cal.get("cached") else f" ({cal['seconds']:.1f} s)"))
        say(f"  expected there: FPIR {_pct(cal['fpir'])} (unknown people answered enrolled), FNIR {_pct(cal['fnir'])} "
            f"(enrolled people missed); 1:1 FMR "
            f"{calibrate_mod.rate_text(cal['fmr_count'], cal['impostor_pairs'], 'impostor pairs')}")
    else:
        delta = float(args.delta)
        say(f"match threshold delta = {delta:g} (given with --delta, not calibrated for this gallery size)")
    say(f"similarity strategy: {args.strategy}" + (f", n1 {args.n1}" if args.n1 else "")
        + (f"; server memory budget {args.memory_budget / 1e9:g} GB" if args.memory_budget else ""))
    say(f"work directory: {args.work.resolve()}")
    say()
    report = validate.run(
        scenario.gallery,
        scenario.queries,
        preset=args.preset,
        kappa=args.kappa,
        delta=delta,
        strategy=args.strategy,
        n1=args.n1,
        memory_budget=args.memory_budget,
        work_dir=args.work,
        gallery_labels=scenario.gallery_labels,
        query_names=scenario.query_names,
        query_enrolled=scenario.query_enrolled,
        log=say,
        progress=True,
    )
    gt = ground_truth(report, scenario.gallery_labels)
    say()
    say("ground truth: the encrypted answers against who is really enrolled")
    say(gt.table())
    say(gt.summary())
    if cal is not None:
        say(f"  (expected at delta, {size:,} entries: {_pct(cal['fpir'])} of unknown people accepted, "
            f"{_pct(cal['fnir'])} of enrolled people missed)")
    say()
    say("agreement with exact brute force on the same scores (the encryption's correctness, not ground truth:")
    say("TP/FP/TN/FN, recall and precision count encrypted answers against brute-force ones)")
    say(report.table())
    say()
    say(report.summary())
    total = sum(report.timings.values())
    say("timings: " + ", ".join(f"{k} {t:.2f} s" for k, t in report.timings.items()) + f"; total {total:.1f} s")
    if insecure:
        warn_if_insecure(params, out)
    return 0 if report.ok else 1


def _pct(x: float) -> str:
    """A rate as a percentage."""
    return f"{100 * x:.3g} %"
