"""Loaded indexes and the bounded queue of searches.

The core uses every core for one search and its search handles are not
documented as safe for concurrent calls, so the service runs the searches
of one index one at a time (a lock per loaded index) on a small pool of
worker threads (``workers``, default 1). In front of them is a bounded
admission count: at most ``max_pending`` searches are queued or running;
one more is answered at once with :class:`~encmatch.service.errors.Busy`
(HTTP 503, ``Retry-After``) instead of piling up. A search that has not
started within ``query_timeout`` seconds is dropped without running, and
its caller gets :class:`~encmatch.service.errors.Timeout`, as does one whose
result is later than that (the core cannot stop a running search; its
result is discarded).

A commit's new files are first loaded by the core in a child process
(:func:`check_in_subprocess`): a decoder that aborts the Go runtime (an
out-of-memory ``fatal error`` cannot be recovered by a panic guard) takes
down that child, not the service, and the commit is refused.

Shutdown (:meth:`Scheduler.shutdown`, after the HTTP server's graceful
period in which requests in flight finish): new searches are refused with
``shutting_down``, what has not started fails cleanly, and the handles are
closed once the running search returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..server import Server
from ..manifest import index_info
from ..errors import Corrupt, EncmatchError, InvalidArgument, NotFound, error_for
from ..results import check_mode
from ..threshold import bind_search
from .errors import Busy, Conflict, ShuttingDown, Timeout

__all__ = ["Scheduler", "Loaded", "open_generation", "check_in_subprocess", "query_size_bounds"]


@dataclass
class Loaded:
    """One index as the scheduler holds it: its core server (``None`` for an empty index) and its lock."""

    generation: int
    count: int
    key_id: str
    fingerprint: str
    server: Server | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    deleted: bool = False
    #: The index's threshold (every search uses it; a request naming another is refused).
    delta: float = float("nan")
    #: Smallest and largest byte length of a query for the index's parameters (0, 0: unknown).
    query_bytes: tuple[int, int] = (0, 0)
    #: The generation's server key directory (a signed search names its key set from it).
    keys_dir: Path | None = None


class Scheduler:
    """Serialises the searches of each index behind a bounded admission queue."""

    def __init__(self, *, max_pending: int = 16, workers: int = 1, query_timeout: float = 300.0):
        """``max_pending`` searches may be queued or running at once, on ``workers`` threads,
        each answered within ``query_timeout`` seconds or failed."""
        if max_pending < 1 or workers < 1 or query_timeout <= 0:
            raise InvalidArgument("max_pending and workers must be >= 1, query_timeout > 0")
        self.max_pending = max_pending
        self.workers = workers
        self.query_timeout = query_timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="encmatch-search")
        self._guard = threading.Lock()
        self._pending = 0
        self._running = 0
        self._served = 0
        self._refused = 0
        self._closing = False
        self._stopped = False
        self._loaded: dict[tuple[str, str], Loaded] = {}

    # ---- indexes -------------------------------------------------------------

    def install(self, key: tuple[str, str], entry: Loaded) -> None:
        """Make ``entry`` the one that answers for index ``key``.

        Waits for a running search of the previous generation to finish, then closes it.
        """
        with self._guard:
            old = self._loaded.get(key)
            self._loaded[key] = entry
        if old is not None:
            self._retire(old)

    @staticmethod
    def _retire(old: Loaded) -> None:
        """Close a replaced or removed index once its running search (if any) returns."""
        with old.lock:
            old.deleted = True
            if old.server is not None:
                old.server.close()

    def remove(self, key: tuple[str, str]) -> None:
        """Forget index ``key``: queued searches of it fail as not found; waits for a running one."""
        with self._guard:
            old = self._loaded.pop(key, None)
        if old is not None:
            self._retire(old)

    def loaded(self, key: tuple[str, str]) -> Loaded | None:
        """The loaded index ``key``, if any."""
        with self._guard:
            return self._loaded.get(key)

    # ---- searches --------------------------------------------------------------

    def refuse_if_full(self) -> None:
        """Raise Busy (or ShuttingDown) now if a new search would be refused: checked before a
        query's body is read, so a full queue costs no body."""
        with self._guard:
            self._admit_locked()

    def _admit_locked(self) -> None:
        """Raise ShuttingDown or Busy (counted) if a search cannot be queued now; the caller holds the guard."""
        if self._closing:
            raise ShuttingDown("the service is shutting down")
        if self._pending >= self.max_pending:
            self._refused += 1
            raise Busy(f"busy: {self._pending} searches queued or running (limit {self.max_pending}); retry later")

    def stats(self) -> dict:
        """Queue and pool state: pending (queued + running), running, capacity, served, refused as busy."""
        with self._guard:
            return {"pending": self._pending, "running": self._running, "capacity": self.max_pending,
                    "workers": self.workers, "served": self._served, "refused_busy": self._refused,
                    "indexes_loaded": len(self._loaded), "closing": self._closing}

    async def search(self, key: tuple[str, str], query: bytes, mode: str,
                     signing_key: Path | None = None, *, bound: int | None = None) -> tuple[bytes, dict]:
        """Run one search of index ``key``; returns the result bytes and timings.

        With ``signing_key`` (the service's ``server-signing.key``) the result
        comes back bound to its query and signed, as threshold decryptors
        need it (:func:`encmatch.threshold.bind_search`; ``index`` the
        index id, ``generation`` the generation searched). ``bound``: the payload mode's public
        bound on the matches (``None``: the core's default).

        Raises Busy when the queue is full, ShuttingDown while stopping,
        Timeout past ``query_timeout``, NotFound if the index is not loaded
        (or is deleted meanwhile), Conflict for an empty index.
        """
        check_mode(mode)
        with self._guard:
            self._admit_locked()
            self._pending += 1
        enqueued = time.monotonic()
        try:
            fut = self._pool.submit(self._run, key, query, mode, enqueued, signing_key, bound)
        except RuntimeError:  # the pool is shut down
            self._done(None)
            raise ShuttingDown("the service is shutting down") from None
        fut.add_done_callback(self._done)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), self.query_timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"the search did not finish within {self.query_timeout:g} s") from None

    def _done(self, _fut: object) -> None:
        """A search left the queue (answered, failed or dropped)."""
        with self._guard:
            self._pending -= 1

    def _run(self, key: tuple[str, str], query: bytes, mode: str, enqueued: float,
             signing_key: Path | None, bound: int | None = None) -> tuple[bytes, dict]:
        """Worker thread: run one search under the index's lock, unless it is too late; sign it with
        ``signing_key`` when given."""
        waited = time.monotonic() - enqueued
        if self._stopped:
            raise ShuttingDown("the service stopped before this search started")
        if waited > self.query_timeout:
            raise Timeout(f"the search waited {waited:.1f} s in the queue; dropped")
        while True:
            entry = self.loaded(key)
            if entry is None:
                raise NotFound(f"no index {key[1]!r}")
            with entry.lock:
                if entry.deleted:  # replaced by a new generation meanwhile: run on that one
                    continue
                if entry.server is None:
                    raise Conflict(f"index {key[1]!r} is empty")
                with self._guard:
                    self._running += 1
                try:
                    t0 = time.perf_counter()
                    out = entry.server.search(query, mode, **({"bound": bound} if mode == "payload" else {}))
                    seconds = time.perf_counter() - t0
                finally:
                    with self._guard:
                        self._running -= 1
                        self._served += 1
                core = dict(entry.server.last_search)
                break
        if signing_key is not None:  # this service computed out for query: only then may it sign
            out, _ = bind_search(entry.keys_dir, query, out, signing_key=signing_key, index=key[1],
                                 generation=entry.generation)
        return out, {"queue_seconds": waited, "search_seconds": seconds, "generation": entry.generation,
                     "core_seconds": core.get("seconds"), "groups": core.get("groups")}

    # ---- shutdown ----------------------------------------------------------------

    def shutdown(self) -> dict:
        """Refuse new searches, fail those that have not started, wait for the running one, close every
        handle. Returns how many searches were still queued or running.

        The HTTP server calls this after its own graceful period, in which
        the requests in flight (and so their searches) could finish.
        """
        with self._guard:
            self._closing = True
            left = self._pending
        self._stopped = True  # searches that have not started fail from here on
        self._pool.shutdown(wait=True, cancel_futures=False)
        with self._guard:
            loaded, self._loaded = list(self._loaded.values()), {}
        for entry in loaded:
            self._retire(entry)
        return {"pending_at_shutdown": left}


