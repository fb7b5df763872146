"""Search an encrypted index sharded over Ray actors.

A group of the index (16,384 vectors at N = 2^15) is the unit of work
(papers/003's "shard"). :class:`RayBackend` places the groups on Ray
actors, ``shards_per_actor`` groups each (or spread over ``workers``
actors), each actor asking for ``num_cpus`` CPUs and optionally a fraction
of a GPU so that several shards share one accelerator. The evaluation keys
travel once through Ray's object store (every actor materialises them in a
private temporary directory); every actor reads its groups from the index
directory, which must be on storage all nodes see. A query is put in the
object store once and searched by every actor; the partial results are
merged by the core (:func:`encmatch.server.merge_results`: counts added for
membership, groups concatenated for identification) into one result the
key holder decrypts as if it came from one server.

Faults: an actor that dies is restarted by Ray (``max_restarts``), reloads
its groups from the index and its keys from the object store, and the
query is retried (``task_retries``). A shard that still cannot be served
fails the query with :class:`~encmatch.errors.ShardUnavailable` naming its
gallery range; the client refuses to decrypt a result that misses any
entry, so a partial answer can never pass for a complete one.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .._util.extras import require

require("ray")
import ray  # noqa: E402
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

from .. import _core
from ..server import Server, merge_results
from ..manifest import index_info
from ..params import memory_budget_bytes, set_threads
from ..errors import EncmatchError, Internal, InvalidArgument, ShardUnavailable
from ..results import check_search

__all__ = ["RayBackend", "RayServer", "ensure_ray", "shard_groups"]

#: Prefix of the actors' private key directories (one per actor process).
_KEY_DIR_PREFIX = "encmatch-keys-"


def ensure_ray(address: str | None = None) -> None:
    """Connect to the Ray cluster at ``address``, or start a local one (no address); no-op if connected."""
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True}
    if address:
        kwargs["address"] = address
    ray.init(**kwargs)


def shard_groups(groups: int, shards_per_actor: int = 1, workers: int | None = None) -> list[list[int]]:
    """Split group positions ``0..groups-1`` into consecutive runs, one per actor.

    With ``workers``, the groups are spread as evenly as possible over that
    many actors (fewer if there are fewer groups); otherwise each actor gets
    ``shards_per_actor`` groups (the last one the rest).
    """
    if groups < 1:
        raise InvalidArgument("the index has no group to search")
    if workers is not None:
        if workers < 1:
            raise InvalidArgument(f"workers must be >= 1, got {workers}")
        n = min(workers, groups)
        sizes = [groups // n + (1 if i < groups % n else 0) for i in range(n)]
    else:
        if shards_per_actor < 1:
            raise InvalidArgument(f"shards_per_actor must be >= 1, got {shards_per_actor}")
        sizes = [min(shards_per_actor, groups - start) for start in range(0, groups, shards_per_actor)]
    out, start = [], 0
    for size in sizes:
        out.append(list(range(start, start + size)))
        start += size
    return out


def _read_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, by path relative to it."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _sweep_stale_key_dirs() -> None:
    """Remove key directories left by actor processes that died (their pid is gone)."""
    for d in Path(tempfile.gettempdir()).glob(_KEY_DIR_PREFIX + "*"):
        pid = d.name[len(_KEY_DIR_PREFIX):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)


class ShardWorker:
    """A Ray actor holding some groups of an index (a core :class:`Server` opened on them)."""

    def __init__(self, index_dir: str, keys: dict[str, bytes], groups: list[int], memory_budget: int,
                 threads: int, engine: str = "cpu"):
        """Write ``keys`` to a private directory and open the groups ``groups`` of ``index_dir``.

        ``threads`` bounds the core's threads to the CPUs Ray gave this
        actor (each actor is a process of its own). ``engine`` ``"gpu"``
        searches with :class:`encmatch.gpu.GpuServer` on the GPU Ray gave
        the actor (its groups held in GPU memory), ``"cpu"`` with the core.
        """
        set_threads(threads)
        _sweep_stale_key_dirs()
        self._key_dir = Path(tempfile.mkdtemp(prefix=f"{_KEY_DIR_PREFIX}{os.getpid()}-"))
        try:
            for name, data in keys.items():
                path = self._key_dir / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            t0 = time.perf_counter()
            if engine == "gpu":
                from ..gpu import GpuServer

                self._server = GpuServer(index_dir, self._key_dir, groups=groups, device="cuda")
            else:
                self._server = Server(index_dir, self._key_dir, memory_budget, groups=groups)
            self._load_seconds = time.perf_counter() - t0
        except BaseException:
            shutil.rmtree(self._key_dir, ignore_errors=True)
            raise
        self._groups = groups

    def info(self) -> dict:
        """This actor's process, groups, threads, GPUs, load time and whether it streams its groups."""
        return {"pid": os.getpid(), "groups": self._groups, "streamed": self._server.streamed,
                "engine": "gpu" if hasattr(self._server, "device") else "cpu",
                "threads": set_threads(0)["threads"], "gpus": [str(g) for g in ray.get_gpu_ids()],
                "load_seconds": self._load_seconds, "node": ray.get_runtime_context().get_node_id()}

    def search(self, query: bytes, mode: str, bound: int | None = None) -> tuple[bytes, dict]:
        """Search this actor's groups; returns the partial (encrypted) result and the core's timings."""
        out = self._server.search(query, mode, bound=bound)
        return out, dict(self._server.last_search)

    def close(self) -> None:
        """Release the groups and delete the private key directory."""
        self._server.close()
        shutil.rmtree(self._key_dir, ignore_errors=True)


