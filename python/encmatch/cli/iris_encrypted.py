"""The ``encmatch iris`` commands of the encrypted matching, one per role (``docs/IRIS.md``).

::

    encmatch iris keygen  --keys K [--preset default|default-dense|fold|toy|toy-fold] [--kappa N]  # key holder
    encmatch iris enroll  --keys K --db D --t 0.34 [--design F.json] GALLERY...   # key holder or enroller
    encmatch iris query   --keys K QUERIES... -o Q.bin [--rotation-shift 15]      # querier
    encmatch iris match   --keys K --db D Q.bin -o R.bin [--pair-eyes 3,7] [--product P.bin]  # server
    encmatch iris decrypt --keys K R.bin [--pad-to N] [--pairs R2.bin] [--validate --gallery G... --queries Q...]  # key holder
    encmatch iris bench   [--preset ...] [--gallery 16384]                        # all of it, timed

``--keys`` is a key set's root or the role's own directory. ``decrypt
--validate`` compares every eye outside the comparator's guard band with the
plaintext model and exits 1 on a disagreement. With a folding preset
(``fold``, ``toy-fold``: papers/004's second algorithm) ``decrypt`` reads
each eye as a match, no match or flagged, and names the flagged eyes; the
server's ``match --pair-eyes`` runs the pair pass on them, and ``decrypt
R.bin --pairs R2.bin`` combines the two (``decrypt --pad-to N`` lists
``pair_eyes``: the flagged eyes padded with random unflagged ones, so that
the server does not learn which were flagged). ``match --product P.bin`` on both
passes keeps the encrypted product between them (the server's own file):
the pair pass then reads it instead of the whole database.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from ..iris import encrypted as E
from ..iris.encoding import DEFAULT_ROTATION_SHIFT
from ..iris.model import match as model_match
from ..iris.openiris import read_templates
from ._iris_util import emit as _emit, log as _log, threshold as _threshold

__all__ = ["add_commands"]

#: Exit code of a disagreement with the plaintext model.
EXIT_DISAGREE = 1






def _fresh_output(path: Path) -> None:
    """Refuse an output path whose folder is missing, before any work."""
    if not path.parent.is_dir():
        raise InvalidArgument(f"{path}: the folder {path.parent} does not exist")


def cmd_keygen(args: argparse.Namespace) -> int:
    """``iris keygen``: a key set with the key holder's, the querier's and the server's directories."""
    if args.preset.startswith("toy"):
        _log(f"warning: preset {args.preset} is INSECURE (small rings), for tests only")
    _log(f"generating an iris key set ({args.preset}) in {args.keys} ...")
    res = E.keygen(args.keys, args.preset, args.kappa)
    meta = res["meta"]
    _log(f"key set {meta['key_id']} ({meta['preset']}, comparator depth {meta['kappa']}) in {res['seconds']:.1f} s: "
         f"give {args.keys}/querier to queriers and {args.keys}/server to the server; {args.keys}/holder stays here")
    return 0


def cmd_enroll(args: argparse.Namespace) -> int:
    """``iris enroll``: encrypt a gallery into a new database directory."""
    design = None
    if args.design is not None:
        try:
            design = json.loads(args.design.read_text())
        except (OSError, ValueError) as e:
            raise InvalidArgument(f"{args.design}: not a fold design: {e}") from None
    gallery = read_templates(args.gallery)
    if _is_enroller(args.keys):  # a threshold key set: public material only, no key holder
        if design is not None:
            raise InvalidArgument("a threshold key set's database takes no fold design")
        _log(f"encrypting {len(gallery)} templates into {args.db} (t = {args.t}) with the enroller's public keys ...")
        res = E.Enroller(args.keys).enroll(gallery, args.db, args.t)
        meta = res["meta"]
        _log(f"{meta['codes']} codes in {meta['blocks']} blocks in {res['seconds']:.1f} s; pending: each party runs "
             f"`encmatch iris contribute`, then `encmatch iris complete` with their files")
        return 0
    _log(f"encrypting {len(gallery)} templates into {args.db} (t = {args.t}) ...")
    res = E.Client(args.keys).enroll(gallery, args.db, args.t, design=design)
    meta = res["meta"]
    _log(f"{meta['codes']} codes in {meta['blocks']} blocks in {res['seconds']:.1f} s")
    return 0


def _is_enroller(keys: Path) -> bool:
    """Whether ``keys`` is (or holds) a threshold key set's enroller directory, and no key holder's."""
    def role(d: Path) -> str | None:
        try:
            return json.loads((d / "iris.json").read_text()).get("role")
        except (OSError, ValueError):
            return None
    return role(keys) == "enroller" or (role(keys / "holder") is None and role(keys / "enroller") == "enroller")


