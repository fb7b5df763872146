"""The service's part of the command line: ``encmatch serve``, ``encmatch tenant`` and the
``--server`` mode of ``encmatch enroll`` and ``encmatch query``.

::

    encmatch tenant add --data DIR NAME      # prints a new token for tenant NAME (stored hashed); refused if NAME exists
    encmatch tenant rotate --data DIR NAME   # a new token for NAME, its earlier ones revoked
    encmatch tenant revoke|list --data DIR ...
    encmatch serve --data DIR --host 0.0.0.0 --tls-cert cert.pem --tls-key key.pem [--port 8470] ...
    encmatch serve --data DIR [--port 8470] [--allow-insecure] [--max-queue 16] ...   # loopback, plain HTTP
    export ENCMATCH_TOKEN=...                # or --token-file FILE; --token on the command line is deprecated
    encmatch enroll --server URL [--ca-file CA.pem] --keys K [--index ID] [--delta D] gallery.npz
    encmatch query  --server URL [--ca-file CA.pem] --keys K --index ID --out r.bin [--decrypt] query.npy
    encmatch decrypt --server URL [--ca-file CA.pem] --keys K --index ID r.bin   # labels fetched sealed, opened here
    encmatch index list --server URL [--json]           # the tenant's indexes: id, label, state, entries...
    encmatch index info --server URL ID [--json]        # one index (without --server: a local index directory)
    encmatch index delete --server URL ID [--yes]       # asks first; refused off a terminal without --yes

A service that cannot be reached, answers too late or refuses the token
exits 3 with one ``error:`` line (a refused connection is tried 3 times
within about 1.5 s, each retry announced on stderr); an unknown index
exits 2.

The web framework is imported only when a service command runs, so the
rest of the command line starts as fast as before.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._util.ui import fmt_bytes, warn_if_insecure

from .options import add_memory_budget_argument
from ..keyholder import Client
from ..enroller import Enroller
from ..manifest import Manifest
from ..errors import InvalidArgument, NotFound
from .cluster import add_backend_arguments, backend_from_args

__all__ = ["add_commands", "add_remote_arguments", "remote_enroll", "remote_query", "remote_labels",
           "token_from_args", "service_client", "cmd_index", "index_table"]

#: A remote index id, as the service makes them.
_INDEX_ID = re.compile(r"^[0-9a-f]{16}$")


def add_remote_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--server URL``, ``--token-file FILE``, ``--ca-file FILE`` and the deprecated ``--token``
    to a subcommand (the token: ``--token-file``, else ``$ENCMATCH_TOKEN``)."""
    p.add_argument("--server", default=None, metavar="URL",
                   help="run against an encmatch service, https://host:port (then --index is the remote index id)")
    p.add_argument("--token-file", type=Path, default=None, metavar="FILE",
                   help="file holding the tenant token for --server (default: $ENCMATCH_TOKEN)")
    p.add_argument("--ca-file", type=Path, default=None, metavar="FILE",
                   help="CA certificate (PEM) to verify an https --server with, e.g. a self-signed deployment's "
                        "(default: $ENCMATCH_CA_FILE, else the system's trust store)")
    p.add_argument("--token", default=None,
                   help="deprecated: a token on the command line shows in the process list; "
                        "use $ENCMATCH_TOKEN or --token-file")
    p.add_argument("--insecure-http", action="store_true",
                   help="send the token over plain http:// to a host that is not loopback (anyone on the path "
                        "can read it; refused without this)")


def read_token_file(path: Path) -> str:
    """The token in ``path`` (surrounding whitespace stripped); warns on stderr if the file can be
    read by others than its owner. NotFound / InvalidArgument for a missing or empty file."""
    if not path.is_file():
        raise NotFound(f"--token-file: no such file {path}")
    token = path.read_text().strip()
    if not token or any(c.isspace() for c in token):
        raise InvalidArgument(f"--token-file {path} must hold one token (it is empty or holds several words)")
    if path.stat().st_mode & 0o077:
        print(f"warning: --token-file {path} can be read by other users (chmod 600 it)", file=sys.stderr)
    return token


