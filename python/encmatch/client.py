"""The three roles of encrypted search: :class:`Client`, :class:`Enroller`, :class:`Server`.

- The **client** owns the key set: it generates it (:meth:`Client.generate`),
  encrypts queries and decrypts results. Its ``server/`` subdirectory
  (:attr:`Client.server_key_dir`) holds the evaluation keys and is all the
  other roles ever get; ``secret.key`` never leaves the client.
- The **enroller** encrypts gallery vectors under the public key into an
  index directory.
- The **server** loads an index and answers encrypted queries with
  encrypted results; it never sees a vector or a score.

A key set is made for one *similarity strategy* (``dg``,
``bsgs-diagonal``, ``bsgs-tbs``, ``bsgs-tbe``; :data:`STRATEGIES`): it
decides which rotation keys exist, how the enroller lays out the index
and how the server computes the scores. ``"auto"`` lets the core's cost
and memory model pick one (:func:`choose_strategy`). Memory budgets are in
bytes; ``None`` (or 0) means unlimited.

Each role is a thin layer over one or two core calls (``docs/ABI.md``).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import unicodedata
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from ._util.progress import progress as progress_bar

from . import _core
from . import labels as labels_mod
from .errors import Corrupt, InsecureParameters, Internal, InvalidArgument, Mismatch, NotFound, PayloadBandWarning
from ._util.journal import Journal, batch_digest
from .results import PAYLOAD, check_bound, check_mode
from ._util.defaults import DEFAULT_KAPPA
from ._util.units import parse_size

__all__ = [
    "Client",
    "Querier",
    "Enroller",
    "Server",
    "merge_results",
    "set_threads",
    "describe",
    "presets",
    "version",
    "index_info",
    "comparator",
    "choose_strategy",
    "STRATEGIES",
    "RULES",
    "AUTO",
]

PathLike = str | os.PathLike

#: Let the core's cost and memory model choose the strategy.
AUTO = "auto"

#: Accepted strategy names: ``auto`` and the four similarity strategies of the core.
STRATEGIES = (AUTO, "dg", "bsgs-diagonal", "bsgs-tbs", "bsgs-tbe")


def version() -> dict:
    """Version of the core and of Lattigo it was built with: ``{"version", "lattigo"}``."""
    return _core.call("version")[0]


def set_threads(threads: int) -> dict:
    """Bound the core's threads (its GOMAXPROCS) in this process; 0 leaves it. Returns ``{"previous", "threads"}``.

    A search uses every thread allowed; a process that shares its machine
    (a Ray actor given some of the CPUs) sets its share here. Setting
    ``GOMAXPROCS`` in ``os.environ`` does not work once Python runs: the
    core reads the environment the process started with.
    """
    return _core.call("set_threads", {"threads": _non_negative_int(threads, "threads")})[0]


def presets() -> list[dict]:
    """Descriptions of every parameter preset the core knows."""
    return _core.call("presets")[0].get("presets", [])


def describe(preset: str = "default", kappa: int = DEFAULT_KAPPA, dim: int = 512, *, payload: bool = False) -> dict:
    """Parameter description of ``preset`` for depth budget ``kappa`` and dimension ``dim``.

    Keys: ``preset, insecure, log_n, ring, slots, log_q, log_p, log_qp,
    security_bits, kappa, levels, dim, padded_dim, group_size`` (and
    ``payload``). ``payload``: the chain of a payload key set, one level
    longer (:meth:`Client.generate`).
    """
    args: dict = {"preset": preset, "kappa": int(kappa), "dim": int(dim)}
    if payload:
        args["payload"] = True
    return _core.call("describe", args)[0]


def index_info(index_dir: PathLike) -> dict:
    """The manifest of the index in ``index_dir`` (read and checked by the core)."""
    return _core.call("index_info", {"index_dir": Path(index_dir)})[0]


def comparator(kappa: int, delta: float, scores: Any = ()) -> dict:
    """Plaintext model of the encrypted comparator and its guard bands.

    Returns ``{"values", "decision_band", "value_band", "value_tolerance",
    "degrees", "gap", "sign_error"}``: ``values`` is the comparator
    evaluated at ``scores`` exactly as the encrypted pipeline computes it;
    ``degrees`` are its stages' degrees and ``gap`` its design value band
    (docs/COMPARATOR.md).
    """
    arr = _core.as_scores(scores)
    res, _ = _core.call("comparator", {"kappa": int(kappa), "delta": float(delta)}, arr if arr.size else None)
    return res


def _non_negative_int(value: Any, name: str) -> int:
    """``value`` as an int >= 0 (``None`` is 0); InvalidArgument otherwise."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgument(f"{name} must be a non-negative number, got {value!r}")
    if not math.isfinite(value) or value < 0 or (not isinstance(value, numbers.Integral) and value != int(value)):
        raise InvalidArgument(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def memory_budget_bytes(memory_budget: Any) -> int:
    """A memory budget in bytes as the core takes it: bytes (an int), or a size with a unit such as
    ``"4GB"`` (:mod:`encmatch._util.units`); 0 or ``None``: unlimited."""
    if memory_budget is None:
        return 0
    if isinstance(memory_budget, str):
        return parse_size(memory_budget, bare=None, what="memory_budget")
    return _non_negative_int(memory_budget, "memory_budget")


def _strategy_args(
    strategy: str, n1: int, expected_size: int | None, memory_budget: int | None, workers: int | None
) -> dict:
    """The core arguments that choose a similarity strategy (``keygen``, ``choose_strategy``), checked."""
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"unknown strategy {strategy!r} (want one of {', '.join(STRATEGIES)})")
    return {
        "strategy": strategy,
        "n1": _non_negative_int(n1, "n1"),
        "expected_size": _non_negative_int(expected_size, "expected_size"),
        "memory_budget": memory_budget_bytes(memory_budget),
        "workers": _non_negative_int(workers, "workers"),
    }


