"""The GPU search engine: one shard of an index searched on a GPU.

:class:`GpuServer` keeps the shard contract of :class:`encmatch.server.Server`
(open a set of groups, search an encrypted query, return a partial result
in the core's format that :func:`encmatch.server.merge_results` combines),
and computes what the core's engine computes, operation for operation,
with the kernels of :mod:`encmatch.gpu.ring`: its results are the same
bytes as the CPU engine's. Keys, enrollment, decryption, threshold
decryption and the signing of threshold searches stay with the core
(Lattigo); the core converts the keys and
the diagonals into arrays once, when the shard is opened
(``offload_*`` methods of the C ABI), and each query and result per
request. Membership, identification and payload fetches are served; a
payload fetch's similarity and comparator run on the device, and the core
compacts its match bits with the groups' payload columns into the result's
cells (the payload columns stay in host memory).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import _core
from ..errors import InvalidArgument
from ..results import PAYLOAD, check_search
from ..threshold import bind_search
from .backend import get_backend
from .program import Program
from .ring import Ring

__all__ = ["GpuServer"]

_WIRE = np.dtype("<u8")

# Products accumulated per kernel launch: 64 products of residues below
# 2^61 fit in the kernels' 128-bit accumulators.
_CHUNK = 32


class GpuServer:
    """A shard of the index at ``index_dir`` on a device.

    ``groups`` are positions in the manifest (None: all); ``device`` is
    ``"cuda"``, ``"cpu"`` (the same kernels on the CPU, for tests) or
    ``"auto"``. With ``graphs`` (CUDA only) each kind of search is
    captured once as a CUDA graph and replayed (about 2,700 kernels per
    one-group search, launched by the GPU instead of by Python); a driver
    that refuses capture leaves the eager launches, with
    :attr:`graph_error` saying why."""

    def __init__(self, index_dir: os.PathLike | str, server_key_dir: os.PathLike | str,
                 groups: Sequence[int] | None = None, device: str = "auto", graphs: bool = True):
        start = time.perf_counter()
        args: dict[str, Any] = {"index_dir": str(index_dir), "server_key_dir": str(server_key_dir)}
        if groups is not None:
            args["groups"] = [int(g) for g in groups]
        self.server_key_dir = Path(server_key_dir)
        res, _ = _core.call("offload_open", args)
        self._handle = _core.Handle(self, res["handle"])
        self.manifest: dict = res["manifest"]
        desc = res["description"]
        self.description = desc
        self.backend = get_backend(device)
        self.device = self.backend.device
        self.ring = Ring(self.backend, desc)
        self.strategy, self.n1, self.l = desc["strategy"], int(desc["n1"]), int(desc["l"])
        self.groups = desc["groups"]
        self.level = int(desc["query_level"])
        self._galois = {int(k): int(v) for k, v in desc["galois"].items()}
        self._inner = [int(x) for x in desc["inner_sum"]]
        #: The conjugation's Galois element of a folded key set (0: not folded).
        self.conjugate = int(desc.get("conjugate", 0))
        extra = [self.conjugate] if self.conjugate else []
        self._load_keys([0] + sorted(set(self._galois.values()) | set(extra)))
        self._diags = [self._group(i) for i in range(len(self.groups))]
        spec, _ = _core.call("offload_program", {"handle": self._handle.get(), "mode": "identification"})
        #: The comparator's program (membership, identification).
        self.program = Program(self.ring, spec)
        #: The payload fetch's program (its bits at the payload scale; None without payloads).
        self.payload_program = None
        if int(self.manifest.get("payload_width", 0)):
            spec, _ = _core.call("offload_program", {"handle": self._handle.get(), "mode": "payload"})
            self.payload_program = Program(self.ring, spec)
        self.backend.synchronize()
        self.open_seconds = time.perf_counter() - start
        #: The groups are always held on the device (never streamed).
        self.streamed = False
        #: Timings of the last :meth:`search` (``mode, seconds, groups, device``...).
        self.last_search: dict = {}
        self.graphs = graphs and self.device == "cuda"
        #: Why graphs were turned off, if they were.
        self.graph_error = ""
        self._graphs: dict = {}
        self._graph_lock = threading.Lock()

    def _group(self, i: int) -> Any:
        """Served group i's diagonals on the device, copied in chunks."""
        r = self.level + 1
        out = self.backend.empty((self.l, 2, r, self.ring.n))
        for first in range(0, self.l, _CHUNK):
            count = min(_CHUNK, self.l - first)
            info, raw = _core.call("offload_group", {"handle": self._handle.get(), "group": i, "first": first, "count": count})
            if info["level"] != self.level:
                raise InvalidArgument(f"group {i} is stored at level {info['level']}, queries at {self.level}")
            out[first:first + count] = self.backend.put(np.frombuffer(raw, dtype=_WIRE).reshape(count, 2, r, self.ring.n))
        return out

    def _load_keys(self, elements: Sequence[int]) -> None:
        """The relinearisation key (element 0) and the Galois keys, in one
        stack on the device (:attr:`keys`), so that one launch can use
        several; :attr:`_keys` maps an element to its key in the stack,
        :attr:`_slot` to its position."""
        self.keys, self._keys, self._slot = None, {}, {}
        rows = self.ring.nq + self.ring.alpha
        for i, g in enumerate(elements):
            _, raw = _core.call("offload_key", {"handle": self._handle.get(), "galois": int(g)})
            key = np.frombuffer(raw, dtype=_WIRE).reshape(-1, 2, rows, self.ring.n)
            if self.keys is None:
                self.keys = self.backend.empty((len(elements),) + key.shape)
            self.keys[i] = self.backend.put(key)
            self._keys[g], self._slot[g] = self.keys[i], i

    def close(self) -> None:
        """Frees the core's plan and the device arrays (idempotent)."""
        self._handle.close()
        if self._graphs:
            self.release_graphs()
        self._diags, self._keys, self.keys = [], {}, None

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._handle.closed

    def __enter__(self) -> "GpuServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ search
    def search(self, query: bytes, mode: str = "identification", *, bound: int | None = None,
               signing_key: os.PathLike | str | None = None, index: str | None = None, generation: int = 0) -> bytes:
        """Answers one framed query at the index's threshold in mode
        ``membership``, ``identification`` or ``payload`` (an index with
        payloads; ``bound`` is the public bound on its matches, default the
        core's): the framed (partial, for a shard) encrypted result, as
        :meth:`encmatch.server.Server.search`; the timings go to
        :attr:`last_search`. With ``signing_key`` (a
        threshold key set's server key) the result comes back bound to its
        query and signed, as the CPU engine's (``index`` names the index,
        default its manifest's uid; ``generation`` its version)."""
        bound = check_search(mode, bound)
        if mode == PAYLOAD and self.payload_program is None:
            raise InvalidArgument("the index holds no payloads (it was created without a payload width): "
                                  "search it by membership or identification")
        if not isinstance(query, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"query must be bytes, not {type(query).__name__}")
        if signing_key is None and (index is not None or generation):
            raise InvalidArgument("index and generation name a signed search: give signing_key too")
        t0 = time.perf_counter()
        info, raw = _core.call("offload_query", {"handle": self._handle.get()}, query)
        q = np.frombuffer(raw, dtype=_WIRE).reshape(2, int(info["level"]) + 1, self.ring.n)
        outs, stats = self.compute(q, mode, self._diags)
        t1 = time.perf_counter()
        _, res = _core.call("offload_result", {"handle": self._handle.get(), "mode": mode, "bound": bound or 0},
                            self.backend.get(outs).tobytes())
        if signing_key is not None:
            res, _ = bind_search(self.server_key_dir, query, res, signing_key=signing_key,
                                 index=index or self.manifest["uid"], generation=generation)
        stats["framing_seconds"] = time.perf_counter() - t1
        stats["seconds"] = time.perf_counter() - t0
        self.last_search = stats
        return res

    def compute(self, query: np.ndarray, mode: str, diags: Sequence[Any]) -> tuple[Any, dict]:
        """The search's arithmetic on the device: a query ciphertext
        (2 x r rows) against the groups diags (device arrays), returning
        the output ciphertexts (membership: 1, identification and payload:
        one per group) on the device, and the phases' timings. On CUDA the search
        runs as a captured CUDA graph when :attr:`graphs` is set (see
        :meth:`_graph`); :meth:`search` frames the output, benchmarks call
        this directly."""
        if self.graphs and self.device == "cuda":
            try:
                return self._replay(query, mode, diags)
            except Exception as exc:  # noqa: BLE001 - a driver that refuses capture: eager launches still work
                self.graphs = False
                self.graph_error = f"{type(exc).__name__}: {exc}"
        be = self.backend
        t0 = time.perf_counter()
        outs, marks = self._run(be.put(query), mode, diags, timed=True)
        t4 = time.perf_counter()
        t1, t2, t3 = marks
        return outs, {"mode": mode, "groups": len(diags), "device": self.device, "graph": False,
                      "rotations_seconds": t1 - t0, "similarity_seconds": t2 - t1, "comparison_seconds": t3 - t2,
                      "aggregation_seconds": t4 - t3, "seconds": t4 - t0}

    def _run(self, q: Any, mode: str, diags: Sequence[Any], timed: bool) -> tuple[Any, list[float]]:
        """Launches the search's kernels on the current stream; with timed,
        synchronizes after each phase and returns the times it ended."""
        marks = []

        def mark() -> None:
            if timed:
                self.backend.synchronize()
                marks.append(time.perf_counter())

        r = q.shape[1]
        table = self._table(q, r)
        mark()
        scores = self._scores(table, diags, r)
        mark()
        program = self.payload_program if mode == PAYLOAD else self.program
        outs = program.run(scores, self._keys[0])
        mark()
        if mode == "membership":
            outs = self._inner_sum(outs)[None]
        if timed:
            self.backend.synchronize()
        return outs, marks

    def _graph(self, query: np.ndarray, mode: str, diags: Sequence[Any]) -> tuple:
        """The search for (mode, query level, diags) captured as a CUDA
        graph. An eager run first fills every cached table (and gives the
        expected output); a second eager run in a memory pool of the
        graph's own fills that pool; the third run, on a stream of the
        graph's own, is captured. The pool serves that graph alone, so its
        intermediate buffers are touched by its replays only, and its input
        and output arrays stay allocated with it. The first replay must
        equal the eager run, residue for residue."""
        import cupy

        key = (mode, query.shape[1], tuple(id(d) for d in diags))
        if key in self._graphs:
            return self._graphs[key]
        want, _ = self._run(self.backend.put(query), mode, diags, timed=True)
        want = want.get()
        pool = cupy.cuda.MemoryPool()
        stream = cupy.cuda.Stream(non_blocking=True)
        with cupy.cuda.using_allocator(pool.malloc), stream:
            q_in = cupy.empty(query.shape, dtype=np.uint64)
            q_in.set(np.ascontiguousarray(query), stream=stream)
            warm, _ = self._run(q_in, mode, diags, timed=False)
            del warm
            stream.begin_capture()
            try:
                outs, _ = self._run(q_in, mode, diags, timed=False)
            finally:
                graph = stream.end_capture()
            graph.launch(stream=stream)
            got = outs.get(stream=stream)
        if not np.array_equal(got, want):
            raise RuntimeError("the captured graph's output differs from the eager run's")
        self._graphs[key] = (graph, stream, q_in, outs, pool, list(diags))
        return self._graphs[key]

    def release_graphs(self) -> None:
        """Drops the captured graphs and their memory."""
        with self._graph_lock:
            pools = [entry[4] for entry in self._graphs.values()]
            self._graphs = {}  # the graphs, their inputs and outputs go
            for pool in pools:
                pool.free_all_blocks()

    def _replay(self, query: np.ndarray, mode: str, diags: Sequence[Any]) -> tuple[Any, dict]:
        t0 = time.perf_counter()
        with self._graph_lock:
            graph, stream, q_in, outs = self._graph(query, mode, diags)[:4]
            t1 = time.perf_counter()
            q_in.set(np.ascontiguousarray(query), stream=stream)
            graph.launch(stream=stream)
            with stream:
                result = outs.copy()
            stream.synchronize()
        t2 = time.perf_counter()
        return result, {"mode": mode, "groups": len(diags), "device": self.device, "graph": True,
                        "capture_seconds": t1 - t0, "seconds": t2 - t1}

    #: Rotations computed per launch: bounds the key products' memory.
    _ROTATIONS_PER_LAUNCH = 64

    def _rotations(self, ct: Any, dec: Any, rotations: Sequence[int], r: int) -> Any:
        """ct (2 x r rows, c1 decomposed as dec) rotated by each of
        rotations: len(rotations) x 2 x r rows (hoisted, batched)."""
        out = []
        for c in range(0, len(rotations), self._ROTATIONS_PER_LAUNCH):
            galois = [self._galois[x] for x in rotations[c:c + self._ROTATIONS_PER_LAUNCH]]
            out.append(self.ring.automorphisms(ct, dec, self.keys, galois, [self._slot[g] for g in galois], r))
        return out[0] if len(out) == 1 else self.backend.xp.concatenate(out)

    def _table(self, q: Any, r: int) -> Any:
        """The query's rotations: the n1 baby steps (bsgs-tbs, bsgs-tbe)
        or all l (dg; bsgs-diagonal by double hoisting)."""
        ring, xp = self.ring, self.backend.xp
        full = self.strategy in ("dg", "bsgs-diagonal")
        size = self.l if full else self.n1
        table = self.backend.empty((size, 2, r, ring.n))
        table[0] = q
        dec = ring.decompose(q[1], 1, r)
        babies = list(range(1, self.l)) if self.strategy == "dg" else list(range(1, min(self.n1, self.l)))
        if babies:
            table[1:1 + len(babies)] = self._rotations(q, dec, babies, r)
        if self.strategy == "bsgs-diagonal":
            giants = range(self.n1, self.l, self.n1)
            for b in range(self.n1):
                rots = [g for g in giants if g + b < self.l]
                if not rots:
                    continue
                dec_b = ring.decompose(xp.ascontiguousarray(table[b, 1]), 1, r)
                table[self.n1 + b::self.n1] = self._rotations(xp.ascontiguousarray(table[b]), dec_b, rots, r)
        return table

    def _accumulate(self, acc: Any, table: Any, diags: Any, r: int) -> None:
        """acc (3 x r rows) = sum_i table[i] (x) diags[i], a degree-2
        ciphertext."""
        for c in range(0, len(diags), _CHUNK):
            nb = min(_CHUNK, len(diags) - c)
            self.backend.launch("tensor_acc", r * self.ring.n, acc, table[c:c + nb], diags[c:c + nb], nb, r,
                                table.shape[-2], diags.shape[-2], self.ring.n, int(c == 0), self.ring.mods)

    def _scores(self, table: Any, diags: Sequence[Any], r: int) -> Any:
        """The groups' rescaled scores (engine.groupScores for each group),
        g x 2 x (r - 1) rows. The products are per group; every key switch
        after them runs once for all groups (the same operations on g
        ciphertexts at a time, so the kernels see g times the work)."""
        ring, g = self.ring, len(diags)
        acc = self.backend.empty((g, 3, r, ring.n))
        if self.strategy in ("dg", "bsgs-diagonal"):
            for i, d in enumerate(diags):
                self._accumulate(acc[i], table, d, r)
            scores = ring.relinearize(acc, self._keys[0], g, r)
        else:
            n2 = -(-self.l // self.n1)
            acc = self.backend.empty((n2, g, 3, r, ring.n))
            for j in range(n2):
                first = j * self.n1
                nb = min(self.n1, self.l - first)
                for i, d in enumerate(diags):
                    self._accumulate(acc[j, i], table[:nb], d[first:first + nb], r)
            total = self._giant_steps(acc, r)
            scores = ring.mod_down(total.reshape(2 * g, r + ring.alpha, ring.n), 2 * g, r)
        scores = ring.rescale(scores, 2 * g, r).reshape(g, 2, r - 1, ring.n)
        return self._real_part(scores) if self.conjugate else scores

    def _real_part(self, z: Any) -> Any:
        """z + conj(z) for g folded score ciphertexts (engine.realPart:
        Lattigo's Conjugate, an automorphism with a fresh decomposition)."""
        ring, xp = self.ring, self.backend.xp
        g, r = z.shape[0], z.shape[2]
        dec = ring.decompose(xp.ascontiguousarray(z[:, 1]), g, r)
        conj = ring.automorphisms(z, dec, self.keys, [self.conjugate] * g, [self._slot[self.conjugate]] * g, r)
        return ring.add_q(z, conj, 2 * g, r)

    def _giant_steps(self, acc: Any, r: int) -> Any:
        """sum_j P Rot_{j n1}(Relin(acc[j])) modulo QP (engine's giantSum)
        for n2 x g degree-2 ciphertexts acc (giant step j of group i at
        acc[j, i]): g x 2 x (r + alpha) rows. Every giant step of every
        group goes through each kernel together."""
        ring, xp = self.ring, self.backend.xp
        n2, g, a, n = acc.shape[0], acc.shape[1], ring.alpha, ring.n
        flat = acc.reshape(n2 * g, 3, r, n)
        rel = ring.key_product(ring.decompose(xp.ascontiguousarray(flat[:, 2]), n2 * g, r), self._keys[0], n2 * g, r)
        pc = ring.mul_p(flat[:g, 0:2], 2 * g, r).reshape(g, 2, r, n)
        total = ring.add_qp(xp.ascontiguousarray(rel[:g]), xp.concatenate([pc, self.backend.zeros((g, 2, a, n))], axis=2),
                            2 * g, r)
        m = (n2 - 1) * g
        if m == 0:
            return total
        # rel's c1 is not read after the division by P, which may overwrite its P rows.
        x1 = ring.mod_down(xp.ascontiguousarray(rel[g:, 1]), m, r, plus=xp.ascontiguousarray(flat[g:, 1]))
        galois = [self._galois[j * self.n1] for j in range(1, n2) for _ in range(g)]
        ks = ring.key_product(ring.decompose(x1, m, r), self.keys, m, r, which=[self._slot[e] for e in galois])
        px0 = xp.concatenate([ring.mul_p(flat[g:, 0], m, r), self.backend.zeros((m, a, n))], axis=1)
        c0 = ring.add_qp(ring.add_qp(xp.ascontiguousarray(ks[:, 0]), px0, m, r), xp.ascontiguousarray(rel[g:, 0]), m, r)
        parts = ring.permute(xp.stack([c0, ks[:, 1]], axis=1), [e for e in galois for _ in range(2)], 2 * m,
                             ring.qp_mods(r)).reshape(n2 - 1, g, 2, r + a, n)
        for j in range(n2 - 1):
            total = ring.add_qp(total, parts[j], 2 * g, r)
        return total

    def _inner_sum(self, outs: Any) -> Any:
        """The groups' outputs added, then summed over all slots (Lattigo's
        InnerSum for a power-of-two count)."""
        ring = self.ring
        r = outs.shape[-2]
        ct = outs[0]
        for i in range(1, outs.shape[0]):
            ct = ring.add_q(ct, outs[i], 2, r)
        for rotation in self._inner:
            dec = ring.decompose(self.backend.xp.ascontiguousarray(ct[1]), 1, r)
            ct = ring.add_q(ct, self._rotations(ct, dec, [rotation], r)[0], 2, r)
        return ct