def token_from_args(args: argparse.Namespace) -> str | None:
    """The token of a ``--server`` command: ``--token-file``, else ``--token`` (deprecated, with a
    warning on stderr), else ``None`` (the SDK then reads ``$ENCMATCH_TOKEN``)."""
    token_file = getattr(args, "token_file", None)
    if token_file is not None and args.token is not None:
        raise InvalidArgument("give --token-file or --token, not both")
    if token_file is not None:
        return read_token_file(token_file)
    if args.token is not None:
        print("warning: --token shows in the process list (ps, /proc/*/cmdline) and shell history; "
              "use $ENCMATCH_TOKEN or --token-file", file=sys.stderr)
    return args.token


def _print_retry(line: str) -> None:
    """Print one retry line of the ServiceClient on stderr."""
    print(line, file=sys.stderr, flush=True)


def service_client(args: argparse.Namespace) -> Any:
    """The :class:`~encmatch.service.client.ServiceClient` of a ``--server`` command's arguments
    (each retry announced on stderr; a token about to go over plain HTTP to a host that is not
    loopback is a ``warning:`` line there)."""
    import warnings

    from ..service.client import PlaintextTokenWarning, ServiceClient

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PlaintextTokenWarning)
        client = ServiceClient(args.server, token_from_args(args), verify=getattr(args, "ca_file", None),
                               on_retry=_print_retry, insecure_http=bool(getattr(args, "insecure_http", False)))
    for w in caught:
        if issubclass(w.category, PlaintextTokenWarning):
            print(f"warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return client


def add_commands(sub: Any) -> None:
    """Add the ``serve``, ``tenant`` and ``index`` subcommands to the ``encmatch`` subparsers ``sub``."""
    s = sub.add_parser("serve", help="run the HTTP service (encrypted galleries and queries, multi-tenant)")
    s.add_argument("--data", type=Path, required=True, help="data directory (indexes, keys, tenants.json)")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: %(default)s); an address other than loopback needs TLS "
                        "(--tls-cert/--tls-key) or --allow-plaintext")
    s.add_argument("--port", type=int, default=8470, help="port (default: %(default)s)")
    s.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                   help="serve HTTPS with this PEM certificate (chain); needs --tls-key")
    s.add_argument("--tls-key", type=Path, default=None, metavar="FILE", help="the PEM private key of --tls-cert")
    s.add_argument("--allow-plaintext", action="store_true",
                   help="allow plain HTTP on a non-loopback --host (only behind a TLS-terminating proxy)")
    s.add_argument("--allow-insecure", action="store_true",
                   help="accept key sets of INSECURE presets (toy): for tests only")
    s.add_argument("--signing-key", type=Path, default=None, metavar="FILE",
                   help="server-signing.key (threshold signing-keygen): sign searches asked for with signed=true, "
                        "for threshold decryptors")
    s.add_argument("--max-body-mb", type=float, default=64.0,
                   help="largest request body in MiB (default: %(default)s); upload chunks must fit")
    s.add_argument("--max-file-gb", type=float, default=16.0, help="largest uploaded file in GiB (default: %(default)s)")
    s.add_argument("--tenant-indexes", type=int, default=64, metavar="N",
                   help="indexes a tenant may hold, pending or committed (0: no limit; default: %(default)s); more: 429")
    s.add_argument("--tenant-gb", type=float, default=1024.0, metavar="G",
                   help="GiB a tenant may store (0: no limit; default: %(default)s); more: 507")
    s.add_argument("--tenant-uploads", type=int, default=64, metavar="N",
                   help="uploads a tenant may have in progress at once (0: no limit; default: %(default)s); more: 429")
    s.add_argument("--max-queue", type=int, default=16,
                   help="searches queued or running at once; more are answered 503 busy (default: %(default)s)")
    s.add_argument("--workers", type=int, default=1,
                   help="search threads; each search already uses every core (default: %(default)s)")
    s.add_argument("--query-timeout", type=float, default=300.0,
                   help="seconds a search may wait and run before it is answered 504 (default: %(default)s)")
    s.add_argument("--shutdown-grace", type=float, default=30.0,
                   help="seconds in-flight requests get to finish on SIGTERM/SIGINT (default: %(default)s)")
    s.add_argument("--body-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds a client may take to send each piece of a request body, else 408 "
                        "(default: $ENCMATCH_BODY_TIMEOUT, else 60)")
    s.add_argument("--header-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds a connection may stay without a whole request header, else it is closed "
                        "(default: $ENCMATCH_HEADER_TIMEOUT, else 30)")
    s.add_argument("--no-access-log", action="store_true", help="do not log every request")
    add_memory_budget_argument(s, "memory for each loaded index; a larger one is streamed from disk per query")
    add_backend_arguments(s)
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("tenant", help="add, rotate, list or revoke the service's tenants and tokens")
    s.add_argument("--data", type=Path, default=None, help="the service's data directory")
    actions = s.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, helptext in (
        ("add", "create tenant NAME and print its token once (refused if NAME exists, unless --rotate)"),
        ("rotate", "print a new token for the existing tenant NAME; its earlier tokens are revoked"),
        ("revoke", "revoke every token of tenant NAME (its indexes stay on disk)"),
        ("list", "list the tenants and their numbers of active tokens"),
    ):
        a = actions.add_parser(name, help=helptext, description=helptext)
        # SUPPRESS: a --data given before the action (``tenant --data DIR add NAME``) is kept
        a.add_argument("--data", type=Path, default=argparse.SUPPRESS, help="the service's data directory")
        if name != "list":
            a.add_argument("name", metavar="NAME", help="tenant name")
        if name == "add":
            a.add_argument("--rotate", action="store_true",
                           help="if NAME exists, issue a new token and revoke its earlier ones")
    s.set_defaults(func=cmd_tenant)

    s = sub.add_parser("index", help="list, inspect or delete the indexes of an encmatch service (--server URL)",
                       description="List, inspect or delete the token's tenant's indexes on an encmatch service. "
                                   "The token comes from $ENCMATCH_TOKEN or --token-file.")
    actions = s.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, helptext in (
        ("list", "the tenant's indexes: id, label, state, entries, groups, preset, delta, created"),
        ("info", "one index: state, entries, groups, parameters and security, delta, strategy, labels, uploads "
                 "(without --server, ID is a local index directory, as `encmatch info --index`)"),
        ("delete", "delete an index and its files on the service (asks first, unless --yes)"),
    ):
        a = actions.add_parser(name, help=helptext, description=helptext)
        add_remote_arguments(a)
        for action in a._actions:
            if action.dest == "server":
                action.help = "the encmatch service, https://host:port" + (
                    " (without it, ID is a local index directory)" if name == "info" else " (required)")
        if name != "list":
            a.add_argument("id", metavar="ID", help="the remote index id (info without --server: a local index "
                                                    "directory)" if name == "info" else "the remote index id")
        if name == "delete":
            a.add_argument("--yes", "-y", action="store_true",
                           help="delete without asking (needed when stdin is not a terminal)")
        else:
            a.add_argument("--json", action="store_true", help="print the service's JSON instead of text")
    s.set_defaults(func=cmd_index)


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the service until SIGINT/SIGTERM."""
    from ..service.app import ServiceConfig, serve
    from ..service.transport import check_listen

    check_listen(args.host, args.tls_cert, args.tls_key, args.allow_plaintext)  # before anything is opened
    if args.max_queue < 1 or args.workers < 1 or args.query_timeout <= 0 or args.max_body_mb <= 0:
        raise InvalidArgument("--max-queue and --workers must be >= 1; --query-timeout and --max-body-mb > 0")
    if args.signing_key is not None:
        from ..threshold import signing_key_public

        signer = signing_key_public(args.signing_key)  # a bad key fails now, not at the first signed search
        print(f"signing searches asked for with signed=true as server key {signer[:16]}", file=sys.stderr)
    if args.allow_insecure:
        print("warning: --allow-insecure: key sets of INSECURE presets are accepted (tests only)", file=sys.stderr)
    config = ServiceConfig(
        data_dir=args.data, allow_insecure=args.allow_insecure, max_body_bytes=int(args.max_body_mb * (1 << 20)),
        max_file_bytes=int(args.max_file_gb * (1 << 30)), max_pending=args.max_queue, workers=args.workers,
        query_timeout=args.query_timeout, shutdown_grace=args.shutdown_grace, memory_budget=args.memory_budget,
        backend=backend_from_args(args), signing_key=args.signing_key,
        quotas=_quotas(args),
    )
    for name in ("body_timeout", "header_timeout"):
        value = getattr(args, name)
        if value is not None:
            if not value > 0:
                raise InvalidArgument(f"--{name.replace('_', '-')} must be > 0, got {value:g}")
            setattr(config, name, value)
    return serve(config, args.host, args.port, access_log=not args.no_access_log, tls_cert=args.tls_cert,
                 tls_key=args.tls_key, allow_plaintext=args.allow_plaintext)


def cmd_tenant(args: argparse.Namespace) -> int:
    """``encmatch tenant add|rotate|revoke|list``: a new token (printed once, on stdout), a rotation,
    a revocation or the list of tenants. Re-adding a tenant, or any action on a data directory that
    does not exist (``add`` creates it), is an error (exit 2)."""
    from ..service.tenancy import TokenStore

    if args.data is None:
        raise InvalidArgument("tenant: --data DIR (the service's data directory) is required")
    store = TokenStore(args.data)
    if args.action == "add":
        args.data.mkdir(parents=True, exist_ok=True)
        token = store.add(args.name, rotate=args.rotate)
    elif args.action == "rotate":
        token = store.rotate(args.name)
    elif args.action == "revoke":
        n = store.revoke(args.name)
        print(f"revoked {n} token(s) of tenant {args.name!r}")
        return 0
    else:
        if not args.data.is_dir():
            raise NotFound(f"no data directory {args.data}")
        if not store.path.is_file():
            print(f"no tenants in {args.data} (no {store.path.name}; `encmatch tenant add` creates it)",
                  file=sys.stderr)
            return 0
        for name, n in sorted(store.tenants().items()):
            print(f"{name}\t{n} token(s)")
        return 0
    print(token)
    print(f"token for tenant {args.name!r} (stored hashed in {store.path}; shown only now"
          f"{'; its earlier tokens are revoked' if args.action == 'rotate' or args.rotate else ''})",
          file=sys.stderr)
    return 0


def _created(value: Any) -> str:
    """A ``created`` time (seconds since the epoch) as UTC text, or ``-``."""
    import datetime

    try:
        return datetime.datetime.fromtimestamp(float(value), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return "-"


def _preset(status: dict) -> str:
    """An index status's preset name, marked when INSECURE."""
    name = str(status.get("preset") or "?")
    return f"{name} (INSECURE)" if status.get("insecure") else name