@dataclass
class RayBackend:
    """How to scale an index out on Ray; :meth:`open` returns a :class:`RayServer`.

    ``address``: the Ray cluster (``None``: the one this process is
    connected to, or a new local one). ``shards_per_actor`` groups per actor,
    or ``workers`` actors sharing the groups evenly. ``num_cpus`` /
    ``num_gpus`` are each actor's Ray resources (fractions allowed; the core
    uses ``ceil(num_cpus)`` threads). ``max_restarts`` / ``task_retries``:
    how often a dead actor is restarted and its search retried.
    ``timeout``: seconds a search may take (``None``: no limit).
    ``engine``: ``"cpu"`` (the core) or ``"gpu"`` (:mod:`encmatch.gpu`,
    which needs ``num_gpus`` > 0: a fraction puts several shards on one GPU;
    membership and identification only). ``placement_wait``: seconds to wait for the cluster to free the CPUs
    and GPUs the actors need (another index's actors being stopped) before
    refusing the layout. ``spread``: place the actors on as many nodes as
    possible (Ray's SPREAD scheduling) instead of filling the driver's node
    first, so that one lost node takes as few shards with it as it can.
    ``recovery_wait``: seconds a search keeps resending a shard's call
    while its actor is unreachable (a lost node, until Ray declares it dead
    and restarts the actor on another node; Ray's health checks take about
    15 s by default).
    """

    address: str | None = None
    shards_per_actor: int = 1
    workers: int | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    max_restarts: int = 3
    task_retries: int = 2
    timeout: float | None = None
    placement_wait: float = 30.0
    spread: bool = False
    recovery_wait: float = 120.0
    engine: str = "cpu"

    def __post_init__(self) -> None:
        if self.engine not in ("cpu", "gpu"):
            raise InvalidArgument(f"engine must be 'cpu' or 'gpu', got {self.engine!r}")
        if self.engine == "gpu" and self.num_gpus <= 0:
            raise InvalidArgument("the GPU engine needs num_gpus > 0 per actor (a fraction shares a GPU)")
        if self.num_cpus <= 0 or self.num_gpus < 0:
            raise InvalidArgument(f"num_cpus must be > 0 and num_gpus >= 0, got {self.num_cpus}, {self.num_gpus}")
        if self.max_restarts < 0 or self.task_retries < 0:
            raise InvalidArgument("max_restarts and task_retries must be >= 0")
        if not self.recovery_wait >= 0:
            raise InvalidArgument(f"recovery_wait must be >= 0 seconds, got {self.recovery_wait}")

    def open(self, index_dir: os.PathLike | str, server_key_dir: os.PathLike | str,
             memory_budget: int | None = None) -> "RayServer":
        """Place the groups of ``index_dir`` on actors (``memory_budget``: each actor's, in bytes)."""
        return RayServer(index_dir, server_key_dir, memory_budget, backend=self)


