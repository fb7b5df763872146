"""The search commands: ``keygen``, ``enroll``, ``query``, ``decrypt``, ``info``, ``strategies``."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .. import data as data_mod, labels as labels_mod
from .._util.ui import describe_params, describe_strategy, fmt_bytes, warn_if_insecure
from ..enroller import Enroller
from ..errors import InvalidArgument, NotFound, PayloadBandWarning
from ..evaluation import validate as validate_mod
from ..keyholder import Client
from ..manifest import Manifest, index_info
from ..params import RULES, check_delta, choose_strategy, describe
from ..results import MAX_BOUND, PAYLOAD, SEARCH_MODES, PayloadResult, incomplete_message
from ..server import Server
from . import cluster as cluster_commands, faces as face_commands, resultfiles, service as service_commands
from .answers import print_answer
from .exits import EXIT_FAILURE, EXIT_USAGE
from .layout_checks import check_payload_input, check_same_layout
from .options import add_kappa_argument, add_memory_budget_argument, add_preset_argument, add_strategy_arguments
from .probes import run_probes
from .summaries import cmd_info


def _load_manifest_or_none(index_dir: Path) -> dict | None:
    """The index manifest, or ``None`` if ``index_dir`` holds no index yet."""
    if not (index_dir / "manifest.json").exists():
        return None
    return index_info(index_dir)


def cmd_keygen(args: argparse.Namespace) -> int:
    """Generate a key set in ``--keys``."""
    client = Client.generate(
        args.keys, preset=args.preset, kappa=args.kappa, dim=args.dim, strategy=args.strategy, n1=args.n1,
        expected_size=args.expected_size, memory_budget=args.memory_budget, workers=args.workers,
        payload=args.payload, fold=args.fold,
    )
    with client:
        warn_if_insecure(client.params)
        info = client.keygen_info or {}
        print(f"keys: {client.key_dir} (key id {client.key_id})")
        print(f"parameters: {describe_params(client.params)}")
        chosen = " (chosen by the cost model)" if args.strategy == "auto" else ""
        print(f"strategy: {client.strategy}, n1 {client.n1}{chosen}")
        if args.payload:
            print("payload: yes (one more level: indexes with payloads, `query --mode payload`)")
        if client.params.get("fold"):
            print(f"fold: yes ({client.params['padded_dim'] // 2} complex diagonals per group instead of "
                  f"{client.params['padded_dim']})")
        if "rotation_keys" in info:
            print(f"rotation keys: {info['rotation_keys']}")
        if "server_key_bytes" in info:
            print(f"server keys ({client.server_key_dir}): {fmt_bytes(info['server_key_bytes'])}")
        if "secret_key_bytes" in info:
            print(f"secret key (never leaves the client): {fmt_bytes(info['secret_key_bytes'])}")
        if "seconds" in info:
            print(f"time: {float(info['seconds']):.2f} s")
    return 0


def _enroller(args: argparse.Namespace) -> Enroller:
    """The enroller ``--keys`` and ``--encryption`` ask for."""
    owner = (args.keys / "secret.key").is_file()
    if args.encryption == "secret-key" and not owner:
        raise NotFound(f"--encryption secret-key: {args.keys} holds no secret key")
    if args.encryption == "public-key" or not owner:
        return Enroller(args.keys / "server")
    return Enroller(args.keys / "server", owner_key_dir=args.keys)


def cmd_enroll(args: argparse.Namespace) -> int:
    """Encrypt vectors into ``--index``, creating it with ``--delta`` if needed (an existing index keeps its own)."""
    if args.delta is not None:
        args.delta = check_delta(args.delta)  # before anything is read or written
    server_keys = args.keys / "server"
    if not server_keys.is_dir():
        raise NotFound(f"no server keys in {server_keys} (run `encmatch keygen --keys {args.keys}` first)")
    payloads = None
    if _records_input(args):
        got, payloads = _read_records(args)
    else:
        got = face_commands.enroll_inputs(args, server_keys)
    vectors, labels = got.vectors, got.labels
    if args.server:
        return service_commands.remote_enroll(args, vectors, labels, _enroller(args), payloads=payloads,
                                              creation=lambda: _creation(args, server_keys, payloads))
    if args.index is None:
        raise InvalidArgument("--index is required (or --server URL)")
    enroller = _enroller(args)
    manifest = _load_manifest_or_none(args.index)
    created = manifest is None and not Path(args.index).exists()
    try:
        return _enroll_local(args, enroller, manifest, server_keys, vectors, labels, payloads, got)
    except BaseException:
        # An index this call created and filled with nothing is removed: a failed enrollment
        # leaves no empty index behind (nothing changed on disk).
        if created and Path(args.index).is_dir() and Manifest.of(_load_manifest_or_none(args.index) or {}).total == 0:
            shutil.rmtree(args.index, ignore_errors=True)
        raise


def _enroll_local(args: argparse.Namespace, enroller: Enroller, manifest: dict | None, server_keys: Path,
                  vectors: np.ndarray, labels: Any, payloads: np.ndarray | None, got: Any) -> int:
    """``enroll`` into a local index (created with ``--delta`` when ``manifest`` is None)."""
    if manifest is None:
        if args.delta is None:
            raise InvalidArgument("--delta is required to create a new index")
        width, rule = _creation(args, server_keys, payloads)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PayloadBandWarning)
            manifest = enroller.create_index(args.index, args.delta, payload_width=width, rule=rule)
        for w in caught:
            print(f"warning: {w.message}", file=sys.stderr)
        extra = (f", payloads of {width} int16 value(s) per record" if width else "") + \
            (f", rule score {rule} delta" if rule else "")
        print(f"created index {args.index} (delta {args.delta}{extra})")
    else:
        if args.delta is not None:
            check_same_delta(Manifest.of(manifest).delta, args.delta)
        check_same_layout(manifest, args, str(args.index))
    check_payload_input(manifest, payloads, str(args.index))
    warn_if_insecure(manifest.get("params"))
    t0 = time.perf_counter()
    summary = enroller.enroll(args.index, vectors, labels, batch_size=args.batch_size, payloads=payloads)
    dt = time.perf_counter() - t0
    print(f"enrolled {summary.added:,} vectors in {dt:.2f} s; index holds {summary.total:,}")
    for write, line in zip(summary.group_writes, summary.report):
        # what each group written cost on disk: a new group takes its whole size whatever it holds
        cost = "rewritten" if write.filled else "added"
        print(f"{line}: {fmt_bytes(write.bytes)} {cost}")
    if summary.skipped:
        print(f"kept {summary.skipped:,} vectors an earlier run of the same input had enrolled "
              "(interrupted or repeated): not added twice")
    return face_commands.finish_enroll(args, got)


def _records_input(args: argparse.Namespace) -> bool:
    """Whether ``enroll`` was given records with payloads: ``--payloads``, or a ``.npz`` with a ``payloads``
    array (a file that cannot be read fails here, as bad input)."""
    if args.payloads is not None:
        return True
    return any(Path(p).suffix.lower() == ".npz" and Path(p).is_file() and data_mod.is_records_file(p)
               for p in args.vectors)


def _read_records(args: argparse.Namespace) -> tuple[face_commands.Collected, np.ndarray]:
    """The records of ``enroll``: vectors, labels (``--labels-from``) and payloads, from ``.npz`` files of
    ``vectors`` and ``payloads`` arrays, or from one vectors file and ``--payloads FILE.npy``."""
    paths = [Path(p) for p in args.vectors]
    if args.payloads is not None and len(paths) != 1:
        raise InvalidArgument("--payloads pairs with one vectors file (.npy or .npz); give one, or .npz records "
                              "holding 'vectors' and 'payloads' arrays")
    bad = [str(p) for p in paths if p.suffix.lower() not in (".npy", ".npz")]
    if bad:
        raise InvalidArgument(f"records with payloads are .npz (vectors + payloads) or .npy files, not {', '.join(bad)}")
    if args.payloads is None:
        plain = [str(p) for p in paths if not data_mod.is_records_file(p)]
        if plain:
            raise InvalidArgument(f"{', '.join(plain)}: no 'payloads' array, but other inputs have payloads: every "
                                  "record of an enrollment carries its payload")
    field = args.field if args.field != "emb" else None
    parts, pays, labels = [], [], []
    for p in paths:
        v, pay = data_mod.load_records(p, args.payloads, field)
        parts.append(v)
        pays.append(pay)
        if args.labels_from:
            labels += data_mod.load_labels(p, args.labels_from)
    widths = {x.shape[1] for x in pays}
    if len(widths) > 1:
        raise InvalidArgument(f"records of different payload widths ({', '.join(map(str, sorted(widths)))})")
    dims = {x.shape[1] for x in parts}
    if len(dims) > 1:
        raise InvalidArgument(f"records of different dimensions ({', '.join(map(str, sorted(dims)))})")
    vectors = np.concatenate(parts)
    if args.labels_from and len(labels) != len(vectors):
        raise InvalidArgument(f"--labels-from {args.labels_from}: {len(labels)} labels for {len(vectors)} vectors")
    got = face_commands.Collected(vectors, labels if args.labels_from else None, None, [])
    return got, np.concatenate(pays)


def _creation(args: argparse.Namespace, server_keys: Path, payloads: np.ndarray | None) -> tuple[int, str | None]:
    """``(payload_width, rule)`` of a new index: ``--payload-width`` (default: the records' payload width, else
    0) and ``--rule`` (default none: ``>=`` with the band on both sides); a width above 0 needs keys made
    with ``keygen --payload``."""
    width = args.payload_width
    if width is None:
        width = 0 if payloads is None else int(payloads.shape[1])
    if width and not _key_meta(server_keys).get("payload"):
        raise InvalidArgument(f"an index with payloads needs a payload key set (one more level): the keys in "
                              f"{server_keys.parent} were made without `encmatch keygen --payload`")
    return width, args.rule


def _key_meta(server_keys: Path) -> dict:
    """The key set's metadata (``server/keys.json``), or ``{}`` if unreadable (the core then says why)."""
    try:
        meta = json.loads((server_keys / "keys.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def check_same_delta(index_delta: float, delta: float | None) -> None:
    """Refuse a ``--delta`` other than the index's own: the threshold belongs to the index (docs/LEAKAGE.md)."""
    if delta is not None and float(delta) != float(index_delta):
        raise InvalidArgument(f"the threshold belongs to the index: it was fixed at {index_delta} when the index was "
                              f"created, and no enrollment or search can use another (--delta {delta})")


def _read_query(path: Path, field: str, row: int | None) -> np.ndarray:
    """One query vector from a file (1-D, or one row of a 2-D array)."""
    arr = data_mod.load_vectors(path, field)
    if arr.ndim == 2:
        if row is None:
            if arr.shape[0] != 1:
                raise InvalidArgument(f"{path} holds {arr.shape[0]} vectors; choose one with --row")
            row = 0
        if not -arr.shape[0] <= row < arr.shape[0]:
            raise InvalidArgument(f"--row {row} is out of range for {arr.shape[0]} vectors")
        arr = arr[row]
    return arr


def cmd_query(args: argparse.Namespace) -> int:
    """Encrypt the probes with the client key, search them against one loaded server, write the
    encrypted results (and with ``--decrypt`` print the answers)."""
    if args.out is None and not args.decrypt:
        raise InvalidArgument("--out is required (or --decrypt to print the answers only)")
    if not args.server and not (args.index / "manifest.json").is_file():
        raise NotFound(f"{args.index} holds no index (nothing enrolled yet: `encmatch enroll --index {args.index}`)")
    if args.delta is not None and not args.server:
        check_same_delta(Manifest.of(index_info(args.index)).delta, args.delta)
    if args.bound is not None and args.mode != PAYLOAD:
        raise InvalidArgument("--bound goes with --mode payload")
    if args.mode == PAYLOAD and not args.server and not Manifest.of(index_info(args.index)).payload_width:
        raise InvalidArgument(f"index {args.index} holds no payloads (created with payload width 0): "
                              "--mode payload needs an index enrolled with payloads")
    if args.out is not None:  # before any photo is embedded or any key loaded
        resultfiles.precheck(args.out)
    probes = face_commands.query_inputs(args, _read_query)
    sink = resultfiles.plan(args.out, len(probes.vectors), args.mode) if args.out is not None else None
    extra = {"bound": args.bound} if args.mode == PAYLOAD else {}
    if args.server:
        incomplete = service_commands.remote_query(args, probes.vectors, probes.labels, sink)
        return face_commands.skipped_exit(probes.problems) or (EXIT_FAILURE if incomplete else 0)
    with Client(args.keys) as client:
        warn_if_insecure(client.params)
        backend = cluster_commands.backend_from_args(args)
        opener = Server if backend is None else backend.open
        t0 = time.perf_counter()
        with opener(args.index, client.server_key_dir, args.memory_budget) as server:
            t_load = time.perf_counter() - t0
            streamed = "streamed from disk under the memory budget" if server.streamed else "in memory"
            print(f"loaded index {args.index} ({Manifest.of(server.manifest).total:,} entries, {streamed}) "
                  f"and its evaluation keys in {t_load:.2f} s", file=sys.stderr if args.json else sys.stdout)
            labels = None
            if args.decrypt:
                labels = client.open_labels(index_info(args.index), labels_mod.local_files(args.index))
            # A streamed core server answers several probes per pass over the gallery.
            batched = isinstance(server, Server) and server.streamed
            incomplete = run_probes(probes.vectors, probes.labels, args.mode, client,
                                    lambda q: server.search(q, args.mode, **extra), sink, decrypt=args.decrypt,
                                    labels=labels, json_lines=args.json,
                                    search_batch=(lambda qs: server.search_batch(qs, args.mode, **extra)) if batched else None,
                                    batch=16)
    return face_commands.skipped_exit(probes.problems) or (EXIT_FAILURE if incomplete else 0)


def cmd_decrypt(args: argparse.Namespace) -> int:
    """Decrypt result files (or ``query --out`` folders) and print the answers."""
    pairs = resultfiles.expand(args.results)
    if args.server and args.index is None:
        raise InvalidArgument("--server needs --index (the remote index id) to name matches by their labels")
    with Client(args.keys) as client:
        warn_if_insecure(client.params)
        labels, delta = None, None
        if args.server:  # the service's sealed copies, opened here
            labels = service_commands.remote_labels(args, client)
            delta = service_commands.remote_delta(args)
        elif args.index is not None:
            manifest = index_info(args.index)
            labels = client.open_labels(manifest, labels_mod.local_files(args.index))
            delta = float(manifest["delta"])
        incomplete = 0
        for name, path in pairs:
            res = client.decrypt(path.read_bytes(), delta=delta, labels=labels)
            if args.json:
                doc = res.to_dict()
                print(json.dumps({"probe": name, **doc} if len(pairs) > 1 else doc))
            else:
                if len(pairs) > 1:
                    print(f"probe {name} ({path}):")
                print_answer(res)
            if isinstance(res, PayloadResult) and not res.complete:
                incomplete += 1
                print(f"error: {f'probe {name}: ' if len(pairs) > 1 else ''}{incomplete_message(res)}",
                      file=sys.stderr)
    return EXIT_FAILURE if incomplete else 0


def strategies_table(res: dict, budget: int = 0) -> str:
    """The model's ranked candidates (``choose_strategy``) as a plain-text table, best (the choice) first."""
    headers = ["rank", "strategy", "n1", "keys", "key GB", "query s", "load s", "memory GB", "streamed"]
    if budget:
        headers.append("fits")
    rows = []
    for i, c in enumerate(res.get("candidates") or []):
        row = [
            str(i + 1), str(c["strategy"]), str(c["n1"]), str(c["keys"]),
            f"{c['key_bytes'] / 1e9:.2f}", f"{c['query_seconds']:.2f}", f"{c['load_seconds']:.2f}",
            f"{c['memory_bytes'] / 1e9:.2f}", "yes" if c.get("streamed") else "no",
        ]
        if budget:
            row.append("yes" if c["memory_bytes"] <= budget else "no")
        rows.append(row)
    return validate_mod.format_table(headers, rows)


def cmd_strategies(args: argparse.Namespace) -> int:
    """Print the cost model's ranking of the strategies and the one ``keygen --strategy auto`` would take."""
    res = choose_strategy(
        args.dim, args.preset, args.kappa, expected_size=args.expected_size,
        memory_budget=args.memory_budget, workers=args.workers,
    )
    params = describe(args.preset, args.kappa, args.dim)
    warn_if_insecure(params)
    if args.json:
        print(json.dumps(res))
        return EXIT_USAGE if res.get("error") else 0
    group = int(params["group_size"])
    size = args.expected_size or group
    budget = f"{args.memory_budget / 1e9:g} GB" if args.memory_budget else "unlimited"
    print(f"parameters: {describe_params(params)}")
    print(f"gallery: {size:,} vectors ({-(-size // group)} group(s)); memory budget {budget}; "
          f"workers {args.workers or 'all cores'}")
    print(strategies_table(res, args.memory_budget))
    print("predictions of the core's cost model (per-operation costs measured at the default preset, "
          "N = 2^15, scaled by ciphertext size; query s = membership)")
    if res.get("error"):
        print(f"error: {res['error']}", file=sys.stderr)
        return EXIT_USAGE
    print(f"chosen (rank 1): {describe_strategy(res['strategy'], res['n1'])}")
    return 0


def _payload_width(text: str) -> int:
    """argparse type: a payload width, 0 to 64."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= 64:
        raise argparse.ArgumentTypeError(f"want 0 to 64, got {value}")
    return value


def _bound(text: str) -> int:
    """argparse type: a payload search's bound, 1 to MAX_BOUND."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= MAX_BOUND:
        raise argparse.ArgumentTypeError(f"want 1 to {MAX_BOUND}, got {value}")
    return value


def add_commands(sub: Any) -> None:
    """Add the search commands to the subcommands ``sub``."""
    s = sub.add_parser("keygen", help="generate a key set")
    s.add_argument("--keys", type=Path, required=True, help="key directory to create")
    add_preset_argument(s)
    add_kappa_argument(s)
    s.add_argument("--dim", type=int, required=True, help="vector dimension (e.g. 192 for MobileFaceNet)")
    add_strategy_arguments(s)
    add_memory_budget_argument(s, "server memory, for --strategy auto")
    s.add_argument("--payload", action="store_true",
                   help="a payload key set: one more level in the modulus chain, needed for payload fetch "
                        "(indexes created with --payload-width, `query --mode payload`)")
    s.add_argument("--fold", action=argparse.BooleanOptionalAction, default=None,
                   help="fold each vector's halves into complex slots: half the diagonals, products and bytes per "
                        "entry (default: fold where the preset can, the standard ring's; --no-fold: plain layout)")
    s.set_defaults(func=cmd_keygen)

    s = sub.add_parser("enroll", help="encrypt vectors into an index")
    s.add_argument("--keys", type=Path, required=True, help="client key directory (its server/ subdirectory is used)")
    s.add_argument("--encryption", choices=("auto", "secret-key", "public-key"), default="auto",
                   help="secret-key: the key owner's seeded encryption, half the bytes; public-key: any enroller; "
                        "auto (default): secret-key when --keys holds the secret key")
    s.add_argument("--index", type=Path, default=None,
                   help="index directory (created if it does not exist); with --server the remote index id "
                        "(absent: a new remote index)")
    s.add_argument("--delta", type=float, default=None, help="match threshold, required when creating the index")
    s.add_argument("--payloads", type=Path, default=None, metavar="FILE",
                   help=".npy of int16 payloads [n, W], one row per vector of the single VECTORS file (records may "
                        "instead be .npz files holding 'vectors' and 'payloads' arrays)")
    s.add_argument("--payload-width", type=_payload_width, default=None, metavar="W",
                   help="when creating the index: int16 payload values per record, 0 to 64, fixed for good; needs "
                        "keys made with `keygen --payload` (default: the records' payload width, else 0)")
    s.add_argument("--rule", choices=RULES, default=None,
                   help="when creating the index: a match is score >= delta or score > delta (strict), fixed for "
                        "good; exact ties follow the rule and the guard band lies on the side it includes "
                        "(default: >= with the guard band on both sides of delta)")
    s.add_argument("--field", default="emb", help="array of a .npz holding the vectors (default: %(default)s)")
    s.add_argument("--labels-from", default=None, metavar="FIELD", help="array of the .npz holding one label per row")
    s.add_argument("--batch-size", type=int, default=None, help="vectors per core call (default: one group)")
    s.add_argument("vectors", type=Path, nargs="+", metavar="VECTORS",
                   help=".npy [n, dim] or .npz embeddings, or photos (files, folders: embedded here)")
    face_commands.add_photo_arguments(s)
    service_commands.add_remote_arguments(s)
    s.set_defaults(func=cmd_enroll)

    s = sub.add_parser("query", help="encrypt probes, search them, write the encrypted results",
                       description="Encrypt one or more probes with the client key, search them against the index "
                                   "(loaded once), and write the encrypted results: --out FILE for one probe, "
                                   "--out FOLDER for several (one file each and results.json; `encmatch decrypt "
                                   "FOLDER` reads them all). --decrypt prints the answers here too.")
    s.add_argument("--keys", type=Path, required=True, help="client key directory")
    s.add_argument("--index", type=Path, required=True, help="index directory (with --server: the remote index id)")
    s.add_argument("--mode", choices=SEARCH_MODES, default="identification",
                   help="identification: the matching positions (and labels); membership: the count of matches "
                        "and enrolled yes/no; payload: the payloads of the matching records, sorted (an index "
                        "enrolled with payloads) (default: %(default)s)")
    s.add_argument("--bound", type=_bound, default=None, metavar="B",
                   help=f"with --mode payload: the public bound on the number of matches, 1 to {MAX_BOUND}; the "
                        "result's size depends only on it, and more matches than B is an error, never a silent "
                        "truncation (default: 32)")
    s.add_argument("--out", type=Path, default=None,
                   help="where the encrypted results go: a file for one probe, a folder for several "
                        "(required unless --decrypt)")
    s.add_argument("--field", default="emb", help="array of a .npz holding the probes (default: %(default)s)")
    s.add_argument("--row", type=int, default=None,
                   help="search only this row of a single 2-D .npy/.npz file (default: every row)")
    s.add_argument("--delta", type=float, default=None,
                   help="only the index's own threshold is accepted (fixed at its creation); any other is refused")
    s.add_argument("--decrypt", action="store_true",
                   help="also decrypt each result here and print the answer (labels opened with --keys)")
    s.add_argument("--json", action="store_true",
                   help="with --decrypt: one JSON answer per line, with its probe name (timings go to stderr)")
    s.add_argument("queries", type=Path, nargs="+", metavar="PROBE",
                   help="probes: .npy [dim] or [n, dim], .npz (--field), photos or folders of photos "
                        "(embedded here); all searched against one loaded index")
    face_commands.add_photo_arguments(s)
    add_memory_budget_argument(s, "server memory; an index that does not fit is streamed from disk")
    service_commands.add_remote_arguments(s)
    cluster_commands.add_backend_arguments(s)
    s.set_defaults(func=cmd_query)

    s = sub.add_parser("decrypt", help="decrypt a result")
    s.add_argument("--keys", type=Path, required=True, help="client key directory")
    s.add_argument("--index", type=Path, default=None,
                   help="index directory (with --server: the remote index id), to name matches by their labels")
    s.add_argument("--json", action="store_true", help="print the answer as JSON")
    s.add_argument("results", type=Path, nargs="+", metavar="RESULT",
                   help="result files of `encmatch query`, or its --out folders (every probe in them)")
    service_commands.add_remote_arguments(s)
    s.set_defaults(func=cmd_decrypt)

    s = sub.add_parser("info", help="core version and presets, or a key set / index summary")
    s.add_argument("--index", type=Path, default=None,
                   help="an index directory: entries, groups, threshold, strategy, face model, size on disk")
    s.add_argument("--keys", type=Path, default=None, help="a key directory: key id, parameters, strategy, size on disk")
    s.add_argument("--json", action="store_true", help="print the index manifest as JSON")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("strategies", help="the cost model's ranking of the similarity strategies")
    s.add_argument("--dim", type=int, required=True, help="vector dimension")
    add_preset_argument(s)
    add_kappa_argument(s)
    add_strategy_arguments(s, choice=False)
    add_memory_budget_argument(s, "server memory")
    s.add_argument("--json", action="store_true", help="print the model's answer as JSON")
    s.set_defaults(func=cmd_strategies)

