"""The ``encmatch iris ...`` commands: synthetic data, the plaintext model, calibration, conversion.

- ``encmatch iris generate OUT_DIR --gallery N --queries Q --enrolled K``
  writes ``OUT_DIR/gallery.npz`` and ``OUT_DIR/queries.npz`` (queries
  carry their ground truth: ``K`` are captures of gallery eyes, the rest
  of eyes not in the gallery).
- ``encmatch iris model GALLERY... --queries QUERIES... --t 0.34``: the
  plaintext model (one bit per eye over 31 rotations), min FHD, best entry
  and guard-band eyes, as JSON; with ground truth also TP/FP/TN/FN.
- the encrypted matching, one command per role (``docs/IRIS.md``):
  ``iris keygen --keys K``, ``iris enroll --keys K --db D --t 0.34 GALLERY...``
  (key holder), ``iris query --keys K QUERIES... -o Q`` (querier),
  ``iris match --keys K --db D Q -o R`` (server), ``iris decrypt --keys K R
  [--validate --gallery ... --queries ...]`` (key holder).
- ``encmatch iris calibrate GALLERY... --queries QUERIES...``: impostor/genuine statistics,
  degrees of freedom and FMR/FNMR per threshold, as JSON.
- ``encmatch iris convert INPUT... -o OUT`` between open-iris ``.json``
  and the project's ``.npz``.
- ``encmatch iris fold --t 0.34 [--sums N] [GALLERY... --queries ...]``:
  the fold polynomial of papers/004's Algorithm 2, checked (:mod:`encmatch.cli.iris_fold`).

Template inputs are ``.npz`` files of this project or open-iris ``.json``
files (:mod:`encmatch.iris.openiris`).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument, NotFound
from ..iris.calibration import measure
from ..iris.encoding import DEFAULT_ROTATION_SHIFT
from ..iris.generator import POPULATIONS, IrisGenerator, generate
from ..iris.model import DEFAULT_CHUNK, Normalisation, confusion, match
from ..iris.openiris import read_templates, save_templates, write_openiris
from . import iris_encrypted as encrypted_commands
from . import iris_fold as fold_commands
from . import iris_setup as setup_commands
from ._iris_util import emit as _emit, log as _log, threshold as _threshold

__all__ = ["add_commands"]


def cmd_generate(args: argparse.Namespace) -> int:
    """``iris generate``: a synthetic gallery and query batch with ground truth."""
    if not args.out_dir.is_dir():
        raise NotFound(f"{args.out_dir}: no such folder")
    gen = dataclasses.replace(POPULATIONS[args.population], genuine_fhd=args.genuine_fhd, max_offset=args.max_offset)
    t0 = time.perf_counter()
    gallery, queries = generate(args.gallery, args.queries, args.enrolled, seed=args.seed, generator=gen)
    save_templates(args.out_dir / "gallery.npz", gallery)
    save_templates(args.out_dir / "queries.npz", queries)
    _log(f"{len(gallery)} gallery templates and {len(queries)} query eyes ({args.enrolled} enrolled), "
         f"population {args.population}, "
         f"in {time.perf_counter() - t0:.1f} s -> {args.out_dir}/gallery.npz, queries.npz")
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    """``iris model``: the plaintext model's bit per eye, min FHD and guard band, as JSON."""
    gallery = read_templates(args.gallery)
    queries = read_templates(args.queries)
    t0 = time.perf_counter()
    normalise = Normalisation() if args.normalise else None
    res = match(queries, gallery, args.t, rotation_shift=args.rotation_shift, chunk=args.chunk, normalise=normalise)
    out = res.to_dict(queries.ids.tolist(), band=args.band)
    out["seconds"] = time.perf_counter() - t0
    if queries.truth is not None:
        out["confusion"] = confusion(res, queries.truth)
    _emit(out, args.out)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``iris calibrate``: distance statistics and FMR/FNMR of queries with ground truth against a gallery."""
    queries = read_templates(args.queries)
    gallery = read_templates(args.gallery)
    _emit(measure(queries, gallery, tuple(args.t), rotation_shift=args.rotation_shift), args.out)
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    """``iris convert``: templates between open-iris ``.json`` and the project's ``.npz``."""
    templates = read_templates(args.inputs)
    suffix = args.out.suffix.lower()
    if suffix == ".npz":
        save_templates(args.out, templates)
    elif suffix == ".json":
        write_openiris(args.out, templates)
    else:
        raise InvalidArgument(f"{args.out}: the output must end in .npz or .json")
    _log(f"{len(templates)} templates -> {args.out}")
    return 0