def index_table(indexes: list[dict]) -> str:
    """The ``encmatch index list`` table of the service's index statuses (one line per index)."""
    headers = ["id", "label", "state", "entries", "groups", "preset", "delta", "created"]
    rows = []
    for st in indexes:
        delta = st.get("delta")
        rows.append([str(st.get("id", "?")), str(st.get("label") or "-"), str(st.get("state", "?")),
                     f"{int(st['count']):,}" if st.get("count") is not None else "-",
                     str(st["groups"]) if st.get("groups") is not None else "-", _preset(st),
                     f"{float(delta):g}" if delta is not None else "-", _created(st.get("created"))])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def _index_lines(status: dict, manifest: dict | None, url: str) -> list[str]:
    """``encmatch index info``'s text for a remote index's status (and manifest when it is ready)."""
    from .._util.ui import describe_params, describe_strategy

    out = [f"index: {status.get('id')} on {url}"]
    if status.get("label"):
        out.append(f"label: {status['label']}")
    out.append(f"state: {status.get('state')}" + (f", generation {status['generation']}"
                                                  if status.get("generation") is not None else ""))
    out.append(f"created: {_created(status.get('created'))}")
    if status.get("count") is not None:
        out.append(f"entries: {int(status['count']):,} in {status.get('groups', 0)} group(s)")
    if status.get("delta") is not None:
        out.append(f"delta: {status['delta']}")
    params = (manifest or {}).get("params")
    if params:
        out.append(f"parameters: {describe_params(params)}")
    else:
        out.append(f"parameters: preset {_preset(status)}, kappa {status.get('kappa')}, dim {status.get('dim')}")
    if status.get("strategy"):
        out.append(f"strategy: {describe_strategy(str(status['strategy']), int(status.get('n1') or 0))}")
    out.append(f"key set: {status.get('key_id')}")
    if "labelled" in status:
        sealed = int(status.get("sealed_files") or 0)
        out.append(f"labels: sealed, {sealed} file(s)" if status["labelled"] else "labels: no")
    if "loaded" in status:
        out.append(f"loaded: {'yes' if status['loaded'] else 'no'}"
                   + (f" ({status['unavailable']})" if status.get("unavailable") else ""))
    for key in ("bytes", "disk_bytes", "bytes_on_disk"):  # reported by services that measure it
        if status.get(key) is not None:
            out.append(f"on disk: {fmt_bytes(int(status[key]))}")
            break
    if status.get("missing_key_files"):
        out.append(f"missing key files: {', '.join(status['missing_key_files'])}")
    for up in status.get("uploads") or []:
        out.append(f"upload in progress: {up.get('name')} {up.get('received', '?')}/{up.get('size', '?')} bytes")
    return out


