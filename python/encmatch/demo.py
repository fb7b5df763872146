"""`encmatch demo`: encrypted 1:N face search on real faces, checked against brute force.

At the secure ``default`` preset: a gallery of one LFW face (MobileFaceNet,
192-d) per enrolled identity (3,000 identities), padded to one full group
(16,384 vectors) with other real LFW faces not of any query identity and,
if needed, random unit vectors; 4 queries of enrolled people (other images)
and 4 of people who are not enrolled. It runs every step (keygen, enroll,
encrypt queries, membership and identification search, decrypt), times
each, prints brute force against encrypted per query, and exits non-zero
when any answer is wrong outside the comparator's guard band.

Keys in the work directory (``./demo-work/keys``) are reused when their
parameters match; the index is rebuilt every run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import data as data_mod
from . import validate
from ._ui import add_memory_budget_argument, add_strategy_arguments, describe_params, warn_if_insecure
from .client import describe, version

__all__ = ["DEFAULT_DELTA", "add_arguments", "run"]

DEFAULT_DELTA = validate.DEFAULT_DELTA


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the demo's options to ``p``."""
    p.add_argument("--preset", default="default", help="parameter preset (default: %(default)s; 'toy' is fast and INSECURE)")
    p.add_argument("--kappa", type=int, default=10, help="comparator depth budget (default: %(default)s)")
    p.add_argument("--delta", type=float, default=DEFAULT_DELTA,
                   help="match threshold, cosine (default: %(default)s = MobileFaceNet LFW at FMR 1e-4)")
    p.add_argument("--work", type=Path, default=Path("demo-work"), help="work directory (default: ./%(default)s)")
    p.add_argument("--data", type=Path, default=None,
                   help="face data directory holding lfw/ (default: $ENCMATCH_DATA or shared/data next to the repo)")
    p.add_argument("--model", default="mfn", choices=["mfn", "dlib"], help="embedding model (default: %(default)s)")
    p.add_argument("--enrolled", type=int, default=None, help="enrolled identities (default: min(3000, group/2))")
    p.add_argument("--size", type=int, default=None, help="gallery size (default: one full group)")
    p.add_argument("--known", type=int, default=4, help="queries of enrolled people (default: %(default)s)")
    p.add_argument("--unknown", type=int, default=4, help="queries of people not enrolled (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="random seed for picking faces (default: %(default)s)")
    add_strategy_arguments(p, model=False)
    add_memory_budget_argument(p, "server memory (also the model's, for --strategy auto)")


def run(args: argparse.Namespace, out=None) -> int:
    """Run the demo with parsed ``args``; returns the exit code (0 = all answers agree)."""
    out = out or sys.stdout

    def say(line: str = "") -> None:
        """Print one line of demo output, flushed."""
        print(line, file=out, flush=True)

    faces = data_mod.load_faces("lfw", args.model, args.data)
    dim = faces.emb.shape[1]
    params = describe(args.preset, args.kappa, dim)
    v = version()
    say("encmatch demo: encrypted 1:N face search, checked against exact brute force")
    say(f"core {v.get('version', '?')} (lattigo {v.get('lattigo', '?')})")
    say(f"parameters: {describe_params(params)}")
    insecure = warn_if_insecure(params, out)
    size = args.size or int(params["group_size"])
    scenario = data_mod.build_scenario(
        faces, size, n_known=args.known, n_unknown=args.unknown, n_enrolled=args.enrolled, seed=args.seed
    )
    say(f"data: {faces.source} ({len(faces):,} faces, {dim}-d); match threshold delta = {args.delta}")
    say(scenario.describe())
    say(f"similarity strategy: {args.strategy}" + (f", n1 {args.n1}" if args.n1 else "")
        + (f"; server memory budget {args.memory_budget / 1e9:g} GB" if args.memory_budget else ""))
    say(f"work directory: {args.work.resolve()}")
    say()
    report = validate.run(
        scenario.gallery,
        scenario.queries,
        preset=args.preset,
        kappa=args.kappa,
        delta=args.delta,
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
    say()
    say(report.table())
    say()
    say(report.summary())
    total = sum(report.timings.values())
    say("timings: " + ", ".join(f"{k} {t:.2f} s" for k, t in report.timings.items()) + f"; total {total:.1f} s")
    if insecure:
        warn_if_insecure(params, out)
    return 0 if report.ok else 1
