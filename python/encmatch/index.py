"""`EncryptedIndex`: a vector-index-shaped front for a key holder who runs every role.

::

    with EncryptedIndex.create("faces", dim=192, preset="default", delta=0.457) as index:   # delta: fixed for good
        index.add(gallery, labels=names)
        hit = index.search(probe, mode="membership")        # MembershipResult
        ids = index.search(probes, mode="identification")   # list of IdentificationResult

    with EncryptedIndex.create("records", dim=128, delta=0.8, payload_width=7, rule=">") as index:
        index.add(vectors, payloads=payloads)               # int16 [n, 7], encrypted with their vectors
        got = index.search(probe, mode="payload", bound=32) # PayloadResult: count, payloads [k, 7] sorted

On disk, ``path/keys`` is the key directory (the secret key included) and
``path/index`` the encrypted index (labels sealed in ``path/index/labels/``,
only the key holder opens them). ``create(..., strategy=...)`` picks the
similarity strategy (``"auto"``: the core's model chooses); a memory budget
(bytes) given to ``create`` or ``EncryptedIndex(path, memory_budget=...)``
is the server's: an index that does not fit is streamed from disk per query.
It is not stored on disk: pass it again when reopening. Queries are encrypted, searched and
decrypted in process; the server side never sees a plaintext vector even
here, it is just the same process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from ._util.progress import progress as progress_bar

from . import _core
from . import labels as labels_mod
from .params import AUTO, check_delta, check_payload_width, check_rule, memory_budget_bytes
from .keyholder import Client
from .enroller import Enroller, EnrollSummary
from .server import SearchBackend, Server
from .manifest import Manifest, index_info
from .errors import InvalidArgument, NotFound
from .results import PAYLOAD, PayloadResult, Result, check_search, make_result, require_complete
from ._util.defaults import DEFAULT_KAPPA

#: Queries handed at once to a core server that streams its groups
#: (:meth:`Server.search_batch`: one pass over the gallery for as many as its
#: memory budget holds); a server holding its groups in memory takes them one by one.
_BATCH = 16

__all__ = ["EncryptedIndex"]

PathLike = str | os.PathLike


class EncryptedIndex:
    """An encrypted 1:N index whose keys live beside it (``path/keys``, ``path/index``).

    Create one with :meth:`create`, open one with ``EncryptedIndex(path)``.
    Close it (or use ``with``) to release the key set and the loaded index.
    """

    KEYS = "keys"
    INDEX = "index"

    def __init__(self, path: PathLike, memory_budget: int | None = None, *, backend: Any = None):
        """Open the index at ``path`` (raises NotFound if it is not an encrypted index).

        ``memory_budget`` (bytes, ``None``: unlimited) is handed to the
        :class:`Server` that searches open: groups that do not fit are
        streamed from disk for each query.

        ``backend`` is where searches run: ``None`` (the default) in this
        process; an :class:`encmatch.cluster.RayBackend` shards the index
        over Ray actors (``memory_budget`` is then each actor's). Either
        way the results are the same.
        """
        self.path = Path(path)
        self.backend = backend
        #: The server's memory budget in bytes (0: unlimited).
        self.memory_budget = memory_budget_bytes(memory_budget)
        if not (self.path / self.KEYS).is_dir() or not (self.path / self.INDEX).is_dir():
            raise NotFound(f"{self.path} is not an encrypted index (expected {self.KEYS}/ and {self.INDEX}/ in it)")
        self._server: SearchBackend | None = None
        self.client = Client(self.key_dir)
        try:
            self.manifest = index_info(self.index_dir)
        except BaseException:
            self.client.close()
            raise

    @classmethod
    def create(
        cls,
        path: PathLike,
        dim: int,
        preset: str = "default",
        kappa: int = DEFAULT_KAPPA,
        *,
        delta: float,
        strategy: str = AUTO,
        n1: int = 0,
        expected_size: int | None = None,
        memory_budget: int | None = None,
        backend: Any = None,
        payload_width: int = 0,
        rule: str | None = None,
    ) -> "EncryptedIndex":
        """Generate keys and create an empty index at ``path`` (refuses existing keys: Exists).

        ``delta`` (required) is the index's match threshold, a cosine
        similarity in the open interval (-1, 1): fixed here for good, every
        search uses it (a bad one is refused before anything is written).
        ``strategy``, ``n1``, ``expected_size`` and ``memory_budget`` choose
        the similarity strategy as in :meth:`Client.generate`; the memory
        budget (bytes) is also the server's for the returned index, and
        ``backend`` where it searches (see :meth:`__init__`).

        ``payload_width`` (0 to 64; 0: none) int16 values are stored with
        every record (:meth:`add` ``payloads=``) and fetched by
        ``search(mode="payload")``; a width above 0 makes a payload key set
        (one more level). ``rule`` is how scores meet delta, fixed here
        too: ``">"`` (strict) or ``">="``, exact ties decided by the rule and
        the guard band wholly on the side it includes; ``None`` (default):
        ``>=`` with the guard band on both sides of delta (see
        :meth:`Enroller.create_index <encmatch.Enroller.create_index>`).
        """
        delta = check_delta(delta)
        width = check_payload_width(payload_width)
        rule = check_rule(rule)
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        with Client.generate(
            path / cls.KEYS, preset=preset, kappa=kappa, dim=dim, strategy=strategy, n1=n1,
            expected_size=expected_size, memory_budget=memory_budget, payload=width > 0,
        ) as client:
            Enroller(client.server_key_dir).create_index(path / cls.INDEX, delta, payload_width=width, rule=rule)
        return cls(path, memory_budget=memory_budget, backend=backend)

    # ---- properties -----------------------------------------------------

    @property
    def key_dir(self) -> Path:
        """The key directory (``path/keys``)."""
        return self.path / self.KEYS

    @property
    def index_dir(self) -> Path:
        """The encrypted index directory (``path/index``)."""
        return self.path / self.INDEX

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self.client.dim

    @property
    def delta(self) -> float:
        """Match threshold (cosine similarity)."""
        return Manifest.of(self.manifest).delta

    @property
    def payload_width(self) -> int:
        """int16 payload values per record (0: the index holds no payloads)."""
        return Manifest.of(self.manifest).payload_width

    @property
    def rule(self) -> str:
        """How a score meets delta: ``">="`` or ``">"`` (fixed at creation)."""
        return Manifest.of(self.manifest).rule

    @property
    def guard_band(self) -> tuple[float, float] | None:
        """``(low, high)``: the scores whose answers may differ from the rule (the comparator's guard band,
        moved to the included side of delta by a rule), as the core reports it; ``None`` if it does not."""
        band = self.manifest.get("guard_band")
        return (float(band[0]), float(band[1])) if band else None

    @property
    def params(self) -> dict:
        """Parameter description of the key set (see :func:`encmatch.describe`)."""
        return self.client.params

    @property
    def strategy(self) -> str:
        """Similarity strategy the index and its keys were made for."""
        return Manifest.of(self.manifest).strategy[0]

    @property
    def n1(self) -> int:
        """Baby-step size of the strategy (``l`` for ``dg``)."""
        return Manifest.of(self.manifest).strategy[1]

    @property
    def streamed(self) -> bool | None:
        """Whether the open server streams groups from disk (``None`` until a search opened it)."""
        return None if self._server is None else self._server.streamed

    @property
    def labels(self) -> list[str] | None:
        """Labels of every position (``""`` where none was given), or ``None`` if nothing is labelled.

        Opened here from the sealed files in ``index/labels/`` with the key
        holder's label key; a tampered or foreign file raises.
        """
        return self.client.open_labels(self.manifest, labels_mod.local_files(self.index_dir))

    def __len__(self) -> int:
        """Number of enrolled vectors."""
        return Manifest.of(self.manifest).total

    # ---- operations -----------------------------------------------------

    def add(self, vectors: Any, labels: Sequence[Any] | None = None, payloads: Any = None, *,
            progress: bool | None = None) -> EnrollSummary:
        """Encrypt and append ``vectors`` (``[n, dim]`` or one ``[dim]``); returns what was done.

        ``payloads`` (``[n, W]`` integers within int16, ``[W]`` for one
        vector) is required by an index with payloads (:attr:`payload_width`
        W > 0) and refused by one without.

        The vectors first fill the last group while it has room (it is
        rewritten whole, atomically), then start new groups; the summary
        says which (an :class:`~encmatch.EnrollSummary`: ``added``,
        ``group_writes``, ``report``: ``"filled group 0 (3 entries, now 243
        of 16,384)"``; see :meth:`Enroller.enroll <encmatch.Enroller.enroll>`).
        """
        self._drop_server()
        try:
            # The index owns its keys: enroll with the secret key (seeded, half the bytes).
            return Enroller(self.client.server_key_dir, owner_key_dir=self.key_dir).enroll(
                self.index_dir, vectors, labels, progress=progress, payloads=payloads
            )
        finally:
            self.manifest = index_info(self.index_dir)

    def search(
        self, queries: Any, mode: str = "identification", *, progress: bool | None = None,
        bound: int | None = None, strict: bool = True,
    ) -> Result | list[Result]:
        """Search one query (``[dim]``: returns one result) or several (``[q, dim]``: a list).

        ``mode="membership"`` gives :class:`MembershipResult` (``count``,
        ``enrolled``); ``mode="identification"`` gives
        :class:`IdentificationResult` (``positions``, ``labels``);
        ``mode="payload"`` (an index with payloads) gives
        :class:`PayloadResult`: ``count``, ``payloads`` int16 ``[k, W]``
        sorted by payload then position, ``positions`` and ``labels`` of
        those rows. ``bound`` (1 to 4096, default 32) is the payload
        search's public bound on the number of matches: the result's size
        depends only on it. An answer that is not complete (more matches
        than ``bound``, or matches that could not be separated) raises
        :class:`~encmatch.errors.PayloadIncomplete` (its ``result`` holds
        what was decoded), or with ``strict=False`` is returned with
        ``complete`` False.
        """
        bound = check_search(mode, bound)
        payload = mode == PAYLOAD
        if payload and self.payload_width == 0:
            raise InvalidArgument("this index holds no payloads (created with payload_width 0): mode 'payload' "
                                  "needs an index created with payload_width > 0")
        single = np.ndim(queries) == 1
        qs = _core.as_matrix(queries, self.dim, "queries")
        out: list[Result] = []
        if len(self) == 0:  # nothing enrolled: nothing can match (the core refuses empty indexes)
            if payload:
                out = [PayloadResult(count=0, positions=np.zeros(0, np.int64),
                                     payloads=np.zeros((0, self.payload_width), np.int16), bound=bound,
                                     width=self.payload_width) for _ in qs]
            else:
                out = [make_result(mode, count=0, positions=[]) for _ in qs]
            return out[0] if single else out
        server = self._open_server()
        labels = self.labels
        show = progress if progress is not None else len(qs) > 8
        extra = {"bound": bound} if payload else {}
        # A streamed core server answers several queries per pass over the gallery.
        batch = _BATCH if isinstance(server, Server) and server.streamed else 1
        bar = progress_bar(total=len(qs), desc=mode, unit="query", show=bool(show))
        try:
            for first in range(0, len(qs), batch):
                framed = [self.client.encrypt_query(q) for q in qs[first:first + batch]]
                results = (server.search_batch(framed, mode, **extra) if batch > 1
                           else [server.search(framed[0], mode, **extra)])
                for i, result in enumerate(results, start=first):
                    res = self.client.decrypt(result, delta=self.delta, labels=labels)
                    if strict:
                        require_complete(res, None if single else i)
                    out.append(res)
                bar.update(len(results))
        finally:
            bar.close()
        return out[0] if single else out

    def info(self) -> dict:
        """The index manifest (parameters, threshold, counts, groups; labels are not in it)."""
        return dict(self.manifest)

    # ---- lifetime -------------------------------------------------------

    def _open_server(self) -> SearchBackend:
        """The server handle over the current index (opened lazily, reopened after add())."""
        if self._server is None:
            opener = Server if self.backend is None else self.backend.open
            self._server = opener(self.index_dir, self.client.server_key_dir, self.memory_budget)
        return self._server

    def _drop_server(self) -> None:
        """Close the cached server handle (the index is about to change)."""
        if self._server is not None:
            server, self._server = self._server, None
            server.close()

    def close(self) -> None:
        """Release the loaded index and the key set (idempotent)."""
        try:
            self._drop_server()
        finally:
            self.client.close()

    def __enter__(self) -> "EncryptedIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"EncryptedIndex({str(self.path)!r}, n={len(self)}, dim={self.dim}, "
            f"preset={self.params.get('preset')!r}, delta={self.delta}, strategy={self.strategy!r}, n1={self.n1})"
        )