def _check_dim(dim: Any) -> int:
    """``dim`` as a positive int; InvalidArgument otherwise."""
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim <= 0:
        raise InvalidArgument(f"dim must be a positive integer, got {dim!r}")
    return int(dim)


def choose_strategy(
    dim: int,
    preset: str = "default",
    kappa: int = DEFAULT_KAPPA,
    *,
    strategy: str = AUTO,
    n1: int = 0,
    expected_size: int | None = None,
    memory_budget: int | None = None,
    workers: int | None = None,
) -> dict:
    """The strategy :meth:`Client.generate` would use with the same arguments, and the model's ranking.

    ``expected_size`` is the expected gallery size in vectors (default one
    group), ``memory_budget`` the server's memory in bytes (``None``:
    unlimited), ``workers`` its cores (``None``: this machine's). Returns
    ``{"strategy", "n1", "candidates"}``; with ``strategy="auto"``,
    ``candidates`` ranks every strategy and n1, best first, each
    ``{"strategy", "n1", "keys", "key_bytes", "query_seconds",
    "load_seconds", "memory_bytes", "streamed"}`` (predictions of a cost
    model calibrated at the default preset and scaled by ciphertext size);
    for a named strategy it holds that strategy's estimate alone. When no
    strategy fits the budget, ``strategy`` and ``n1`` are ``None`` and
    ``error`` says why, next to the candidates.
    """
    args = {"preset": preset, "kappa": int(kappa), "dim": _check_dim(dim)}
    args.update(_strategy_args(strategy, n1, expected_size, memory_budget, workers))
    res = _core.call("choose_strategy", args)[0]
    res["candidates"] = res.get("candidates") or []
    return res


def _read_key_meta(key_dir: Path) -> dict:
    """The key set's metadata (``client.json``: strategy, n1, rotations...); Corrupt if unreadable."""
    path = key_dir / "client.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Corrupt(f"cannot read the key metadata {path}: {exc}") from exc
    if not isinstance(meta, dict):
        raise Corrupt(f"the key metadata {path} is not a JSON object")
    return meta


#: The threshold rules an index can be created with: a match is ``score >= delta`` or ``score > delta``.
RULES = (">=", ">")


def check_rule(rule: Any) -> str | None:
    """``rule`` if it is one of :data:`RULES` or ``None`` (no rule: ``>=`` with the guard band on both sides
    of delta); InvalidArgument otherwise."""
    if rule is None:
        return None
    if not isinstance(rule, str) or rule not in RULES:
        raise InvalidArgument(f"rule must be '>=' or '>' (a match is score >= delta, or score > delta), got {rule!r}")
    return rule


def check_payload_width(width: Any) -> int:
    """``width`` (int16 payload values per record) as an int in 0..64; InvalidArgument otherwise."""
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) \
            or not 0 <= int(width) <= _core.MAX_PAYLOAD_WIDTH:
        raise InvalidArgument(f"payload_width must be an integer from 0 (no payloads) to {_core.MAX_PAYLOAD_WIDTH}, "
                              f"got {width!r}")
    return int(width)


def _require_dir(path: PathLike, what: str) -> Path:
    """Return ``path`` as a Path, raising NotFound with a clear message if it is not a directory."""
    p = Path(path)
    if not p.is_dir():
        raise NotFound(f"{what} {p} does not exist")
    return p


