"""The server (:class:`Server`): loads an index (or a shard of its groups) and answers encrypted queries
with encrypted results; it never sees a vector or a score. :func:`merge_results` combines shards'.
"""

from __future__ import annotations

import warnings
from typing import Protocol, Sequence, runtime_checkable

from . import _core
from .errors import Internal, InvalidArgument, MemoryBudgetWarning
from .results import check_search
from ._util.paths import PathLike, require_dir
from .manifest import Manifest
from .params import non_negative_int, memory_budget_bytes

#: The most queries :meth:`Server.search_batch` takes in one call (the core's engine.MaxBatch).
MAX_BATCH = 64


__all__ = ["Server", "SearchBackend", "merge_results"]


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
        self.index_dir = require_dir(index_dir, "index directory")
        self.server_key_dir = require_dir(server_key_dir, "server key directory")
        self.memory_budget = memory_budget_bytes(memory_budget)
        args: dict = {"index_dir": self.index_dir, "server_key_dir": self.server_key_dir,
                      "memory_budget": self.memory_budget}
        if groups is not None:
            args["groups"] = [non_negative_int(g, "group") for g in groups]
        res, _ = _core.call("server_open", args)
        self._handle = _core.Handle(self, res["handle"])
        self.manifest: dict = res.get("manifest", {})
        self.open_seconds = float(res.get("seconds", 0.0))
        #: True when the groups are streamed from disk for each query (they did not fit the budget).
        self.streamed = bool(res.get("streamed", False))
        #: What the operator should know (each also issued as a :class:`MemoryBudgetWarning`): a budget
        #: below what even streaming needs.
        self.warnings: list[str] = list(res.get("warnings") or [])
        for text in self.warnings:
            warnings.warn(text, MemoryBudgetWarning, stacklevel=2)
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
        bound = check_search(mode, bound)
        if not isinstance(query, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"query must be bytes, not {type(query).__name__}")
        args: dict = {"handle": self._handle.get(), "mode": mode}
        if bound is not None:
            args["bound"] = bound
        if signing_key is not None:
            args.update(signing_key=signing_key, index=index or "", generation=int(generation))
        elif index is not None or generation:
            raise InvalidArgument("index and generation name a signed search: give signing_key too")
        res, out = _core.call("search", args, query)
        self.last_search = res
        if out is None:
            raise Internal("search returned no bytes")
        return out

    def search_batch(self, queries: Sequence[bytes], mode: str = "identification", *,
                     bound: int | None = None) -> list[bytes]:
        """Answer several framed queries in one ``mode``: the list of what
        :meth:`search` returns for each (unsigned searches). A server that
        streams its groups from disk (``streamed``) answers them in as few
        passes over the gallery as its memory budget allows, each group read
        and its seeded masks regenerated once per pass; one that holds them
        in memory answers them one after the other. 1 to 64 queries;
        :attr:`last_search` covers the batch."""
        bound = check_search(mode, bound)
        queries = list(queries)
        if not 1 <= len(queries) <= MAX_BATCH:
            raise InvalidArgument(f"a batch holds 1 to {MAX_BATCH} queries, not {len(queries)}")
        args: dict = {"handle": self._handle.get(), "mode": mode}
        if bound is not None:
            args["bound"] = bound
        res, out = _core.call("search_batch", args, _frame(queries, "a query"))
        self.last_search = res
        if out is None:
            raise Internal("search_batch returned no bytes")
        parts, view = [], memoryview(out)
        while len(view):
            n = int.from_bytes(view[:8], "little")
            parts.append(bytes(view[8:8 + n]))
            view = view[8 + n:]
        if len(parts) != len(queries):
            raise Internal(f"search_batch returned {len(parts)} results for {len(queries)} queries")
        return parts

    def wait_comparators(self) -> int:
        """Wait for the comparator programs this server records in the
        background after its first search of each kind, and return how many
        are ready. The core's comparator is a sequential polynomial
        evaluation; once its program is recorded, every search runs it on
        all cores (the same result bytes). Searches never wait for it: this
        is for benchmarks, which time a steady state."""
        res, _ = _core.call("wait_comparators", {"handle": self._handle.get()})
        return int(res["ready"])

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
        name, n1 = Manifest.of(self.manifest).strategy
        return (
            f"Server({str(self.index_dir)!r}, entries={Manifest.of(self.manifest).total}, strategy={name!r}, "
            f"n1={n1}, streamed={self.streamed})"
        )


@runtime_checkable
class SearchBackend(Protocol):
    """What answers encrypted queries over an index: :class:`Server` (this process), the Ray backend's
    ``RayServer``, the GPU engine's ``GpuServer`` and a service's index (``RemoteBackend``). Each takes
    framed query bytes and returns framed (encrypted) result bytes, which only the key holder decrypts
    (:meth:`encmatch.Client.decrypt`)."""

    #: The index's manifest as the backend loaded it.
    manifest: dict
    #: Whether groups are read from disk for each query.
    streamed: bool
    #: Timings of the last search.
    last_search: dict

    def search(self, query: bytes, mode: str = "identification", *, bound: int | None = None) -> bytes:
        """Answer one framed query in ``mode`` at the index's threshold."""
        ...

    def close(self) -> None:
        """Release what the backend holds (idempotent)."""
        ...


def merge_results(index_dir: PathLike, parts: Sequence[bytes]) -> tuple[bytes, dict]:
    """Merge the results of disjoint shards of the index in ``index_dir`` for one query.

    Membership counts are added, identification groups concatenated (the
    core does it on ciphertexts; nothing is decrypted). Returns the merged
    result and the core's summary (``complete`` tells whether the parts
    cover the whole gallery; a client refuses to decrypt one that does not).
    """
    res, out = _core.call("merge_results", {"index_dir": require_dir(index_dir, "index directory")},
                          _frame(parts, "a result part"))
    if out is None:
        raise Internal("merge_results returned no bytes")
    return out, res


def _frame(parts: Sequence[bytes], what: str) -> bytes:
    """``parts`` as the core's length-prefixed chunks (uint64 LE length, then the bytes); ``what`` names
    a part in the error when one is not bytes."""
    buf = bytearray()
    for part in parts:
        if not isinstance(part, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"{what} must be bytes, not {type(part).__name__}")
        buf += len(part).to_bytes(8, "little")
        buf += part
    return bytes(buf)