def cmd_query(args: argparse.Namespace) -> int:
    """``iris query``: encrypt query eyes at every rotation under the public key."""
    _fresh_output(args.out)
    queries = read_templates(args.queries)
    res = E.Querier(args.keys).encrypt(queries, args.out, args.rotation_shift)
    _log(f"{len(queries)} eyes x {2 * args.rotation_shift + 1} rotations encrypted in {res['seconds']:.1f} s -> {args.out}")
    return 0


def cmd_match(args: argparse.Namespace) -> int:
    """``iris match``: the server's encrypted matching; prints its stage timings as JSON."""
    _fresh_output(args.out)
    _log(f"matching {args.query} against {args.db} ...")
    t0 = time.perf_counter()
    res = E.Server(args.keys).search(args.db, args.query, args.out, key_cache_gb=args.key_cache_gb,
                                     pair_eyes=args.pair_eyes, product=args.product)
    kc = res["key_cache"]
    _log(f"{res['eyes']} eyes against {res['codes']} codes in {time.perf_counter() - t0:.1f} s -> {args.out} "
         f"(Galois keys: {kc['loads']} reads in {kc['load_seconds']:.1f} s, at most {kc['peak_bytes'] / 2**30:.1f} GiB held)")
    _emit(res, args.stats)
    return 0


def cmd_decrypt(args: argparse.Namespace) -> int:
    """``iris decrypt``: one value per eye; with ``--validate``, against the plaintext model."""
    holder = E.Client(args.keys)
    t = None
    if args.validate:  # arguments checked before any work
        if not args.gallery or not args.queries:
            raise InvalidArgument("--validate needs the plaintext --gallery and --queries")
        t = args.t
        if t is None and args.db:
            t = json.loads((args.db / "db.json").read_text())["t"]
        if t is None:
            raise InvalidArgument("--validate needs the threshold: --t, or --db (its db.json)")
    values = holder.decrypt(args.result)
    if isinstance(values, E.FoldValues):
        return _decrypt_fold(args, holder, values, t)
    if args.pairs is not None:
        raise InvalidArgument("--pairs is for a folding key set's fold pass")
    bits, uncertain = E.decide(values)
    if len(uncertain):
        _log(f"warning: eyes {uncertain.tolist()} decrypted to values away from 0 and 1: their best pair lies "
             "within the comparator's guard band of the threshold, so their bits are not decided (docs/IRIS.md)")
    if not args.validate:
        _emit({"values": [round(float(v), 6) for v in values], "bits": bits.tolist(), "uncertain": uncertain.tolist()})
        return 0
    gallery, queries = read_templates(args.gallery), read_templates(args.queries)
    model = model_match(queries, gallery, t, rotation_shift=args.rotation_shift)
    band = args.band if args.band is not None else holder.band(t)
    v = E.validate(values, model, band)
    _emit(v.to_dict())
    if not v.ok:
        outside = [e for e in v.uncertain if not v.guard[e]]
        _log(f"DISAGREEMENT: eyes {v.disagreements} differ from the plaintext model, and eyes {outside} are undecided, "
             f"outside the band {band:.4f}")
        return EXIT_DISAGREE
    _log(f"every eye outside the guard band agrees with the plaintext model ({len(values)} eyes, "
         f"{int(v.guard.sum())} in the band)")
    return 0