def _encrypt_query(handle: _core.Handle, dim: int, vector: Any) -> bytes:
    """Encrypt ``vector`` with the client or querier behind ``handle``."""
    vec = _core.as_vector(vector, dim)
    _, out = _core.call("encrypt_query", {"handle": handle.get(), "dim": dim}, vec)
    if out is None:
        raise Internal("encrypt_query returned no bytes")
    return out


class Client:
    """The key holder: encrypts queries and decrypts results.

    Open an existing key directory with ``Client(key_dir)`` or create one
    with :meth:`Client.generate`. Close it with :meth:`close` or use it as a
    context manager.
    """

    def __init__(self, key_dir: PathLike):
        """Open the key set in ``key_dir`` (raises NotFound, Corrupt or Mismatch)."""
        self.key_dir = _require_dir(key_dir, "key directory")
        res, _ = _core.call("client_open", {"key_dir": self.key_dir})
        self._handle = _core.Handle(self, res["handle"])
        self.key_id: str = res.get("key_id", "")
        self.params: dict = res.get("params", {})
        try:
            meta = _read_key_meta(self.key_dir)
        except BaseException:
            self._handle.close()
            raise
        #: Similarity strategy the key set was made for (``dg``, ``bsgs-tbe``...).
        self.strategy: str = str(meta.get("strategy", ""))
        #: Baby-step size of the strategy (``l`` for ``dg``).
        self.n1: int = int(meta.get("n1", 0))

    @classmethod
    def generate(
        cls,
        key_dir: PathLike,
        preset: str = "default",
        kappa: int = DEFAULT_KAPPA,
        *,
        dim: int,
        strategy: str = AUTO,
        n1: int = 0,
        expected_size: int | None = None,
        memory_budget: int | None = None,
        workers: int | None = None,
        payload: bool = False,
    ) -> "Client":
        """Generate a new key set in ``key_dir`` (which must not hold keys yet) and open it.

        ``dim`` is the vector dimension, ``kappa`` the comparator's depth
        budget. ``strategy`` is one of :data:`STRATEGIES` with baby-step
        size ``n1`` (0: about sqrt(l)); ``"auto"`` picks the fastest
        strategy whose server fits ``memory_budget`` (bytes, ``None``:
        unlimited) for ``expected_size`` vectors (default one group) on
        ``workers`` cores (see :func:`choose_strategy`). The generation
        summary (strategy, n1, rotation keys, key sizes, seconds) is kept
        in :attr:`keygen_info`.

        ``payload=True`` makes a key set whose modulus chain has one more
        level, which payload fetch needs: only such a key set can create
        an index with payloads (``payload_width > 0``,
        :meth:`Enroller.create_index`).
        """
        if not isinstance(payload, bool):
            raise InvalidArgument(f"payload must be True or False, got {payload!r}")
        args = {"key_dir": Path(key_dir), "preset": preset, "kappa": int(kappa), "dim": _check_dim(dim)}
        args.update(_strategy_args(strategy, n1, expected_size, memory_budget, workers))
        if payload:
            args["payload"] = True
        res, _ = _core.call("keygen", args)
        labels_mod.generate_keys(Path(key_dir))  # the label key pair (sealed labels, encmatch.labels)
        client = cls(key_dir)
        client.keygen_info = res
        if client.insecure:
            warnings.warn(InsecureParameters(
                f"the {client.params.get('preset', preset)!r} preset gives NO security (small ring, tests only): "
                "never use it for real data"), stacklevel=2)
        return client

    #: Summary returned by :meth:`generate` (``None`` for an opened key set).
    keygen_info: dict | None = None

    @property
    def server_key_dir(self) -> Path:
        """The ``server/`` subdirectory: the keys the enroller and the server need."""
        return self.key_dir / "server"

    @property
    def dim(self) -> int:
        """Vector dimension of the key set."""
        return int(self.params["dim"])

    @property
    def insecure(self) -> bool:
        """True for the toy preset (no security; tests only)."""
        return bool(self.params.get("insecure", False))

    @property
    def payload(self) -> bool:
        """True for a payload key set (one more level: indexes with payloads, payload fetch)."""
        return bool(self.params.get("payload", False))

    def encrypt_query(self, vector: Any) -> bytes:
        """Encrypt one query vector (``[dim]`` or ``[1, dim]``); returns the query bytes."""
        return _encrypt_query(self._handle, self.dim, vector)

    def decrypt(self, result: bytes, *, delta: float | None = None) -> dict:
        """Decrypt a search result.

        Membership: ``{"mode", "count", "raw_count"}``; identification:
        ``{"mode", "matches": [positions], "total"}``; payload: ``{"mode",
        "count", "raw_count", "bound", "width", "complete", "records":
        [{"position", "payload"}] (sorted by payload, then position),
        "matches", "unresolved", "uncertain", "total"}``
        (:func:`encmatch.results.payload_result` makes a result of it).

        The result's header names the threshold it was searched at; it is
        not authenticated. With ``delta`` (the index's own, from the
        manifest the caller holds) a result naming another is refused
        (Mismatch) and ``"delta_checked"`` is true; without it the header's
        threshold is dropped from the answer rather than shown unchecked.
        """
        if not isinstance(result, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"result must be bytes, not {type(result).__name__}")
        out = _core.call("decrypt", {"handle": self._handle.get()}, result)[0]
        claimed = out.pop("delta", None)
        if delta is not None:
            if claimed != float(delta):
                raise Mismatch(f"the result names threshold {claimed}, the index's is {delta}: it is not a result "
                               f"of this index (or it was altered)")
            out["delta"], out["delta_checked"] = float(delta), True
        return out

    def open_labels(self, manifest: dict, files: dict) -> list[str] | None:
        """Labels of every position of an index (``None`` if it has none), opened from its sealed files.

        ``files`` maps sealed file names to readers (:func:`encmatch.labels.local_files`,
        or the service's copies); only this key holder's label key opens them.
        A tampered file, or one of another index or range, raises.
        """
        if not any(labels_mod.parse_name(n) for n in files):
            return None
        return labels_mod.join(files, manifest, labels_mod.load_secret(self.key_dir))

    def close(self) -> None:
        """Release the key set in the core (idempotent)."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._handle.closed

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Client({str(self.key_dir)!r}, key_id={self.key_id!r}, preset={self.params.get('preset')!r}, "
            f"strategy={self.strategy!r}, n1={self.n1})"
        )


class Querier:
    """Encrypts queries under a key set's public key, without its secret key.

    ``Querier(server_key_dir)``: for a querier who is not the key holder,
    as with a threshold key set (:mod:`encmatch.threshold`), whose secret
    key nobody holds; the answers are then decrypted by ``t`` decryptors
    for a receiver. Close it with :meth:`close` or use it as a context
    manager.
    """

    def __init__(self, server_key_dir: PathLike):
        """Load the public key of ``server_key_dir`` (raises NotFound, Corrupt or Mismatch)."""
        self.server_key_dir = _require_dir(server_key_dir, "server key directory")
        res, _ = _core.call("querier_open", {"server_key_dir": self.server_key_dir})
        self._handle = _core.Handle(self, res["handle"])
        self.key_id: str = res.get("key_id", "")
        self.params: dict = res.get("params", {})

    @property
    def dim(self) -> int:
        """Query dimension."""
        return int(self.params["dim"])

    def encrypt_query(self, vector: Any) -> bytes:
        """Encrypt one query vector (``[dim]`` or ``[1, dim]``) under the public key; returns the query bytes."""
        return _encrypt_query(self._handle, self.dim, vector)

    def close(self) -> None:
        """Release the public key in the core (idempotent)."""
        self._handle.close()

    def __enter__(self) -> "Querier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Querier({str(self.server_key_dir)!r}, key_id={self.key_id!r}, dim={self.dim})"


class Enroller:
    """Encrypts gallery vectors into an index directory.

    ``Enroller(server_key_dir)`` is any enroller: it encrypts under the
    public key of a key directory's ``server/``. ``Enroller(server_key_dir,
    owner_key_dir=key_dir)`` is the key owner (who holds the secret key): it
    encrypts under the secret key with seeded uniform halves, which halves
    the index on disk and on the wire (60 KB instead of 120 KB per 512-d
    entry at kappa 8). The server never needs the secret key either way.
    """

    #: Vectors per core call when the index's group size is unknown.
    DEFAULT_BATCH = 4096

    def __init__(self, server_key_dir: PathLike, *, owner_key_dir: PathLike | None = None):
        """Use the keys in ``server_key_dir``; with ``owner_key_dir``, the owner's secret key."""
        self.server_key_dir = _require_dir(server_key_dir, "server key directory")
        self.owner_key_dir = None if owner_key_dir is None else _require_dir(owner_key_dir, "client key directory")

    @property
    def seeded(self) -> bool:
        """True when enrolling as the key owner (secret key, seeded halves)."""
        return self.owner_key_dir is not None

    def create_index(self, index_dir: PathLike, delta: float, payload_width: int = 0,
                     rule: str | None = None) -> dict:
        """Create an empty index in ``index_dir`` with match threshold ``delta``; returns its manifest.

        The threshold is the index's for good: every search of it uses
        ``delta`` and no other (``docs/LEAKAGE.md``); so is ``rule``, how a
        score is compared with it: ``">"`` (strict) or ``">="`` (``None``,
        the default). Every answer is right or flagged: a score within the
        comparator's value band of delta (``index_info``'s ``guard_band``)
        is reported as uncertain, never as a clean wrong bit
        (docs/COMPARATOR.md). A payload index whose band is wider than
        +-0.02 (kappa below 12) warns (:class:`PayloadBandWarning`).
        ``payload_width`` (0 to 64; 0: none) is the number of int16 payload
        values every record carries, fetched by ``search(mode="payload")``;
        it needs a payload key set (:meth:`Client.generate` with
        ``payload=True``).
        """
        delta = check_delta(delta)
        width = check_payload_width(payload_width)
        rule = check_rule(rule)
        args: dict = {"index_dir": Path(index_dir), "server_key_dir": self.server_key_dir, "delta": delta}
        if width:
            args["payload_width"] = width
        if rule is not None:
            args["rule"] = rule
        manifest = _core.call("create_index", args)[0]
        for message in manifest.pop("warnings", None) or []:
            warnings.warn(message, PayloadBandWarning, stacklevel=2)
        return manifest

    def enroll(
        self,
        index_dir: PathLike,
        vectors: Any,
        labels: Sequence[Any] | None = None,
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        fill: bool = True,
        payloads: Any = None,
    ) -> dict:
        """Append ``vectors`` (``[n, dim]``, optionally with one label each) to the index.

        ``payloads`` (``[n, W]`` integers within int16, ``[W]`` for one
        vector) is required by an index with payloads (``payload_width`` W
        > 0 in its manifest) and refused by one without; each row is
        encrypted with its vector, in the same batch.

        Labels never reach the core or the index's manifest: each batch's
        are sealed under the key set's public label key into
        ``index_dir/labels/`` (:mod:`encmatch.labels`); only the key holder
        opens them. The key owner's enroller makes the label key of an
        older key set that has none; an enroller with only ``server/``
        keys without one gets MissingLabelKey before anything is written.

        Vectors first fill the index's last group while it has room (the
        core rewrites that group whole, to a new file, and then the
        manifest: docs/STORAGE.md), then go to new groups. They are sent
        at most one group per core call, cut at group boundaries (the
        first batch is the room left in the last group), with a progress
        bar (log lines off a terminal) when there is more than one batch
        (``progress`` forces it on or off); a ``batch_size`` below the
        group size rewrites the filled group at every call. ``fill=False``
        starts new groups instead (an enroller that does not hold the
        group files: the service path). A batch whose content an earlier
        run already enrolled (a rerun after a crash or Ctrl-C) is skipped,
        not added twice (:mod:`encmatch._util.journal`). Returns the last batch's
        summary with ``added``, ``seconds``, ``bytes`` (files written; a
        filled group counts whole), ``growth`` (what the index grew on
        disk), ``groups_filled``, ``groups_new`` and ``groups_written``
        summed over all batches, ``group_writes`` (one ``{group, filled,
        added, count, bytes, seeded}`` per group written), ``report`` (one
        line per group written: ``"filled group 0 (3 entries, now 243 of
        16,384)"``, ``"new group 1 (...)"``) and ``skipped``, the vectors
        not added again.
        """
        index_dir = Path(index_dir)
        manifest = index_info(index_dir)
        dim = _manifest_dim(manifest)
        vecs = _core.as_matrix(vectors, dim, "vectors")
        n = len(vecs)
        pays = _check_payloads(payloads, n, manifest_payload_width(manifest))
        labels_list = None
        if labels is not None:
            labels_list = [str(x) for x in (labels.tolist() if isinstance(labels, np.ndarray) else labels)]
            if len(labels_list) != n:
                raise InvalidArgument(f"labels: {len(labels_list)} labels for {n} vectors")
            check_labels(labels_list)
        seal_key = None
        if labels_list is not None:
            if self.owner_key_dir is not None:
                labels_mod.ensure_keys(self.owner_key_dir)
            seal_key, key_meta = labels_mod.load_public(self.server_key_dir)
            labels_mod.remove_stale(index_dir, manifest_total(manifest))
        group_size = int(_manifest_params(manifest).get("group_size") or 0)
        group = int(batch_size or group_size or self.DEFAULT_BATCH)
        if group <= 0:
            raise InvalidArgument(f"batch_size must be positive, got {group}")
        if group_size > 0:
            # One group per core call: the core commits a group whole, so the
            # journal can tell after a crash whether a batch is in.
            group = min(group, group_size)
        journal = Journal.open(index_dir, manifest_total(manifest))

        def seal(start: int, batch_labels: list[str]) -> None:
            labels_mod.seal_batches(index_dir, seal_key, key_meta, str(manifest.get("uid", "")),
                                    [(start, batch_labels)])

        plan = _plan_batches(vecs, labels_list, journal, group, group_size,
                             _last_group_count(manifest, group_size) if fill else 0, pays)
        show = progress if progress is not None else len(plan) > 1
        summary: dict = {"added": 0, "total": manifest_total(manifest)}
        added = skipped = 0
        seconds = 0.0
        stored = growth = 0
        counts = {"groups_written": 0, "groups_filled": 0, "groups_new": 0}
        writes: list[dict] = []
        with progress_bar(total=n, unit="vec", desc="enroll", show=bool(show)) as bar:
            for lo, hi, digest, kept in plan:
                batch_labels = None if labels_list is None else labels_list[lo:hi]
                if kept is not None:  # enrolled by an earlier (interrupted) run of the same input
                    skipped += hi - lo
                    if seal_key is not None and not labels_mod.has_sealed(index_dir, kept.start, kept.count):
                        seal(kept.start, batch_labels)
                    bar.update(hi - lo)
                    continue
                args: dict = {"index_dir": index_dir, "n": hi - lo, "dim": dim}
                if self.owner_key_dir is not None:
                    args["client_key_dir"] = self.owner_key_dir
                else:
                    args["server_key_dir"] = self.server_key_dir
                if not fill:
                    args["new_groups"] = True
                batch = journal.begin(digest, int(summary["total"]), hi - lo)
                data = vecs[lo:hi] if pays is None else _with_payloads(vecs[lo:hi], pays[lo:hi])
                summary, _ = _core.call("enroll", args, data)
                start = int(summary["total"]) - int(summary["added"])
                journal.finish(batch, start)
                if seal_key is not None:  # after the groups are in: a crash leaves entries unlabelled, never mislabelled
                    seal(start, batch_labels)
                added += int(summary.get("added", hi - lo))
                seconds += float(summary.get("seconds", 0.0))
                stored += int(summary.get("bytes", 0))
                growth += int(summary.get("growth", summary.get("bytes", 0)))
                for key in counts:
                    counts[key] += int(summary.get(key, 0))
                writes += list(summary.get("group_writes") or [])
                bar.update(hi - lo)
        slots = int(summary.get("group_slots") or group_size or 0)
        summary = dict(summary, added=added, skipped=skipped, seconds=seconds, bytes=stored, growth=growth,
                       group_writes=_merge_writes(writes), group_slots=slots, **counts)
        summary["report"] = [describe_group_write(w, slots) for w in summary["group_writes"]]
        return summary


