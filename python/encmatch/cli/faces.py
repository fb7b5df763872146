"""The command line's photo side: ``embed``, ``calibrate``, ``accuracy``, and photos for ``enroll``/``query``.

- ``encmatch embed PHOTOS... -o gallery.npz`` embeds photos (files or
  folders; ids from folder or file names) and reports what it skipped.
- ``encmatch enroll`` and ``encmatch query`` take photos as well as
  ``.npy``/``.npz`` embeddings (:func:`enroll_inputs`, :func:`query_inputs`);
  the model is recorded beside the index and embeddings of another model
  are refused.
- ``encmatch calibrate LABELLED`` prints the genuine and impostor score
  distributions and suggests delta (:mod:`encmatch.evaluation.calibrate`).
- ``encmatch accuracy LABELLED`` compares encrypted and plaintext
  identification (:mod:`encmatch.evaluation.accuracy`) and draws the ROC/DET plot.

LABELLED is one labelled ``.npz`` (``emb`` + ``label``/``names`` or
``name``) or photos.

Exit codes of ``embed``, ``calibrate`` and ``accuracy`` (:data:`SKIPPED_POLICY`,
in each ``--help``): a photo that cannot be used (no face, unreadable, not
an image) is listed on stderr, counted in the report and left out; it does
not change the exit code: a complete report is exit 0 (``accuracy``: 1 on
an encrypted decision wrong outside the guard band; ``calibrate``: 1 when
delta fails the target). Exit 2 (bad input) is for arguments that cannot
be used: a named input that does not exist, an output path whose folder
does not exist or cannot be written (both checked before any work), or
inputs of which nothing usable is left.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from .. import data as data_mod
from .._util.extras import require
from .._util.ui import describe_params, warn_if_insecure
from .options import add_kappa_argument, add_preset_argument
from ..params import describe
from ..errors import InvalidArgument, Mismatch
from ..evaluation import accuracy as accuracy_mod, calibrate as calibrate_mod
from ..faces.embed import MULTIPLE, Collected, Problem, collect, embed_photos
from ..faces.images import ID_RULES, is_photo_path
from ..faces.models import DEFAULT_MODEL, MODELS
from ..faces.store import check_dim, check_model, check_output_file, file_model, index_model, record_index_model

__all__ = ["add_photo_arguments", "enroll_inputs", "finish_enroll", "query_inputs", "skipped_exit", "add_commands"]

EXIT_FAILURE = 1
EXIT_USAGE = 2

#: Parameter presets of the core (``encmatch info`` describes them); ``toy`` and ``toy-real`` are INSECURE.

#: What ``embed``, ``calibrate`` and ``accuracy`` do with inputs they cannot use (in their ``--help``).
SKIPPED_POLICY = (
    "Photos that cannot be used (no face, unreadable, not an image) are listed on stderr, counted in the report "
    "and left out; they do not change the exit code. Exit 2 when an argument cannot be used (a named input "
    "that does not exist, an output whose folder does not exist or is not writable: checked before any work; "
    "an embedding file of the wrong dimension or model, or unreadable) or when nothing usable is left."
)


def _log(text: str) -> None:
    """A line on stderr."""
    print(text, file=sys.stderr, flush=True)


def _print(problems: list[Problem], summary: str | None = None) -> None:
    """Print the problems (skipped inputs and notes), then ``summary``, on stderr."""
    for p in problems:
        _log(str(p))
    if summary:
        _log(summary)


def skipped_exit(problems: list[Problem]) -> int:
    """The closing line and exit code of ``enroll`` and ``query`` for the inputs they left out
    (:data:`SKIPPED_POLICY`): photos that cannot be used are a note (exit 0); an embedding file that
    cannot be used (wrong dimension or model, unreadable) is bad input (exit 2)."""
    photos = sum(1 for p in problems if p.skipped and is_photo_path(p.path))
    files = sum(1 for p in problems if p.skipped and not is_photo_path(p.path))
    if files:
        _log(f"error: {files} embedding file(s) could not be used (listed above); the rest was processed")
        return EXIT_USAGE
    if photos:
        _log(f"note: {photos} photo(s) skipped (listed above) and left out; the rest was processed")
    return 0


def _report(problems: list[Problem], summary: str | None = None) -> int:
    """:func:`_print`, then :func:`skipped_exit`'s closing line; its exit code."""
    _print(problems, summary)
    return skipped_exit(problems)