class RayServer:
    """An index searched by Ray actors; the same interface as :class:`encmatch.Server`.

    ``search`` returns one merged, encrypted result; ``manifest``,
    ``streamed`` and ``last_search`` mean what they mean for a
    :class:`~encmatch.Server`. Close it to stop the actors.
    """

    def __init__(self, index_dir: os.PathLike | str, server_key_dir: os.PathLike | str,
                 memory_budget: int | None = None, *, backend: RayBackend | None = None):
        """Start the actors and wait until every one has loaded its groups (ShardUnavailable otherwise)."""
        self.backend = backend or RayBackend()
        self.index_dir = Path(index_dir).resolve()
        self.manifest: dict = index_info(self.index_dir)
        self.memory_budget = memory_budget_bytes(memory_budget)
        self.layout = shard_groups(len(self.manifest.get("groups") or []), self.backend.shards_per_actor,
                                   self.backend.workers)
        self.last_search: dict = {}
        _core.call("check_keys", {"index_dir": self.index_dir, "server_key_dir": Path(server_key_dir)})
        ensure_ray(self.backend.address)
        self._check_resources()
        self._keys = ray.put(_read_tree(Path(server_key_dir)))
        worker = ray.remote(ShardWorker).options(
            num_cpus=self.backend.num_cpus, num_gpus=self.backend.num_gpus,
            max_restarts=self.backend.max_restarts, max_task_retries=self.backend.task_retries,
            scheduling_strategy="SPREAD" if self.backend.spread else "DEFAULT",
        )
        threads = max(1, math.ceil(self.backend.num_cpus))
        self._actors = [worker.remote(str(self.index_dir), self._keys, groups, self.memory_budget, threads,
                                      self.backend.engine)
                        for groups in self.layout]
        try:
            self.actor_info = self._gather([a.info.remote() for a in self._actors])
        except BaseException:
            self.close()
            raise
        #: True when any actor streams its groups from disk for each query.
        self.streamed = any(i["streamed"] for i in self.actor_info)

    def _check_resources(self) -> None:
        """Refuse a layout the cluster cannot place: its actors would wait forever for CPUs or GPUs.

        Resources held by actors being stopped (a replaced index's) are
        waited for up to ``backend.placement_wait`` seconds.
        """
        need = {"CPU": len(self.layout) * self.backend.num_cpus, "GPU": len(self.layout) * self.backend.num_gpus}
        deadline = time.monotonic() + self.backend.placement_wait
        while True:
            total, free = ray.cluster_resources(), ray.available_resources()
            short = [name for name, n in need.items() if n > free.get(name, 0) + 1e-9]
            if not short:
                return
            if any(need[name] > total.get(name, 0) + 1e-9 for name in short) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        name = short[0]
        each = need[name] / len(self.layout)
        raise InvalidArgument(
            f"{len(self.layout)} actors x {each:g} {name}s need {need[name]:g} {name}s; the Ray cluster has "
            f"{total.get(name, 0):g}, {free.get(name, 0):g} free: use fewer actors (more shards per actor), fewer "
            f"{name}s per actor, or a larger cluster")

    def _span(self, shard: int) -> str:
        """Gallery range (entries) of shard ``shard``, for error messages."""
        groups = self.manifest.get("groups") or []
        picked = [groups[g] for g in self.layout[shard]]
        start = min(int(g["start"]) for g in picked)
        end = max(int(g["start"]) + int(g["count"]) for g in picked)
        return f"groups {self.layout[shard]} (entries {start}-{end - 1})"

    def _gather(self, refs: Sequence[Any], resubmit: Any = None) -> list[Any]:
        """``ray.get`` every shard's answer, turning an unservable shard into ShardUnavailable.

        ``resubmit(shard)`` (optional) sends a shard's call again: used when
        its actor is *temporarily* unavailable (its node was lost and Ray has
        not yet declared it dead and restarted the actor elsewhere, which
        takes the cluster's health-check period), for up to
        ``backend.recovery_wait`` seconds, or the search's ``timeout``.
        """
        out = []
        deadline = None if self.backend.timeout is None else time.monotonic() + self.backend.timeout
        for shard, ref in enumerate(refs):
            recover_until = time.monotonic() + self.backend.recovery_wait
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    out.append(ray.get(ref, timeout=left))
                    break
                except GetTimeoutError as exc:
                    raise ShardUnavailable(f"{self._span(shard)} did not answer within {self.backend.timeout} s") from exc
                except RayTaskError as exc:  # the core refused (bad query, corrupt group file...): keep its kind
                    cause = exc.cause
                    if isinstance(cause, EncmatchError):
                        raise type(cause)(f"{self._span(shard)}: {cause.message}", kind=cause.kind) from exc
                    raise ShardUnavailable(f"{self._span(shard)} failed: {cause!r}") from exc
                except ActorUnavailableError as exc:
                    now = time.monotonic()
                    if resubmit is None or now > recover_until or (deadline is not None and now > deadline):
                        raise ShardUnavailable(
                            f"{self._span(shard)} cannot be served: its worker stayed unreachable for "
                            f"{self.backend.recovery_wait:g} s ({_root_cause(exc)})") from exc
                    time.sleep(0.5)
                    ref = resubmit(shard)
                except RayActorError as exc:
                    raise ShardUnavailable(
                        f"{self._span(shard)} cannot be served: its worker died after "
                        f"{self.backend.max_restarts} restarts or could not load them ({_root_cause(exc)})"
                    ) from exc
        return out

    def search(self, query: bytes, mode: str = "identification", *, bound: int | None = None) -> bytes:
        """Broadcast ``query`` to every actor, then merge their results into one encrypted result.

        Payload results merge like counts: every shard lays its cells out for
        the whole index, and the core adds the shards' cell ciphertexts.
        """
        bound = check_search(mode, bound)
        if not isinstance(query, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"query must be bytes, not {type(query).__name__}")
        if not self._actors:
            raise Internal("the Ray server is closed")
        t0 = time.perf_counter()
        ref = ray.put(bytes(query))
        answers = self._gather([a.search.remote(ref, mode, bound) for a in self._actors],
                               resubmit=lambda shard: self._actors[shard].search.remote(ref, mode, bound))
        t1 = time.perf_counter()
        merged, info = merge_results(self.index_dir, [part for part, _ in answers])
        if not info.get("complete"):
            raise ShardUnavailable(f"the merged result covers {info.get('covered')} of {info.get('total')} entries")
        shards = [stats for _, stats in answers]
        self.last_search = {
            "mode": mode, "groups": sum(int(s.get("groups", 0)) for s in shards),
            "streamed": any(bool(s.get("streamed")) for s in shards), "seconds": time.perf_counter() - t0,
            "shards_seconds": t1 - t0, "merge_seconds": time.perf_counter() - t1,
            "shard_core_seconds": [float(s.get("seconds", 0.0)) for s in shards],
        }
        return merged

    def close(self) -> None:
        """Stop the actors (idempotent)."""
        actors, self._actors = getattr(self, "_actors", []), []
        for actor in actors:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead actor has nothing left to release
                pass
            ray.kill(actor, no_restart=True)

    @property
    def closed(self) -> bool:
        """True once closed."""
        return not self._actors

    def __enter__(self) -> "RayServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RayServer({str(self.index_dir)!r}, actors={len(self.layout)}, groups={sum(map(len, self.layout))})"


def _root_cause(exc: BaseException) -> str:
    """The innermost error of a Ray failure: the last "Type: message" line of its text."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        if ": " in line and not line.startswith(("File ", "^")):
            return line
    return lines[0] if lines else type(exc).__name__