def _check_payloads(payloads: Any, n: int, width: int) -> np.ndarray | None:
    """The payloads of ``n`` vectors for an index of ``width`` payload values (int16 ``[n, width]``), or
    ``None`` for an index without payloads; InvalidArgument when they are missing, unwanted or bad."""
    if width == 0:
        if payloads is not None:
            raise InvalidArgument("this index holds no payloads (created with payload_width 0): create one with "
                                  "payload_width > 0 to store payloads")
        return None
    if payloads is None:
        raise InvalidArgument(f"this index stores {width} int16 payload value(s) per record: give payloads "
                              f"[{n}, {width}] with the vectors")
    return _core.as_payloads(payloads, n, width)


def _with_payloads(vecs: np.ndarray, pays: np.ndarray) -> np.ndarray:
    """The core's input of an enrollment with payloads: the float32 vectors, then their int16 payloads (LE)."""
    return np.concatenate([np.ascontiguousarray(vecs, dtype=_core.FLOAT32).view(np.uint8).ravel(),
                           np.ascontiguousarray(pays, dtype=_core.INT16).view(np.uint8).ravel()])


def _last_group_count(manifest: dict, group_size: int) -> int:
    """Entries in the index's last group when it has room (the core fills it first), else 0."""
    groups = manifest.get("groups") or []
    count = int(groups[-1].get("count", 0)) if groups else 0
    return count if 0 < count < group_size else 0