def add_photo_arguments(p: argparse.ArgumentParser, ids: bool = True, index: bool = True) -> None:
    """Add ``--model``, ``--multiple`` and (with ``ids``) ``--ids``: how photos are embedded.

    ``index``: the command works on an index, whose recorded model is the default.
    """
    default = f"the index's, else {DEFAULT_MODEL}" if index else DEFAULT_MODEL
    p.add_argument("--model", choices=tuple(MODELS), default=None, help=f"face model for photos (default: {default})")
    p.add_argument("--multiple", choices=MULTIPLE, default="central",
                   help="photos with several faces: embed the one nearest the centre, or skip them "
                        "(default: %(default)s)")
    if ids:
        p.add_argument("--ids", choices=ID_RULES, default="auto",
                       help="identity of a photo: its folder's name, its file name, or auto (folder for photos "
                            "found in a sub-folder, else the file name) (default: %(default)s)")


def _local_index_model(args: argparse.Namespace) -> str | None:
    """The model of ``--model``, checked against the one recorded beside a local ``--index``."""
    recorded = None
    if not getattr(args, "server", None) and args.index is not None and Path(args.index).is_dir():
        recorded = index_model(args.index)
    if recorded is not None and args.model is not None and recorded != args.model:
        raise Mismatch(f"the index holds {recorded} embeddings: photos embedded with --model {args.model} "
                       "cannot be compared with them")
    return args.model or recorded


