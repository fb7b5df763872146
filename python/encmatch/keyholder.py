"""The key holder (:class:`Client`): it generates the key set, encrypts queries and decrypts results;
``secret.key`` never leaves it. A :class:`Querier` encrypts queries with the public key alone.

A key set is made for one *similarity strategy* (``dg``, ``bsgs-diagonal``, ``bsgs-tbs``, ``bsgs-tbe``):
it decides which rotation keys exist, how the enroller lays out the index and how the server computes
the scores; ``"auto"`` lets the core's cost and memory model pick one.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Sequence


from . import _core
from . import labels as labels_mod
from .errors import Corrupt, InsecureParameters, Internal, InvalidArgument, Mismatch
from ._util.defaults import DEFAULT_KAPPA
from ._util.paths import PathLike, require_dir
from .results import Result, from_decrypted
from .params import AUTO, check_dim, strategy_args


def read_key_meta(key_dir: Path) -> dict:
    """The key set's metadata (``client.json``: strategy, n1, rotations...); Corrupt if unreadable."""
    path = key_dir / "client.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Corrupt(f"cannot read the key metadata {path}: {exc}") from exc
    if not isinstance(meta, dict):
        raise Corrupt(f"the key metadata {path} is not a JSON object")
    return meta


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
        self.key_dir = require_dir(key_dir, "key directory")
        res, _ = _core.call("client_open", {"key_dir": self.key_dir})
        self._handle = _core.Handle(self, res["handle"])
        self.key_id: str = res.get("key_id", "")
        self.params: dict = res.get("params", {})
        try:
            meta = read_key_meta(self.key_dir)
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
        fold: bool | None = None,
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

        ``fold`` folds each vector's two halves into complex slots
        (``lo + i hi``, the query as ``(lo - i hi) / 2``): a group has half
        the diagonals, so half the products, key switches and stored bytes,
        and the server takes the real part once per group (one more
        rotation key, the conjugation). ``None`` (the default) folds where
        the preset can (the standard ring's complex slots; not the
        conjugate-invariant ``real`` presets); ``False`` keeps the plain
        layout. Threshold key sets fold the same way
        (:func:`encmatch.threshold.init_setup`).
        """
        if not isinstance(payload, bool):
            raise InvalidArgument(f"payload must be True or False, got {payload!r}")
        if fold is not None and not isinstance(fold, bool):
            raise InvalidArgument(f"fold must be True, False or None (fold where the preset can), got {fold!r}")
        args = {"key_dir": Path(key_dir), "preset": preset, "kappa": int(kappa), "dim": check_dim(dim)}
        args.update(strategy_args(strategy, n1, expected_size, memory_budget, workers))
        if payload:
            args["payload"] = True
        if fold is not None:
            args["fold"] = fold
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

    def decrypt(self, result: bytes, *, delta: float | None = None,
                labels: Sequence[str] | None = None) -> Result:
        """Decrypt a search result into its typed answer: :class:`~encmatch.results.MembershipResult`,
        :class:`~encmatch.results.IdentificationResult` or :class:`~encmatch.results.PayloadResult` (the
        same types as :meth:`encmatch.EncryptedIndex.search`); ``labels`` (one per gallery position)
        name the matches.

        The result's header names the threshold it was searched at; it is
        not authenticated. With ``delta`` (the index's own, from the
        manifest the caller holds) a result naming another is refused
        (Mismatch) and the answer's ``delta`` says it was checked; without
        it the header's threshold is not shown.
        """
        out = self.decrypt_answer(result)
        claimed = out.pop("delta", None)
        if delta is not None and claimed != float(delta):
            raise Mismatch(f"the result names threshold {claimed}, the index's is {delta}: it is not a result "
                           f"of this index (or it was altered)")
        return from_decrypted(out, labels, None if delta is None else float(delta))

    def decrypt_answer(self, result: bytes) -> dict:
        """The core's decrypted answer as it gives it (``docs/ABI.md``: ``decrypt``), untyped, the
        header's unchecked threshold included; :meth:`decrypt` is what users want."""
        if not isinstance(result, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"result must be bytes, not {type(result).__name__}")
        return _core.call("decrypt", {"handle": self._handle.get()}, result)[0]

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
        self.server_key_dir = require_dir(server_key_dir, "server key directory")
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