#: Unicode categories a label may not hold: control characters (NUL, escapes, newlines), format
#: characters (right-to-left overrides and other invisible marks that make a shown name lie; the zero-width
#: joiners that Persian, Indic scripts and emoji need excepted), surrogates and unassigned code points.
_LABEL_FORBIDDEN = ("Cc", "Cf", "Cs", "Cn")
_LABEL_JOINERS = ("\u200c", "\u200d")


def check_labels(labels: Sequence[str]) -> None:
    """Refuse (InvalidArgument) labels that are not printable text: an empty label is allowed; one with a
    control or format character (NUL, newline, ANSI escapes, right-to-left overrides...) or over 1,000
    characters is not, since every place that shows a label would show something else than it says."""
    for i, text in enumerate(labels):
        if len(text) > 1000:
            raise InvalidArgument(f"label {i} has {len(text)} characters (at most 1,000)")
        bad = next((c for c in text if unicodedata.category(c) in _LABEL_FORBIDDEN and c not in _LABEL_JOINERS), None)
        if bad is not None:
            raise InvalidArgument(f"label {i} holds the character U+{ord(bad):04X} "
                                  f"({unicodedata.name(bad, unicodedata.category(bad))}): labels are printable text")


def _plan_batches(vecs: np.ndarray, labels: list[str] | None, journal: Journal, group: int, group_size: int,
                  last: int, payloads: np.ndarray | None = None) -> list[tuple[int, int, str, Any]]:
    """Cut ``vecs`` into core calls: ``(lo, hi, digest, kept)``, ``kept`` the journal's record of a batch
    an earlier run already enrolled (skipped), else None.

    A new batch holds at most ``group`` vectors and never crosses a group boundary: the first
    fills the ``group_size - last`` free slots of the last group, so that each core call writes
    one group (filled or new) and commits it whole. Since the cuts depend on the index when a run
    starts, a rerun after a crash first looks, at each position, for a batch the journal has
    done, of any size it records, before cutting anew.
    """
    n = len(vecs)

    def digest(lo: int, hi: int) -> str:
        return batch_digest(vecs[lo:hi], None if labels is None else labels[lo:hi],
                            None if payloads is None else payloads[lo:hi])

    sizes = sorted({b.count for b in journal.batches if b.done and b.count > 0}, reverse=True)
    plan: list[tuple[int, int, str, Any]] = []
    lo = 0
    while lo < n:
        hit = None
        for k in sizes:
            if lo + k <= n:
                d = digest(lo, lo + k)
                kept = journal.done(d)
                if kept is not None:
                    hit = (lo, lo + k, d, kept)
                    break
        if hit is None:
            size = min(group, n - lo)
            if group_size > 0:
                size = min(size, group_size - last)
                last = (last + size) % group_size
            d = digest(lo, lo + size)
            hit = (lo, lo + size, d, journal.done(d))
        plan.append(hit)
        lo = hit[1]
    return plan