def _confirm(question: str) -> bool:
    """Ask ``question`` on the terminal; whether the answer is yes."""
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_index(args: argparse.Namespace) -> int:
    """``encmatch index list|info|delete``: the tenant's indexes on ``--server`` (``info`` of a local
    index directory without it). An unknown index exits 2, an unreachable or refusing service 3."""
    if args.server is None:
        if args.action == "info":
            from .summaries import cmd_info

            return cmd_info(argparse.Namespace(index=Path(args.id), keys=None, json=args.json))
        raise InvalidArgument(f"index {args.action} needs --server URL (an encmatch service); a local index is a "
                              f"directory: `encmatch index info PATH` describes it")
    index_id = getattr(args, "id", None)
    if index_id is not None and not _INDEX_ID.match(index_id):
        raise InvalidArgument(f"{index_id!r} is not a remote index id (16 hexadecimal digits, as "
                              f"`encmatch index list` shows)")
    if args.action == "delete" and not args.yes and not sys.stdin.isatty():
        raise InvalidArgument(f"index delete {index_id}: stdin is not a terminal, so nobody can confirm; "
                              f"give --yes to delete without asking")
    with service_client(args) as service:
        if args.action == "list":
            indexes = service.indexes()
            if args.json:
                print(json.dumps({"indexes": indexes}))
            elif not indexes:
                print(f"no indexes on {service.url} for this token's tenant")
            else:
                print(index_table(indexes))
            return 0
        status = service.index(index_id)  # NotFound (exit 2) for an id the tenant does not hold
        if args.action == "info":
            manifest = service.manifest(index_id) if status.get("state") == "ready" else None
            if args.json:
                print(json.dumps(dict(status, manifest=manifest)))
            else:
                print("\n".join(_index_lines(status, manifest, service.url)))
            return 0
        what = (f"index {index_id}" + (f" ({status['label']!r})" if status.get("label") else "")
                + f", {status.get('state')}, {int(status.get('count') or 0):,} entries")
        if not args.yes and not _confirm(f"delete {what} on {service.url}? [y/N] "):
            raise InvalidArgument(f"not confirmed: index {index_id} was not deleted")
        service.delete(index_id)
    print(f"deleted {what}")
    return 0