def _key_dim(server_keys: Path) -> int | None:
    """The dimension of the key set in ``server_keys`` (its ``keys.json``), or None if unreadable."""
    try:
        return int(json.loads((server_keys / "keys.json").read_text())["dim"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def enroll_inputs(args: argparse.Namespace, server_keys: Path) -> Collected:
    """The vectors and labels ``encmatch enroll`` was given: embedding files and photos, checked.

    Bad inputs are printed and left out; InvalidArgument if nothing is left.
    """
    _check_inputs(args.vectors)
    got = collect(
        args.vectors, dim=_key_dim(server_keys), model=_local_index_model(args), field=args.field,
        labels_from=args.labels_from, ids=args.ids, multiple=args.multiple,
    )
    if got.vectors is None:
        _print(got.problems, got.embedded.summary() if got.embedded is not None else None)
        raise InvalidArgument("nothing to enroll: every input was skipped")
    return got


def finish_enroll(args: argparse.Namespace, got: Collected) -> int:
    """After a local enrollment: record the model beside the index, report the skipped inputs; the exit code."""
    record_index_model(args.index, got.model)
    if got.model is not None:
        print(f"face model: {got.model} (recorded in the index)")
    return _report(got.problems, got.embedded.summary() if got.embedded is not None else None)


def query_inputs(args: argparse.Namespace, read_row) -> Collected:
    """The probes of ``encmatch query``: photos (files, folders: embedded here) and ``.npy``/``.npz``
    vectors (``[dim]`` or ``[n, dim]``), each named (its id or label, else ``FILE[row]``).

    ``--row`` picks one vector of a single embedding file (``read_row``).
    Unusable inputs are listed on stderr and left out; InvalidArgument if
    nothing is left.
    """
    model = _local_index_model(args)
    paths = [Path(q) for q in args.queries]
    _check_inputs(paths)
    if args.row is not None:
        if len(paths) != 1 or is_photo_path(paths[0]) or paths[0].suffix.lower() not in (".npy", ".npz"):
            raise InvalidArgument("--row picks one vector of a single .npy/.npz file")
        check_model(model, file_model(paths[0]), str(paths[0]))
        vec = np.asarray(read_row(paths[0], args.field, args.row))
        return Collected(vec[None, :], [f"{paths[0].name}[{args.row}]"], model or file_model(paths[0]), [])
    got = collect(paths, dim=_key_dim(Path(args.keys) / "server"), model=model, field=args.field,
                  ids=args.ids, multiple=args.multiple)
    _print(got.problems, got.embedded.summary() if got.embedded is not None else None)
    if got.vectors is None:
        raise InvalidArgument("no probe to search: every input was skipped")
    names = [label or origin for label, origin in zip(got.labels or [""] * len(got.origins), got.origins)]
    return Collected(got.vectors, names, got.model, got.problems, got.embedded, got.origins)


# ---- embed, calibrate, accuracy -------------------------------------------------


def _check_inputs(paths) -> None:
    """InvalidArgument naming every input path that does not exist (checked before any work)."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise InvalidArgument(f"no such file or folder: {', '.join(missing)}")


def _note_skipped(problems: list[Problem], summary: str | None = None) -> list[dict]:
    """:func:`_print`, then a closing note when inputs were skipped; returns them (``path``, ``reason``).

    Skipped inputs do not change the exit code (:data:`SKIPPED_POLICY`).
    """
    _print(problems, summary)
    skipped = [{"path": p.path, "reason": p.reason} for p in problems if p.skipped]
    if skipped:
        _log(f"note: {len(skipped)} input(s) skipped (listed above) and left out; the rest was processed")
    return skipped


def cmd_embed(args: argparse.Namespace) -> int:
    """Embed photos into an ``.npz``: exit 0 when anything was written (skipped photos listed and counted),
    2 when nothing was embedded or an argument cannot be used (:data:`SKIPPED_POLICY`)."""
    _check_inputs(args.photos)
    out_path = check_output_file(args.out, "-o")
    out = embed_photos(args.photos, args.model or DEFAULT_MODEL, ids=args.ids, multiple=args.multiple)
    if not len(out):
        _print(out.problems, out.summary())
        raise InvalidArgument("no face was embedded; nothing written")
    path = out.save(out_path)
    _note_skipped(out.problems, out.summary())
    print(f"wrote {len(out):,} embeddings of {len(set(out.ids)):,} identities ({out.model}, {out.emb.shape[1]}-d) "
          f"to {path}" + (f"; {len(out.skipped)} input(s) skipped" if out.skipped else ""))
    return 0


def _labelled(args: argparse.Namespace) -> tuple[data_mod.FaceSet, dict | None]:
    """The labelled set of ``calibrate``/``accuracy``: one ``.npz``, or photos embedded here.

    Returns the set and, for photos, what made it (``photos``, ``embedded``,
    ``skipped``: the inputs left out, already listed on stderr); ``None``
    for an ``.npz``.
    """
    inputs = [Path(p) for p in args.labelled]
    _check_inputs(inputs)
    if len(inputs) == 1 and inputs[0].suffix.lower() == ".npz":
        faces = data_mod.load_faceset_file(inputs[0])
        check_model(args.model, file_model(inputs[0]), str(inputs[0]))
        check_dim(faces.emb.shape[1], args.model or file_model(inputs[0]), str(inputs[0]))
        return faces, None
    bad = [str(p) for p in inputs if p.suffix.lower() in (".npy", ".npz")]
    if bad:
        raise InvalidArgument(f"give one labelled .npz or photos, not {', '.join(bad)} among several inputs")
    out = embed_photos(inputs, args.model or DEFAULT_MODEL, ids=args.ids, multiple=args.multiple)
    if not len(out):
        _print(out.problems, out.summary())
        raise InvalidArgument("no face was embedded")
    skipped = _note_skipped(out.problems, out.summary())
    names, label = np.unique(np.asarray(out.ids), return_inverse=True)
    faces = data_mod.FaceSet(emb=out.emb, label=label, names=names, source=", ".join(args.labelled))
    return faces, {"photos": out.photos, "embedded": len(out), "skipped": skipped}


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Score distributions and a suggested delta; exit 1 when delta fails the target inside the guard band,
    else 0 (skipped photos listed and counted, :data:`SKIPPED_POLICY`)."""
    if args.plot:
        require("plots")
        check_output_file(args.plot, "--plot")
    faces, inputs = _labelled(args)
    dist = calibrate_mod.ScoreDistributions.from_labelled(faces.emb, faces.label)
    cal = calibrate_mod.calibrate(dist, args.target_fmr, target_fpir=args.target_fpir, kappa=args.kappa,
                                  delta=args.delta, gallery_size=args.gallery_size or len(faces))
    if args.json:
        print(json.dumps(dict(cal.to_dict(), inputs=inputs)))
    else:
        print(f"{len(faces):,} faces of {len(np.unique(faces.label)):,} identities ({faces.source})")
        if inputs is not None:
            print(accuracy_mod.inputs_line(inputs))
        print(cal.report())
    if args.plot:
        print(f"plot: {calibrate_mod.plot_distributions(cal, args.plot)}")
    return 0 if cal.ok else EXIT_FAILURE


def cmd_accuracy(args: argparse.Namespace) -> int:
    """Encrypted vs plaintext identification on a labelled set; exit 1 on a decision wrong outside the band,
    else 0 (skipped photos listed and counted in the report, :data:`SKIPPED_POLICY`)."""
    if args.plot:
        require("plots")
        check_output_file(args.plot, "--plot")
    if args.work is not None and not Path(args.work).is_dir() and not Path(args.work).parent.is_dir():
        raise InvalidArgument(f"--work {args.work}: the folder {Path(args.work).parent} does not exist")
    faces, inputs = _labelled(args)
    params = describe(args.preset, args.kappa, int(faces.emb.shape[1]))
    warn_if_insecure(params)
    sp = accuracy_mod.split(faces, probes=args.probes, max_gallery=args.max_gallery, seed=args.seed)
    _log(f"parameters: {describe_params(params)}")
    _log(sp.describe())
    report = accuracy_mod.run(sp, preset=args.preset, kappa=args.kappa, delta=args.delta,
                              target_fpir=args.target_fpir, work_dir=args.work,
                              log=None if args.json else _log, progress=not args.json)
    report.inputs = inputs
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(report.table())
        print(report.summary())
    if args.plot:
        print(f"plot: {accuracy_mod.plot(report, args.plot)}")
    warn_if_insecure(params)
    return 0 if report.ok else EXIT_FAILURE


def _rate(text: str) -> float:
    """argparse type: a rate in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"want a rate in (0, 1), got {text!r}")
    return value


def add_commands(sub) -> None:
    """Add the ``embed``, ``calibrate`` and ``accuracy`` subcommands to the CLI's subparsers."""
    s = sub.add_parser("embed", help="detect, align and embed the faces of photos into an .npz",
                       description="Detect, align and embed the faces of photos into an .npz. Exit 0 when the "
                                   "file was written. " + SKIPPED_POLICY)
    s.add_argument("photos", nargs="+", type=Path, metavar="PHOTO",
                   help="photo files or folders (searched recursively; people/alice/1.jpg -> alice)")
    s.add_argument("-o", "--out", type=Path, required=True,
                   help="the .npz to write (required; its folder must exist)")
    add_photo_arguments(s, index=False)
    s.set_defaults(func=cmd_embed)

    for name, text, exits in (
        ("calibrate", "genuine/impostor score distributions and a suggested delta",
         "Exit 0 when delta meets the target, 1 when it fails it inside the guard band. "),
        ("accuracy", "encrypted vs plaintext identification: TP/FP/TN/FN, EER, TAR@FAR, ROC/DET",
         "Exit 0 when every encrypted decision equals the plaintext one outside the comparator's decision band, "
         "1 when one does not. "),
    ):
        s = sub.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}. {exits}{SKIPPED_POLICY}")
        s.add_argument("labelled", nargs="+", metavar="LABELLED",
                       help="one labelled .npz (emb + label/names or name), or photos (files, folders)")
        add_photo_arguments(s, index=False)
        add_kappa_argument(s)
        s.add_argument("--json", action="store_true", help="print the result as JSON (default: text)")
        s.add_argument("--plot", type=Path, default=None, metavar="PNG",
                       help="write a plot to this PNG (default: none; its folder must exist)")
        if name == "calibrate":
            target = s.add_mutually_exclusive_group()
            target.add_argument("--target-fpir", type=_rate, default=None,
                                help="1:N target: false positive identification rate at the gallery size (default: "
                                     f"{calibrate_mod.DEFAULT_TARGET_FPIR:g} unless --target-fmr is given)")
            target.add_argument("--target-fmr", type=_rate, default=None,
                                help="1:1 target instead: false-match rate per comparison (default: none)")
            s.add_argument("--delta", type=float, default=None,
                           help="check this delta instead of suggesting one (default: suggest one)")
            s.add_argument("--gallery-size", type=int, default=None, metavar="N",
                           help="gallery entries per search, for FPIR and the expected false matches (default: the "
                                "number of faces given)")
            s.set_defaults(func=cmd_calibrate)
        else:
            add_preset_argument(s)
            s.add_argument("--delta", type=float, default=None,
                           help="operating threshold (default: the --target-fpir point's, else the plaintext "
                                "threshold at FAR 0.1 %%)")
            s.add_argument("--target-fpir", type=_rate, default=accuracy_mod.DEFAULT_TARGET_FPIR,
                           help="1:N point: FPIR at the gallery size, on the non-mated probes (default: %(default)g;"
                                " needs 3/FPIR of them)")
            s.add_argument("--probes", type=int, default=200, help="probes, half mated (default: %(default)s)")
            s.add_argument("--max-gallery", type=int, default=None,
                           help="at most this many enrolled identities (default: half of those with two faces or more)")
            s.add_argument("--seed", type=int, default=0, help="split seed (default: %(default)s)")
            s.add_argument("--work", type=Path, default=None, help="work directory for keys and indexes "
                                                                    "(default: a temporary one)")
            s.set_defaults(func=cmd_accuracy)