def _decrypt_fold(args: argparse.Namespace, holder: E.Client, fold: E.FoldValues, t: float | None) -> int:
    """``iris decrypt`` of a folding result: answers, the flagged eyes, and with ``--pairs`` every eye's bit."""
    if fold.pairs:
        raise InvalidArgument(f"{args.result} is a pair pass's result: give the fold pass's, with --pairs {args.result}")
    pairs = holder.decrypt(args.pairs) if args.pairs is not None else None
    if pairs is not None and not isinstance(pairs, E.FoldValues):
        raise InvalidArgument(f"{args.pairs} is not a folding result")
    bits, undecided = E.combine(fold, pairs)
    answers = fold.answers()
    names = {E.MATCH: "match", E.NO_MATCH: "no match", E.FLAGGED: "flagged"}
    out = {"answers": [names[int(a)] for a in answers], "flagged": fold.flagged(), "bits": bits.tolist(),
           "undecided": undecided.tolist()}
    if pairs is None:
        out["pair_eyes"] = fold.pair_eyes(min(args.pad_to, fold.eyes))
    if pairs is None and out["pair_eyes"]:
        _log(f"eyes {fold.flagged()} are flagged (the fold cannot call them cleanly): run "
             f"iris match --pair-eyes {','.join(map(str, out['pair_eyes']))}, then decrypt with --pairs"
             + (f" (padded to {len(out['pair_eyes'])} eyes with unflagged ones: the server sees the list)" if args.pad_to else ""))
    elif len(undecided):
        _log(f"warning: eyes {undecided.tolist()} have a pair bit inside the comparator's guard band: not decided")
    if not args.validate:
        _emit(out)
        return 0
    gallery, queries = read_templates(args.gallery), read_templates(args.queries)
    model = model_match(queries, gallery, t, rotation_shift=args.rotation_shift)
    band = args.band if args.band is not None else holder.band(t)
    v = E.validate_fold(fold, pairs, model, E.FOLD_GUARD, band)
    _emit({**out, "validation": v.to_dict()})
    if not v.ok:
        _log(f"DISAGREEMENT: eyes {v.disagreements} differ from the plaintext model outside the guard band")
        return EXIT_DISAGREE
    _log(f"every answered eye outside the guard band agrees with the plaintext model ({len(bits)} eyes, "
         f"{len(fold.flagged())} flagged, {len(undecided)} undecided)")
    return 0


def _eye_list(text: str) -> list[int]:
    """An argparse type: comma-separated eye indices."""
    try:
        eyes = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        eyes = []
    if not eyes or min(eyes) < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of eye indices such as 3,7")
    return eyes


def cmd_bench(args: argparse.Namespace) -> int:
    """``iris bench``: every role step by step on generated data; exit 1 if an eye disagrees with the model."""
    import tempfile

    from ..evaluation.iris_bench import run

    if args.preset.startswith("toy"):
        _log(f"warning: preset {args.preset} is INSECURE (small rings): its timings are not comparable with papers/004")
    if args.work is not None:
        Path(args.work).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        res = run(args.out, Path(work), args.preset, args.gallery, args.eyes, args.enrolled, args.t,
                  population=args.population, seed=args.seed, kappa=args.kappa,
                  rotation_shift=args.rotation_shift, key_cache_gb=args.key_cache_gb, log=_log)
    print((args.out / "results.md").read_text())
    return 0 if res["validation"]["ok"] else EXIT_DISAGREE