def open_generation(gen_dir: Path, keys_dir: Path, memory_budget: int, backend: Any = None) -> Loaded:
    """Load a committed generation, checking it whole (manifest, keys, every group).

    It is loaded in this process, or on Ray actors with ``backend`` (an
    :class:`encmatch.cluster.RayBackend`). An empty index is checked by its
    manifest alone: the core cannot search one.
    """
    manifest = index_info(gen_dir)
    count = int(manifest.get("count", 0))
    opener = Server if backend is None else backend.open
    server = opener(gen_dir, keys_dir, memory_budget) if count else None
    return Loaded(0, count, str(manifest["key_id"]), str(manifest["fingerprint"]), server,
                  delta=float(manifest["delta"]), query_bytes=query_size_bounds(manifest.get("params") or {}),
                  keys_dir=keys_dir)


#: Bytes a query frame adds to its ciphertext's coefficients: the frame header (kind, fingerprint and
#: key id, at most a few hundred bytes) and checksum, and the ciphertext's own metadata.
_QUERY_SLACK = 4096


def query_size_bounds(params: dict) -> tuple[int, int]:
    """The smallest and largest byte length of a query for parameters ``params`` (the core's
    ``describe`` output, or a manifest's ``params``); ``(0, 0)`` when they do not say.

    A query is one fresh ciphertext of degree 1 at the top level: two
    polynomials of ``2^log_n`` coefficients in each of the ``len(log_q)``
    moduli, 8 bytes each, plus its metadata and the frame (``_QUERY_SLACK``).
    The service checks a search's Content-Length against these bounds
    before it reads the body; the core checks the exact layout.
    """
    try:
        coeffs = 2 * (1 << int(params["log_n"])) * len(params["log_q"]) * 8
    except (KeyError, TypeError, ValueError):
        return (0, 0)
    return (coeffs, coeffs + _QUERY_SLACK)