def _add_generate(sub: Any) -> None:
    """The ``iris generate`` parser."""
    s = sub.add_parser("generate", help="write a synthetic gallery and query batch with ground truth")
    s.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="existing folder for gallery.npz and queries.npz")
    s.add_argument("--gallery", type=int, default=16384, help="gallery eyes (default: %(default)s)")
    s.add_argument("--queries", type=int, default=32, help="query eyes (default: %(default)s)")
    s.add_argument("--enrolled", type=int, default=16, help="query eyes that are in the gallery (default: %(default)s)")
    s.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    s.add_argument("--population", choices=tuple(POPULATIONS), default="daugman",
                   help="code statistics: ~250 degrees of freedom (daugman) or ~850 like papers/004's "
                        "open-iris templates (papers004) (default: %(default)s)")
    s.add_argument("--genuine-fhd", type=float, default=IrisGenerator.genuine_fhd,
                   help="mean FHD of a capture to its enrolled template (default: %(default)s)")
    s.add_argument("--max-offset", type=int, default=IrisGenerator.max_offset,
                   help="largest rotation of a capture, in columns (default: %(default)s)")
    s.set_defaults(func=cmd_generate)


def _add_matching(sub: Any) -> None:
    """The ``iris model`` and ``iris calibrate`` parsers."""
    s = sub.add_parser("model", help="plaintext model: one bit per query eye over rotations, min FHD, guard band")
    s.add_argument("gallery", nargs="+", type=Path, metavar="GALLERY", help="gallery .npz or open-iris .json files")
    s.add_argument("--queries", nargs="+", type=Path, required=True, metavar="QUERIES",
                   help="query .npz or open-iris .json files")
    s.add_argument("--t", type=_threshold, default=0.34, help="fractional Hamming threshold (default: %(default)s)")
    s.add_argument("--band", type=float, default=0.005,
                   help="guard band on the margin (<c'1,c'2> - (1-2t)|m1 and m2|)/l (default: %(default)s)")
    s.add_argument("--chunk", type=int, default=DEFAULT_CHUNK, help="gallery templates per product (default: %(default)s)")
    s.add_argument("--normalise", action="store_true",
                   help="decide on open-iris's normalised distance (norm_mean 0.45, norm_gradient 0.00005) instead "
                        "of the plain FHD; reported distances stay FHD")
    s.add_argument("--rotation-shift", type=int, default=DEFAULT_ROTATION_SHIFT,
                   help="shifts -s..s columns, 2s+1 rotations (default: %(default)s)")
    s.add_argument("-o", "--out", type=Path, default=None, help="write the JSON here instead of stdout")
    s.set_defaults(func=cmd_model)

    s = sub.add_parser("calibrate", help="impostor/genuine FHD, degrees of freedom, FMR/FNMR per threshold")
    s.add_argument("gallery", nargs="+", type=Path, metavar="GALLERY", help="gallery .npz or open-iris .json files")
    s.add_argument("--queries", nargs="+", type=Path, required=True, metavar="QUERIES",
                   help="query .npz with ground truth (from iris generate)")
    s.add_argument("--t", type=_threshold, nargs="+", default=[0.34, 0.375],
                   help="thresholds (default: %(default)s)")
    s.add_argument("--rotation-shift", type=int, default=DEFAULT_ROTATION_SHIFT,
                   help="shifts -s..s columns (default: %(default)s)")
    s.add_argument("-o", "--out", type=Path, default=None, help="write the JSON here instead of stdout")
    s.set_defaults(func=cmd_calibrate)


def add_commands(sub: Any) -> None:
    """Add the ``iris`` command group to the CLI's subparsers."""
    group = sub.add_parser("iris", help="iris: synthetic data, plaintext model, open-iris files, encrypted matching by role")
    isub = group.add_subparsers(dest="iris_command", required=True, metavar="IRIS_COMMAND",
                                parser_class=type(group))
    _add_generate(isub)
    _add_matching(isub)
    s = isub.add_parser("convert", help="convert templates between open-iris .json and .npz")
    s.add_argument("inputs", nargs="+", type=Path, metavar="INPUT", help=".npz or open-iris .json files")
    s.add_argument("-o", "--out", type=Path, required=True, help="output .npz or .json")
    s.set_defaults(func=cmd_convert)
    fold_commands.add_commands(isub)
    encrypted_commands.add_commands(isub)
    setup_commands.add_commands(isub)