def _merge_writes(writes: list[dict]) -> list[dict]:
    """One record per group from the core calls' ``group_writes``: a group filled by several calls
    (batches smaller than a group) is reported once, with the entries they added together."""
    out: list[dict] = []
    for w in writes:
        if out and out[-1]["group"] == w["group"]:
            out[-1] = dict(w, added=out[-1]["added"] + w["added"], filled=out[-1]["filled"])
        else:
            out.append(dict(w))
    return out


def describe_group_write(w: dict, slots: int) -> str:
    """``"filled group 0 (3 entries, now 243 of 16,384)"`` or ``"new group 1 (40 entries of 16,384)"``."""
    of = f" of {slots:,}" if slots else ""
    if w.get("filled"):
        return f"filled group {w['group']} ({w['added']:,} entries, now {w['count']:,}{of})"
    return f"new group {w['group']} ({w['added']:,} entries{of})"


class Server:
    """Holds an encrypted index and answers encrypted queries.

    ``Server(index_dir, server_key_dir, memory_budget=None)`` loads the
    index in the core; close it with :meth:`close` or use it as a context
    manager.
    """

    def __init__(
        self,
        index_dir: PathLike,
        server_key_dir: PathLike,
        memory_budget: int | None = None,
        *,
        groups: Sequence[int] | None = None,
    ):
        """Load the index in ``index_dir`` with the evaluation keys in ``server_key_dir``.

        When the keys, the query's rotation table and the whole index do
        not fit in ``memory_budget`` bytes (``None`` or 0: unlimited), the
        groups stay on disk and are streamed for every query
        (:attr:`streamed`); ``bsgs-tbs`` cannot stream and then raises
        InvalidArgument. Keys made for another key set, parameters or
        strategy than the index raise Mismatch.

        ``groups`` (positions in the manifest's group list) makes this a
        shard: it holds and searches only those groups, and its results
        must be merged with the other shards' (:func:`merge_results`)
        before they can be decrypted.
        """
        self.index_dir = _require_dir(index_dir, "index directory")
        self.server_key_dir = _require_dir(server_key_dir, "server key directory")
        self.memory_budget = memory_budget_bytes(memory_budget)
        args: dict = {"index_dir": self.index_dir, "server_key_dir": self.server_key_dir,
                      "memory_budget": self.memory_budget}
        if groups is not None:
            args["groups"] = [_non_negative_int(g, "group") for g in groups]
        res, _ = _core.call("server_open", args)
        self._handle = _core.Handle(self, res["handle"])
        self.manifest: dict = res.get("manifest", {})
        self.open_seconds = float(res.get("seconds", 0.0))
        #: True when the groups are streamed from disk for each query (they did not fit the budget).
        self.streamed = bool(res.get("streamed", False))
        #: Core summary of the last :meth:`search` (``mode, seconds, groups, streamed``...).
        self.last_search: dict = {}

    def search(self, query: bytes, mode: str = "identification", *, signing_key: PathLike | None = None,
               index: str | None = None, generation: int = 0, bound: int | None = None) -> bytes:
        """Run an encrypted search at the index's threshold (there is no other); returns the encrypted result bytes.

        ``mode`` is ``membership``, ``identification`` or ``payload`` (an
        index with payloads only: the payloads of the matching records, in
        a result whose size depends only on ``bound``, the public bound on
        the number of matches, 1 to 4096, default 32). With
        ``signing_key`` (the server's ``server-signing.key``, from
        :func:`encmatch.threshold.generate_signing_key`) the search is one
        of a threshold key set: the result comes back bound to its query
        and signed, the input the decryptors share
        (:meth:`encmatch.threshold.Decryptor.decrypt_share`); ``index``
        names the index in the transcript (default: the manifest's uid) and
        ``generation`` its version.
        """
        check_mode(mode)
        if not isinstance(query, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"query must be bytes, not {type(query).__name__}")
        args: dict = {"handle": self._handle.get(), "mode": mode}
        if mode == PAYLOAD:
            args["bound"] = check_bound(bound)
        elif bound is not None:
            raise InvalidArgument(f"bound is the payload mode's, not the {mode} mode's")
        if signing_key is not None:
            args.update(signing_key=signing_key, index=index or "", generation=int(generation))
        elif index is not None or generation:
            raise InvalidArgument("index and generation name a signed search: give signing_key too")
        res, out = _core.call("search", args, query)
        self.last_search = res
        if out is None:
            raise Internal("search returned no bytes")
        return out

    def close(self) -> None:
        """Release the index in the core (idempotent)."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._handle.closed

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        name, n1 = manifest_strategy(self.manifest)
        return (
            f"Server({str(self.index_dir)!r}, entries={manifest_total(self.manifest)}, strategy={name!r}, "
            f"n1={n1}, streamed={self.streamed})"
        )


def merge_results(index_dir: PathLike, parts: Sequence[bytes]) -> tuple[bytes, dict]:
    """Merge the results of disjoint shards of the index in ``index_dir`` for one query.

    Membership counts are added, identification groups concatenated (the
    core does it on ciphertexts; nothing is decrypted). Returns the merged
    result and the core's summary (``complete`` tells whether the parts
    cover the whole gallery; a client refuses to decrypt one that does not).
    """
    buf = bytearray()
    for part in parts:
        if not isinstance(part, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"a result part must be bytes, not {type(part).__name__}")
        buf += len(part).to_bytes(8, "little")
        buf += part
    res, out = _core.call("merge_results", {"index_dir": _require_dir(index_dir, "index directory")}, bytes(buf))
    if out is None:
        raise Internal("merge_results returned no bytes")
    return out, res


# --------------------------------------------------------------------------
# Manifest accessors: the only place that knows the manifest's field names.


def _manifest_params(manifest: dict) -> dict:
    """The parameter description stored in a manifest (empty dict if absent)."""
    return manifest.get("params") or {}


def _manifest_dim(manifest: dict) -> int:
    """Vector dimension of an index."""
    dim = manifest.get("dim", _manifest_params(manifest).get("dim"))
    if dim is None:
        raise Internal("the index manifest has no dimension")
    return int(dim)


def manifest_total(manifest: dict) -> int:
    """Number of enrolled vectors in an index."""
    for key in ("count", "total"):
        if key in manifest:
            return int(manifest[key])
    return 0


def manifest_payload_width(manifest: dict) -> int:
    """Payload values per record of an index (0: no payloads; older manifests have none)."""
    return int(manifest.get("payload_width") or 0)


def manifest_rule(manifest: dict) -> str:
    """The threshold rule of an index, ``">="`` or ``">"`` (older manifests: ``">="``)."""
    return str(manifest.get("rule") or ">=")


def manifest_delta(manifest: dict) -> float:
    """Match threshold of an index."""
    return float(manifest["delta"])


def manifest_strategy(manifest: dict) -> tuple[str, int]:
    """``(strategy, n1)`` the index was made for (``("", 0)`` if the manifest does not say)."""
    return str(manifest.get("strategy") or ""), int(manifest.get("n1") or 0)


def check_delta(delta: Any) -> float:
    """``delta`` as a float if it is a finite cosine similarity in the open interval (-1, 1); InvalidArgument otherwise."""
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise InvalidArgument(f"delta must be a number, got {delta!r}")
    delta = float(delta)
    if not math.isfinite(delta) or not -1.0 < delta < 1.0:
        raise InvalidArgument(f"delta must be a finite cosine similarity in the open interval (-1, 1), got {delta}")
    return delta