def remote_enroll(args: argparse.Namespace, vectors: np.ndarray, labels: Any, enroller: Enroller, *,
                  payloads: np.ndarray | None = None, creation: Any = None) -> int:
    """``enroll --server``: encrypt here with ``enroller`` (``--encryption``: the public key of
    ``--keys``/server, or the key owner's secret key), upload, commit; creates the index when
    ``--index`` is absent (``creation()``: its payload width and rule, else none).
    ``payloads``: the records' int16 payloads, for an index with payloads."""
    import warnings

    from ..service.remote import AlreadyEnrolledWarning, create_index, enroll
    from .layout_checks import check_payload_input, check_same_layout

    server_keys = args.keys / "server"
    with service_client(args) as service:
        if args.index is None:
            if args.delta is None:
                raise InvalidArgument("--delta is required to create a new remote index (or give --index ID)")
            width, rule = creation() if creation is not None else (0, None)
            index_id = create_index(service, server_keys, args.delta, payload_width=width, rule=rule)
            print(f"created remote index {index_id} (delta {args.delta}"
                  + (f", payloads of {width} int16 value(s) per record" if width else "")
                  + (f", rule score {rule} delta" if rule else "") + ")")
        else:
            index_id = str(args.index)
            if args.delta is not None and float(args.delta) != Manifest.of(service.manifest(index_id)).delta:
                raise InvalidArgument(f"the threshold belongs to the index: remote index {index_id} was created with "
                                      f"delta {Manifest.of(service.manifest(index_id)).delta}, not {args.delta}")
            check_same_layout(service.manifest(index_id), args, f"{index_id} (remote)")
        check_payload_input(service.manifest(index_id), payloads, f"{index_id} (remote)")
        warn_if_insecure(service.index(index_id))
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # printed as a warning: line below
            warnings.simplefilter("ignore", AlreadyEnrolledWarning)
            summary = enroll(service, index_id, enroller, vectors, labels, payloads=payloads)
        dt = time.perf_counter() - t0
        for note in summary.warnings:
            print(f"warning: {note}", file=sys.stderr)
    got = f", downloaded {fmt_bytes(summary.downloaded_bytes)} to fill the last group" if summary.downloaded_bytes else ""
    print(f"enrolled {summary.added:,} vectors in {dt:.2f} s (uploaded {fmt_bytes(summary.uploaded_bytes)}{got}); "
          f"index {index_id} holds {summary.total:,}")
    return 0