def check_in_subprocess(gen_dir: Path, keys_dir: Path, memory_budget: int, groups: list[int] | None,
                        timeout: float = 900.0) -> dict:
    """Have the core load a prepared generation (its keys and the groups at positions ``groups``;
    every group when ``None``) in a child process, and report what it said.

    Returns the child's summary (``seconds``) when the core loads the
    files. Raises the core's own error (Corrupt, Mismatch...) when it
    refuses them, and Corrupt when the child dies (a Go ``fatal error``
    such as an allocation the machine cannot make, a signal) or exceeds
    ``timeout`` seconds: the service itself never runs a decoder on new
    uploads before this returned.
    """
    cmd = [sys.executable, "-m", "encmatch.service.scheduler", str(gen_dir), str(keys_dir), str(int(memory_budget)),
           json.dumps(groups)]
    env = dict(os.environ, GOTRACEBACK="none")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise Corrupt(f"the core did not load the uploaded files within {timeout:g} s") from None
    seconds = time.perf_counter() - t0
    try:
        answer = json.loads(proc.stdout.decode(errors="replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        answer = None
    if proc.returncode == 0 and isinstance(answer, dict) and answer.get("ok"):
        return {"seconds": seconds}
    if proc.returncode == 1 and isinstance(answer, dict) and "kind" in answer:
        raise error_for(str(answer["kind"]), str(answer.get("error", "refused")))
    err = proc.stderr.decode(errors="replace").strip().splitlines()
    cause = next((line for line in err if "fatal error" in line or "panic" in line), err[-1] if err else "")
    raise Corrupt(f"the core aborted while loading the uploaded files (exit status {proc.returncode}"
                  + (f": {cause[:300]}" if cause else "") + ")")


def _check_main(argv: list[str]) -> int:
    """Child of :func:`check_in_subprocess`: load ``GEN KEYS BUDGET GROUPS_JSON`` in the core, print JSON."""
    gen_dir, keys_dir, budget, groups = argv
    picked = json.loads(groups)
    try:
        Server(gen_dir, keys_dir, int(budget), groups=picked).close()
    except EncmatchError as exc:
        print(json.dumps({"kind": exc.kind, "error": exc.message}), flush=True)
        return 1
    print(json.dumps({"ok": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_check_main(sys.argv[1:]))
