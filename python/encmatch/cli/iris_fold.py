"""``encmatch iris fold``: design papers/004's fold polynomial for a threshold, check it, try it on templates.

::

    encmatch iris fold --t 0.34 [--degree 15 --k 16 --top 60 --guard 0.005 --clear -0.15]
                       [--maybe-degree 31 --maybe-top 2 --maybe-clear -0.1 --sure-tolerance 7.2 --tolerance 0.29]
                       [--sums 1000000000 --workers 2] [GALLERY... --queries QUERIES...]
                       [--plot fold.png] [-o fold.json]

Prints the design (:mod:`encmatch.iris.folding`: the polynomial, its
measured bounds, the two thresholds, the classifiers' precision), the
simulated slots' counts with ``--sums`` and, given templates, each eye's
folded answer beside the plaintext model. Exit 1 if any answer is wrong
(a clean answer unlike the model outside the guard band), 2 on bad input.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .._util.plots import pyplot
from ..errors import InvalidArgument
from ..iris import folding
from ..iris.encoding import DEFAULT_ROTATION_SHIFT
from ..iris.model import match
from ..iris.openiris import read_templates
from ._iris_util import emit as _emit, log as _log, threshold as _threshold

__all__ = ["add_commands"]

#: Slots per simulation task handed to a worker process.
_TASK = 20_000_000


def _sums(fold: folding.FoldDesign, n: int, seed: int) -> dict:
    """One worker's share of ``--sums`` (a picklable top-level function)."""
    return folding.check_sums(fold, n, seed=seed, progress=False)


def _simulate(fold: folding.FoldDesign, n: int, workers: int, seed: int) -> dict:
    """``check_sums`` over ``n`` slots in tasks of :data:`_TASK` on ``workers`` processes; counts added up."""
    sizes = [min(_TASK, n - s) for s in range(0, n, _TASK)]
    total: dict = {}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_sums, fold, m, seed + i) for i, m in enumerate(sizes)]
        for done, f in enumerate(futures, 1):
            for name, counts in f.result().items():
                acc = total.setdefault(name, dict.fromkeys(counts, 0))
                for key, value in counts.items():
                    acc[key] += value
            _log(f"fold sums: {sum(sizes[:done]):,} of {n:,} slots, {time.perf_counter() - t0:.0f} s")
    return total


def _plot(fold: folding.FoldDesign, path: Path) -> None:
    """The fold polynomial over the score, with the guard band and the clear bound."""
    plt = pyplot()
    x = np.linspace(fold.poly.lo, fold.poly.hi, 4001)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, top in ((a, fold.top * 1.05), (b, 2.0)):
        ax.plot(x + fold.delta, fold.poly(x), lw=1.2)
        ax.axvspan(fold.delta - fold.guard, fold.delta + fold.guard, color="0.85", label="guard band")
        ax.axvline(fold.delta + fold.clear, ls=":", c="0.4", label=f"clear ({fold.delta + fold.clear:.3f})")
        ax.axvline(fold.delta + fold.sure_from, ls="--", c="g", label=f"sure from ({fold.delta + fold.sure_from:.3f})")
        ax.set_ylim(min(fold.floor, 0) * 1.5 - 0.05, top)
        ax.set_xlabel("score <c'1, c'2> / |m1 and m2|")
    a.set_ylabel("f(score - delta)")
    a.set_title(f"fold polynomial, degree {fold.poly.degree}, k = {fold.k}, t = {fold.t}")
    b.set_title("near the threshold")
    b.axhline(fold.near, c="r", lw=0.8, label=f"near = {fold.near:.3f}")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cmd_fold(args: argparse.Namespace) -> int:
    """``iris fold``: design, check and try the fold polynomial."""
    if bool(args.gallery) != bool(args.queries):
        raise InvalidArgument("give both GALLERY files and --queries, or neither")
    if args.sums < 0 or args.workers < 1:
        raise InvalidArgument(f"--sums must be >= 0 and --workers >= 1, got {args.sums} and {args.workers}")
    t0 = time.perf_counter()
    fold = folding.design(args.t, k=args.k, degree=args.degree, guard=args.guard, clear=args.clear,
                          top=args.top, tolerance=args.tolerance, maybe_degree=args.maybe_degree,
                          sure_tolerance=args.sure_tolerance, maybe_top=args.maybe_top, maybe_clear=args.maybe_clear)
    out: dict[str, Any] = {"design": fold.to_dict(), "design_seconds": time.perf_counter() - t0}
    quiet_to = fold.clear if fold.maybe_clear is None else fold.maybe_clear
    _log(f"degree {fold.poly.degree}, k {fold.k}: clean no up to score {fold.delta + quiet_to:.3f}, "
         f"clean yes from {fold.delta + fold.sure_from:.3f}, classifier precision {fold.precision:.2e} "
         f"(sure {fold.sure_precision:.2e}, maybe {fold.maybe_precision:.2e})")
    wrong = 0
    if args.sums:
        t0 = time.perf_counter()
        stats = _simulate(fold, args.sums, args.workers, args.seed)
        out["sums"] = {"slots": args.sums, "seed": args.seed, "seconds": time.perf_counter() - t0, "scenarios": stats}
        wrong += sum(s["wrong"] for s in stats.values())
    if args.gallery:
        gallery, queries = read_templates(args.gallery), read_templates(args.queries)
        t0 = time.perf_counter()
        model = match(queries, gallery, args.t, rotation_shift=args.rotation_shift)
        res = folding.fold_match(queries, gallery, fold, rotation_shift=args.rotation_shift)
        bad = res.wrong(model, fold.guard)
        wrong += len(bad)
        names = {folding.MATCH: "match", folding.NO_MATCH: "no match", folding.FLAGGED: "flagged"}
        out["eyes"] = {
            "seconds": time.perf_counter() - t0, "slots": res.slots,
            "answers": {names[a]: int((res.answer == a).sum()) for a in names},
            "wrong": [str(queries.ids[e]) for e in bad],
            "per_eye": [{"eye": str(queries.ids[e]), "answer": names[int(res.answer[e])], "model": bool(model.bits[e]),
                         "best_score": float(model.best_score[e]), "best_sum": float(res.best_sum[e])}
                        for e in range(len(queries))],
        }
    if args.plot:
        _plot(fold, args.plot)
    _emit(out, args.out)
    if wrong:
        _log(f"error: {wrong} wrong folded answer(s)")
    return 1 if wrong else 0