def remote_query(args: argparse.Namespace, vectors: np.ndarray, names: list[str], sink) -> int:
    """``query --server``: encrypt each probe here, search it on the service, write the encrypted results
    (``sink``, :mod:`encmatch.cli.resultfiles`) and with ``--decrypt`` print the answers. Returns the number
    of incomplete payload answers."""
    from .probes import run_probes

    if args.index is None:
        raise InvalidArgument("--index (the remote index id) is required")
    with Client(args.keys) as client, service_client(args) as service:
        warn_if_insecure(client.params)
        manifest = service.manifest(str(args.index))
        if args.delta is not None and float(args.delta) != Manifest.of(manifest).delta:
            raise InvalidArgument(f"the threshold belongs to the index: remote index {args.index} was created with "
                                  f"delta {Manifest.of(manifest).delta}; a search cannot use {args.delta}")
        labels = None
        decrypt = bool(getattr(args, "decrypt", False))
        if decrypt:
            from ..service.remote import remote_labels as fetch_labels

            labels = fetch_labels(service, str(args.index), client)
        waits = {"search": 0.0, "queue": 0.0}

        def search(q: bytes) -> bytes:
            result, timings = service.search(str(args.index), q, args.mode, bound=getattr(args, "bound", None))
            waits["search"] += float(timings.get("search_seconds", 0.0))
            waits["queue"] += float(timings.get("queue_seconds", 0.0))
            return result

        incomplete = run_probes(vectors, names, args.mode, client, search, sink, decrypt=decrypt, labels=labels,
                                json_lines=getattr(args, "json", False), where=f" on {args.server} (round trips)")
        print(f"of which the service searched {waits['search']:.2f} s and queued {waits['queue']:.2f} s",
              file=sys.stderr if getattr(args, "json", False) else sys.stdout)
    return incomplete


def _quotas(args: argparse.Namespace) -> Any:
    """The per-tenant quotas of ``serve``'s options (a :class:`encmatch.service.storage.Quotas`)."""
    from ..service.storage import Quotas

    for name in ("tenant_indexes", "tenant_gb", "tenant_uploads"):
        if getattr(args, name) < 0:
            raise InvalidArgument(f"--{name.replace('_', '-')} must be >= 0 (0: no limit)")
    return Quotas(indexes=args.tenant_indexes, bytes=int(args.tenant_gb * (1 << 30)), uploads=args.tenant_uploads)


def remote_delta(args: argparse.Namespace) -> float:
    """``decrypt --server``: the remote index's threshold, which a result must name."""
    with service_client(args) as service:
        return float(service.manifest(str(args.index))["delta"])


def remote_labels(args: argparse.Namespace, client: Client) -> list[str] | None:
    """``decrypt --server``: the remote index's labels, fetched sealed and opened with ``client``'s label key."""
    from ..service.remote import remote_labels as fetch_labels

    with service_client(args) as service:
        return fetch_labels(service, str(args.index), client)