def _count(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    try:
        v = int(text)
    except ValueError:
        v = -1
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return v


def _positive(text: str) -> float:
    """An argparse type: a positive number."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return v


def add_commands(sub: Any) -> None:
    """Add keygen, enroll, query, match and decrypt to the ``iris`` subparsers."""
    keys_help = "the key set's root or this role's directory"
    s = sub.add_parser("keygen", help="encrypted matching: make a key set (key holder)")
    s.add_argument("--keys", type=Path, required=True, help="new key set directory")
    s.add_argument("--preset", choices=E.PRESETS, default="default",
                   help="parameters: default (128-bit; its bootstrap's ephemeral sparse secret is outside the HE "
                        "standard's table, docs/PARAMETERS.md), default-dense (128-bit, every key inside the table, "
                        "slower), fold (128-bit, papers/004's second algorithm), toy or toy-fold (INSECURE, tests) "
                        "(default: %(default)s)")
    s.add_argument("--kappa", type=int, default=None, help="comparator depth (default: the preset's)")
    s.set_defaults(func=cmd_keygen)

    s = sub.add_parser("enroll", help="encrypted matching: encrypt a gallery into a database (key holder, or a "
                                      "threshold key set's enroller: the database is then pending)")
    s.add_argument("gallery", nargs="+", type=Path, metavar="GALLERY", help="gallery .npz or open-iris .json files")
    s.add_argument("--keys", type=Path, required=True, help=keys_help)
    s.add_argument("--db", type=Path, required=True, help="new database directory")
    s.add_argument("--t", type=_threshold, required=True, help="match iff the fractional Hamming distance is below t")
    s.add_argument("--design", type=Path, default=None,
                   help="folding presets: the fold design for t (iris fold -o; default: computed for t)")
    s.set_defaults(func=cmd_enroll)

    s = sub.add_parser("query", help="encrypted matching: encrypt query eyes (querier)")
    s.add_argument("queries", nargs="+", type=Path, metavar="QUERIES", help="query .npz or open-iris .json files")
    s.add_argument("--keys", type=Path, required=True, help=keys_help)
    s.add_argument("-o", "--out", type=Path, required=True, help="encrypted query file")
    s.add_argument("--rotation-shift", type=int, default=DEFAULT_ROTATION_SHIFT,
                   help="shifts -s..s columns, 2s+1 rotations (default: %(default)s)")
    s.set_defaults(func=cmd_query)

    s = sub.add_parser("match", help="encrypted matching: one encrypted bit per query eye (server)")
    s.add_argument("query", type=Path, metavar="QUERY", help="encrypted query file")
    s.add_argument("--keys", type=Path, required=True, help=keys_help)
    s.add_argument("--db", type=Path, required=True, help="encrypted database directory")
    s.add_argument("-o", "--out", type=Path, required=True, help="encrypted result file")
    s.add_argument("--stats", type=Path, default=None, help="write the timings JSON here instead of stdout")
    s.add_argument("--key-cache-gb", type=_positive, default=E.DEFAULT_KEY_CACHE_GB,
                   help="GiB of Galois keys kept in memory; the others are read from disk when needed (default: %(default)s)")
    s.add_argument("--pair-eyes", type=_eye_list, default=None,
                   help="folding database: the pair pass on these eyes (the flagged ones, e.g. 3,7; the server sees them)")
    s.add_argument("--product", type=Path, default=None,
                   help="folding database: keep the encrypted product in this file (fold pass) and read it (pair pass, "
                        "which then does not read the database; a product of another query or database is refused)")
    s.set_defaults(func=cmd_match)

    s = sub.add_parser("decrypt", help="encrypted matching: decrypt a result (key holder)")
    s.add_argument("result", type=Path, metavar="RESULT", help="encrypted result file")
    s.add_argument("--keys", type=Path, required=True, help=keys_help)
    s.add_argument("--pairs", type=Path, default=None, help="folding key set: the pair pass's result on the flagged eyes")
    s.add_argument("--pad-to", type=_count, default=0,
                   help="folding key set: pad the pair pass's list (pair_eyes) with random unflagged eyes up to N, so "
                        "that the server does not learn which eyes were flagged (default: no padding)")
    s.add_argument("--validate", action="store_true", help="compare with the plaintext model; exit 1 on a disagreement")
    s.add_argument("--gallery", nargs="+", type=Path, help="plaintext gallery files (--validate)")
    s.add_argument("--queries", nargs="+", type=Path, help="plaintext query files (--validate)")
    s.add_argument("--db", type=Path, help="the database directory, for its threshold (--validate)")
    s.add_argument("--t", type=_threshold, default=None, help="threshold, if no --db (--validate)")
    s.add_argument("--band", type=float, default=None,
                   help="guard band on the normalised margin (default: the comparator's at this key set's depth)")
    s.add_argument("--rotation-shift", type=int, default=DEFAULT_ROTATION_SHIFT,
                   help="shifts -s..s columns (default: %(default)s)")
    s.set_defaults(func=cmd_decrypt)

    s = sub.add_parser("bench", help="encrypted matching step by step on generated data, beside papers/004 Table 2")
    s.add_argument("--preset", choices=E.PRESETS, default="default", help="parameters (default: %(default)s)")
    s.add_argument("--kappa", type=int, default=None, help="comparator depth (default: the preset's)")
    s.add_argument("--gallery", type=int, default=16384, help="gallery codes (default: %(default)s)")
    s.add_argument("--eyes", type=int, default=32, help="query eyes (default: %(default)s)")
    s.add_argument("--rotation-shift", type=int, default=DEFAULT_ROTATION_SHIFT,
                   help="rotations -s..s of each eye, 2s+1 in all (default: %(default)s, open-iris's)")
    s.add_argument("--key-cache-gb", type=_positive, default=E.DEFAULT_KEY_CACHE_GB,
                   help="GiB of Galois keys the server keeps in memory (default: %(default)s)")
    s.add_argument("--enrolled", type=int, default=16, help="query eyes that are enrolled (default: %(default)s)")
    s.add_argument("--t", type=_threshold, default=0.34, help="fractional Hamming threshold (default: %(default)s)")
    s.add_argument("--population", choices=("daugman", "papers004"), default="daugman",
                   help="statistics of the generated codes (default: %(default)s)")
    s.add_argument("--seed", type=int, default=0, help="data seed (default: %(default)s)")
    s.add_argument("--out", type=Path, default=Path("bench-results/iris"), help="results folder (default: %(default)s)")
    s.add_argument("--work", type=Path, default=None, help="where keys and database are written (default: the temp dir)")
    s.set_defaults(func=cmd_bench)
