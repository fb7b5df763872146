"""The evaluation commands: ``validate``, ``demo``, ``bench``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import data as data_mod
from .._util.extras import require
from .._util.ui import describe_params, warn_if_insecure
from ..evaluation import bench as bench_mod, bench_report, demo as demo_mod, validate as validate_mod
from ..faces.models import DEFAULT_MODEL, MODELS
from ..params import STRATEGIES, describe
from .exits import EXIT_FAILURE
from .options import add_kappa_argument, add_memory_budget_argument, add_preset_argument, add_strategy_arguments


def cmd_validate(args: argparse.Namespace) -> int:
    """Encrypted search vs brute force on a labelled gallery; exit 1 on a disagreement outside the band."""
    faces = data_mod.load_faceset_file(args.gallery) if args.gallery else data_mod.load_faces("lfw", "mfn")
    dim = faces.emb.shape[1]
    params = describe(args.preset, args.kappa, dim)
    warn_if_insecure(params)
    size = args.size or int(params["group_size"])
    n_known = (args.queries + 1) // 2
    scenario = data_mod.build_scenario(
        faces, size, n_known=n_known, n_unknown=args.queries - n_known, n_enrolled=args.enrolled, seed=args.seed
    )
    log = None if args.quiet or args.json else (lambda s: print(s, file=sys.stderr, flush=True))
    if log:
        log(f"parameters: {describe_params(params)}")
        log(scenario.describe())
    report = validate_mod.run(
        scenario.gallery, scenario.queries, preset=args.preset, kappa=args.kappa, delta=args.delta,
        work_dir=args.work, gallery_labels=scenario.gallery_labels, query_names=scenario.query_names,
        query_enrolled=scenario.query_enrolled, log=log,
        strategy=args.strategy, n1=args.n1, memory_budget=args.memory_budget,
    )
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(report.table())
        print(report.summary())
    warn_if_insecure(params)
    return 0 if report.ok else EXIT_FAILURE


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the end-to-end demo."""
    return demo_mod.run(args)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark and write results.json/csv/md and plots to ``--out``; exit 1 if a trial failed."""
    params = describe(args.preset, args.kappa, bench_mod.FACES_DIM if args.workload == "faces" else args.dim)
    warn_if_insecure(params)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    require("plots")  # its plots, before any work
    bench_report.check_out_dir(args.out)
    log(f"parameters: {describe_params(params)}")
    doc = bench_mod.run(
        args.sizes, args.strategies, encryptions=args.encryption, layouts=args.layouts, matches=args.matches, n1=args.n1,
        trials=args.trials, preset=args.preset, kappa=args.kappa, dim=args.dim, workload=args.workload,
        memory_budget=args.memory_budget, work_dir=args.work, seed=args.seed, log=log,
    )
    paths = bench_report.write_outputs(doc, args.out)
    print(bench_report.markdown_table(doc))
    print(f"results: {', '.join(str(p) for p in paths.values())}")
    failed = sum(rec["failed"] for rec in doc["configs"])
    if failed:
        print(f"error: {failed} trial(s) failed the correctness check", file=sys.stderr)
    warn_if_insecure(params)
    return EXIT_FAILURE if failed else 0


def _int_list(text: str) -> list[int]:
    """argparse type: comma-separated positive integers."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"want positive integers, got {text!r}")
    return values


def _name_list(what: str, allowed: Sequence[str]) -> Callable[[str], list[str]]:
    """An argparse type: comma-separated names, each one of ``allowed`` (``what`` names them in errors)."""

    def parse(text: str) -> list[str]:
        names = [x.strip() for x in text.split(",") if x.strip()]
        bad = [n for n in names if n not in allowed]
        if not names or bad:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(bad) or text!r} (want {', '.join(allowed)})")
        return names

    return parse