def add_commands(sub: Any) -> None:
    """Add ``iris fold`` to the iris subcommands."""
    s = sub.add_parser("fold", help="design papers/004's fold polynomial (sound for any gallery), simulate it, try it on templates")
    s.add_argument("gallery", nargs="*", type=Path, metavar="GALLERY", help="gallery .npz or open-iris .json files (optional)")
    s.add_argument("--queries", nargs="+", type=Path, default=None, metavar="QUERIES", help="query templates for GALLERY")
    s.add_argument("--t", type=_threshold, default=0.34, help="fractional Hamming threshold (default: %(default)s)")
    s.add_argument("--k", type=int, default=16, help="scores added per slot (default: %(default)s)")
    s.add_argument("--degree", type=int, default=15, help="the polynomial's degree (default: %(default)s)")
    s.add_argument("--top", type=float, default=60.0, help="bound on the polynomial (default: %(default)s)")
    s.add_argument("--guard", type=float, default=0.005, help="guard band on score - (1 - 2t) (default: %(default)s)")
    s.add_argument("--clear", type=float, default=-0.15,
                   help="scores below (1 - 2t) + CLEAR add almost nothing (default: %(default)s)")
    s.add_argument("--tolerance", type=float, default=0.05,
                   help="error the encrypted evaluation may add to a slot's sum (default: %(default)s)")
    s.add_argument("--maybe-degree", type=int, default=None,
                   help="decide 'maybe' on a second polynomial of this degree, bounded by --maybe-top (default: f decides both)")
    s.add_argument("--maybe-top", type=float, default=4.0, help="bound on the maybe polynomial (default: %(default)s)")
    s.add_argument("--maybe-clear", type=float, default=None,
                   help="with --maybe-degree: the maybe polynomial stays quiet up to (1 - 2t) + MAYBE_CLEAR (default: --clear)")
    s.add_argument("--sure-tolerance", type=float, default=None,
                   help="with --maybe-degree: the tolerance of the sure sums, which sets the sure classifier's gap (default: --tolerance)")
    s.add_argument("--sums", type=int, default=0, help="simulated slots to check (default: none)")
    s.add_argument("--workers", type=int, default=1, help="processes for --sums (default: %(default)s)")
    s.add_argument("--seed", type=int, default=0, help="seed of the simulation (default: %(default)s)")
    s.add_argument("--rotation-shift", type=int, default=DEFAULT_ROTATION_SHIFT,
                   help="shifts -s..s columns (default: %(default)s)")
    s.add_argument("--plot", type=Path, default=None, help="draw the polynomial here (.png; needs the plots extra)")
    s.add_argument("-o", "--out", type=Path, default=None, help="write the JSON here instead of stdout")
    s.set_defaults(func=cmd_fold)