#: argparse types of the bench's sweeps: strategies (not ``auto``), enrollment encryptions, slot layouts.
_strategy_list = _name_list("strategy", tuple(s for s in STRATEGIES if s != "auto"))
_encryption_list = _name_list("encryption", bench_mod.ENCRYPTIONS)
_layout_list = _name_list("layout", bench_mod.LAYOUTS)


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    """Add the demo's options to ``p``."""
    add_preset_argument(p)
    add_kappa_argument(p)
    p.add_argument("--delta", type=float, default=None,
                   help="match threshold, cosine (default: calibrated for --target-fpir at the gallery size)")
    p.add_argument("--target-fpir", type=float, default=demo_mod.DEFAULT_TARGET_FPIR,
                   help="1:N target for the calibrated delta: fraction of unknown people answered enrolled at the "
                        "demo's gallery size (default: %(default)g)")
    p.add_argument("--work", type=Path, default=Path("demo-work"), help="work directory (default: ./%(default)s)")
    p.add_argument("--data", type=Path, default=None,
                   help="face data directory holding lfw/ (default: $ENCMATCH_DATA or shared/data next to the repo)")
    p.add_argument("--model", default=DEFAULT_MODEL, choices=tuple(MODELS),
                   help="face model of the LFW embeddings (default: %(default)s)")
    p.add_argument("--enrolled", type=int, default=None, help="enrolled identities (default: min(3000, group/2))")
    p.add_argument("--size", type=int, default=None, help="gallery size (default: one full group)")
    p.add_argument("--known", type=int, default=4, help="queries of enrolled people (default: %(default)s)")
    p.add_argument("--unknown", type=int, default=4, help="queries of people not enrolled (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="random seed for picking faces (default: %(default)s)")
    add_strategy_arguments(p, model=False)
    add_memory_budget_argument(p, "server memory (also the model's, for --strategy auto)")


def add_commands(sub: Any) -> None:
    """Add the evaluation commands to the subcommands ``sub``."""
    s = sub.add_parser("validate", help="encrypted search vs brute force; exit 1 on disagreement")
    add_preset_argument(s)
    add_kappa_argument(s)
    s.add_argument("--delta", type=float, default=demo_mod.DEFAULT_DELTA,
                   help="match threshold, cosine (default: %(default)s)")
    s.add_argument("--gallery", type=Path, default=None,
                   help="labelled embeddings .npz (emb + label/names; default: LFW MobileFaceNet from shared/data)")
    s.add_argument("--queries", type=int, default=8, help="queries, half of enrolled people (default: %(default)s)")
    s.add_argument("--size", type=int, default=None, help="gallery size (default: one full group)")
    s.add_argument("--enrolled", type=int, default=None, help="enrolled identities (default: min(3000, size/2))")
    s.add_argument("--seed", type=int, default=0, help="random seed for picking the faces (default: %(default)s)")
    s.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--quiet", action="store_true", help="no step-by-step progress")
    add_strategy_arguments(s, model=False)
    add_memory_budget_argument(s, "server memory (also the model's, for --strategy auto)")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("demo", help="end-to-end demo on LFW faces")
    add_demo_arguments(s)
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("bench", help="benchmark per gallery size and strategy, beside papers/000 Tables 6-8")
    s.add_argument("--sizes", type=_int_list, default=[1024, 16384], metavar="K,K",
                   help="gallery sizes (default: 1024,16384)")
    s.add_argument("--matches", type=int, default=1, metavar="KM", help="planted matches Km (default: %(default)s)")
    s.add_argument("--strategies", type=_strategy_list, default=["bsgs-tbe", "dg"], metavar="S,S",
                   help="similarity strategies (default: bsgs-tbe,dg)")
    s.add_argument("--n1", type=int, default=0, help="baby-step size of the bsgs strategies (default: 0 = automatic)")
    s.add_argument("--encryption", type=_encryption_list, default=["public-key"], metavar="E,E",
                   help="gallery enrollment: public-key (any enroller, as papers/000), secret-key (the key owner, "
                        "seeded: half the bytes), or both comma-separated (default: public-key)")
    s.add_argument("--layouts", type=_layout_list, default=None, metavar="L,L",
                   help="slot layouts: plain, folded (each vector's halves in complex slots, half the diagonals), "
                        "or both comma-separated (default: the new key sets' layout, folded where the preset can)")
    s.add_argument("--trials", type=int, default=11,
                   help="trials per configuration; trial 1 is the setup (default: %(default)s)")
    add_preset_argument(s)
    add_kappa_argument(s)
    s.add_argument("--dim", type=int, default=512, help="vector dimension of the synthetic workload (default: %(default)s)")
    s.add_argument("--workload", choices=bench_mod.WORKLOADS, default="synthetic",
                   help="synthetic (papers/000 6.1) or faces (LFW MobileFaceNet, 192-d) (default: %(default)s)")
    s.add_argument("--seed", type=int, default=0, help="workload seed (default: %(default)s)")
    s.add_argument("--out", type=Path, default=Path("bench-results"), help="output directory (default: %(default)s)")
    s.add_argument("--work", type=Path, default=None, help="where keys and indexes are written (default: the temp dir)")
    add_memory_budget_argument(s, "server memory; an index that does not fit is streamed from disk")
    s.set_defaults(func=cmd_bench)

