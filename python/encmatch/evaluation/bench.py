"""Benchmark harness: the method of papers/000 section 6.2 over the SDK, with its published figures beside ours.

For each gallery size K and similarity strategy, :func:`run` performs
``trials`` trials that share one key set and one encrypted index:

- trial 1 pays key generation, enrollment, loading the index and a warm-up
  query, and is reported separately (``setup``);
- trials 2..t are the timed query trials: membership and identification
  search time (server side, as returned by the core), the end-to-end round
  trip of a membership query (encrypt, search, decrypt) and the peak RSS of
  this process (the core runs in-process), sampled every 0.5 s by a
  background thread. Query metrics are the mean and population standard
  deviation over the passing trials.

Every trial is checked (:func:`check_trial`): membership must be positive
iff planted matches exist, identification must return exactly the planted
positions; a failing trial is reported and excluded from the timings.

Workloads (:class:`Workload`): ``synthetic`` (papers/000 6.1: integer
vectors, the matches are the query plus small noise) and ``faces`` (LFW
MobileFaceNet embeddings, 192-d, padded with impostors). Both keep a margin
of the comparator's value band around delta, so the planted positions are
the exact answer of the encrypted pipeline too.

:func:`run` returns the results document; :mod:`~encmatch.evaluation.bench_report`
writes it out (JSON, CSV, the markdown table beside the papers, plots).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import multiprocessing
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .. import data as data_mod
from .._util.defaults import DEFAULT_KAPPA
from .._util.progress import progress as progress_bar
from ..keyholder import Client
from ..enroller import Enroller
from ..server import Server
from ..params import choose_strategy, comparator, describe, version
from ..errors import InvalidArgument
from .bruteforce import cosine_scores

__all__ = [
    "SYNTHETIC_DELTA",
    "FACES_DELTA",
    "FACES_DIM",
    "WORKLOADS",
    "ENCRYPTIONS",
    "Workload",
    "synthetic_workload",
    "faces_workload",
    "make_workload",
    "RssSampler",
    "check_trial",
    "bench_config",
    "run",
    "hardware",
    "series",
]

#: How a gallery can be enrolled: by any enroller under the public key, or by
#: the key owner under the secret key with seeded uniform halves (half the bytes).
ENCRYPTIONS = ("public-key", "secret-key")
#: Slot layouts a configuration can use: ``plain`` (one real diagonal per
#: dimension) or ``folded`` (the vector's halves in complex slots, half the
#: diagonals; ``Client.generate(fold=True)``).
LAYOUTS = ("plain", "folded")

#: Threshold of the synthetic workload. Matches score about 0.9997, non-matches
#: of 512-d uniform vectors about 0 +- 0.044 (at most about 0.25 over 2^20): 0.6
#: leaves more than the comparator's value band (0.19 at kappa 8) on both sides.
SYNTHETIC_DELTA = 0.6
#: Threshold of the faces workload (MobileFaceNet, FMR 1e-4; see :mod:`encmatch.evaluation.validate`).
FACES_DELTA = 0.541
#: Dimension of the faces workload (MobileFaceNet embeddings).
FACES_DIM = 192
#: Workload names.
WORKLOADS = ("synthetic", "faces")
#: Paper approach each of our strategies is compared with (papers/000 Tables 6-8, CPU rows).
REFERENCE_APPROACH = {
    "dg": "HyDia-CPU-DG",
    "bsgs-diagonal": "BSGS-CPU-DG",
    "bsgs-tbs": "BSGS-CPU-DG",
    "bsgs-tbe": "BSGS-CPU-DG",
}
#: RSS sampling period in seconds (papers/000 6.2).
SAMPLE_PERIOD = 0.5

GB = 1e9


# ---------------------------------------------------------------------------
# Workloads


@dataclass
class Workload:
    """A gallery, one query and the planted matching positions (the ground truth).

    ``info`` records how it was made: the lowest planted score, the highest
    other score, the margin kept around delta, non-matches redrawn.
    """

    name: str
    gallery: np.ndarray
    query: np.ndarray
    planted: np.ndarray
    delta: float
    info: dict = field(default_factory=dict)

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return int(self.gallery.shape[1])


def _score_info(gallery: np.ndarray, query: np.ndarray, planted: np.ndarray, delta: float, margin: float) -> dict:
    """Lowest planted score, highest other score and the margin, for ``Workload.info``."""
    s = cosine_scores(gallery, query)[0]
    others = np.delete(s, planted)
    return {
        "delta": delta,
        "margin": margin,
        "min_planted_score": float(s[planted].min()) if len(planted) else None,
        "max_other_score": float(others.max()) if len(others) else None,
    }


def synthetic_workload(size: int, matches: int, dim: int, *, delta: float = SYNTHETIC_DELTA,
                       margin: float = 0.0, seed: int = 0) -> Workload:
    """The synthetic generator of papers/000 6.1.

    The query has uniform integer components in [-99, 99]; ``matches``
    entries at uniformly random positions are the query plus uniform
    integer noise in [-2, 2]; the others are uniform integers in [-99, 99].
    A non-match whose cosine score is not below ``delta - margin`` (only
    possible at small dimensions) is redrawn, and a planted match not above
    ``delta + margin`` raises InvalidArgument, so the planted positions are
    the exact answer. The SDK L2-normalises the vectors.
    """
    if not 0 <= matches <= size:
        raise InvalidArgument(f"matches must be in [0, {size}], got {matches}")
    rng = np.random.default_rng(seed)
    query = rng.integers(-99, 100, dim).astype(np.float64)
    if not query.any():
        query[0] = 1.0
    gallery = rng.integers(-99, 100, (size, dim)).astype(np.float64)
    planted = np.sort(rng.choice(size, matches, replace=False)).astype(np.int64)
    gallery[planted] = query + rng.integers(-2, 3, (matches, dim))
    rest = np.setdiff1d(np.arange(size), planted)
    redrawn = 0
    for _ in range(1000):
        s = cosine_scores(gallery[rest], query)[0] if len(rest) else np.zeros(0)
        bad = rest[~(s < delta - margin) | ~np.isfinite(s) | ~gallery[rest].any(axis=1)]
        if not len(bad):
            break
        redrawn += len(bad)
        gallery[bad] = rng.integers(-99, 100, (len(bad), dim))
    else:
        raise InvalidArgument(f"cannot draw non-matches below delta - margin = {delta - margin:.3f} at dim {dim}")
    info = _score_info(gallery, query, planted, delta, margin)
    if matches and info["min_planted_score"] < delta + margin:
        raise InvalidArgument(
            f"a planted match scores {info['min_planted_score']:.4f}, not above delta + margin = {delta + margin:.4f}"
        )
    info.update(redrawn=redrawn, seed=seed)
    return Workload("synthetic", gallery.astype(np.float32), query.astype(np.float32), planted, delta, info)


def faces_workload(size: int, matches: int, *, delta: float = FACES_DELTA, margin: float = 0.0, seed: int = 0,
                   faces: data_mod.FaceSet | None = None) -> Workload:
    """Real faces: a query image, ``matches`` other images of its identity, impostors as padding.

    The query identity is drawn among those with at least ``matches``
    other images scoring at least ``delta + margin`` with the query image;
    the padding is images of other identities scoring below ``delta -
    margin`` (LFW MobileFaceNet by default, 192-d), then random unit
    vectors when the real faces run out. Positions are shuffled.
    """
    faces = faces if faces is not None else data_mod.load_faces("lfw", "mfn")
    if not 0 <= matches <= size:
        raise InvalidArgument(f"matches must be in [0, {size}], got {matches}")
    rng = np.random.default_rng(seed)
    labels = faces.label
    ids, counts = np.unique(labels, return_counts=True)
    query_row = good = None
    for ident in rng.permutation(ids[counts >= matches + 1]):
        rows = np.flatnonzero(labels == ident)
        for q in rng.permutation(rows):
            s = cosine_scores(faces.emb[rows], faces.emb[q])[0]
            cand = rows[(rows != q) & (s >= delta + margin)]
            if len(cand) >= matches:
                query_row, good = int(q), rng.permutation(cand)[:matches]
                break
        if query_row is not None:
            break
    if query_row is None:
        raise InvalidArgument(f"no identity has {matches} other images scoring >= {delta + margin:.3f}")
    query = faces.emb[query_row]
    others = np.flatnonzero(labels != labels[query_row])
    s = cosine_scores(faces.emb[others], query)[0]
    pad = rng.permutation(others[s < delta - margin])[: size - matches]
    parts = [faces.emb[good], faces.emb[pad]]
    n_synth = size - matches - len(pad)
    dim = faces.emb.shape[1]
    while n_synth > 0:
        synth = rng.standard_normal((n_synth, dim))
        synth = synth[cosine_scores(synth, query)[0] < delta - margin]
        parts.append(synth)
        n_synth -= len(synth)
    gallery = np.vstack(parts)[:size]
    perm = rng.permutation(size)
    gallery = gallery[perm]
    planted = np.sort(np.flatnonzero(perm < matches)).astype(np.int64)
    info = _score_info(gallery, query, planted, delta, margin)
    info.update(real_faces=int(matches + len(pad)), synthetic=int(size - matches - len(pad)), seed=seed,
                source=faces.source)
    return Workload("faces", np.ascontiguousarray(gallery, np.float32), query.astype(np.float32), planted, delta, info)


def make_workload(name: str, size: int, matches: int, dim: int, *, kappa: int, seed: int = 0,
                  delta: float | None = None) -> Workload:
    """Workload ``name`` (``synthetic`` or ``faces``) with the comparator's value band at ``kappa`` as margin."""
    if name not in WORKLOADS:
        raise InvalidArgument(f"unknown workload {name!r} (want one of {', '.join(WORKLOADS)})")
    d = delta if delta is not None else (SYNTHETIC_DELTA if name == "synthetic" else FACES_DELTA)
    margin = float(comparator(kappa, d)["value_band"])
    if name == "synthetic":
        return synthetic_workload(size, matches, dim, delta=d, margin=margin, seed=seed)
    return faces_workload(size, matches, delta=d, margin=margin, seed=seed)


# ---------------------------------------------------------------------------
# Measurement helpers


def _rss_bytes() -> int:
    """Resident set size of this process (``VmRSS`` of /proc/self/status), 0 where unavailable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler:
    """Samples this process's RSS every ``period`` seconds in a background thread; :attr:`peak` is the maximum.

    Use as a context manager; :meth:`reset` starts a new peak.
    """

    def __init__(self, period: float = SAMPLE_PERIOD):
        """A sampler with the given period (seconds)."""
        self.period = period
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="rss-sampler")

    def _loop(self) -> None:
        """Sample until stopped."""
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.period)

    def sample(self) -> int:
        """Take one sample now (also updates :attr:`peak`); returns it."""
        rss = _rss_bytes()
        self.peak = max(self.peak, rss)
        return rss

    def reset(self) -> None:
        """Start a new peak from the current RSS."""
        self.peak = 0
        self.sample()

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _dir_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (symlinks not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def _mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and population standard deviation (``None`` for no values)."""
    if not values:
        return None, None
    return float(statistics.fmean(values)), float(statistics.pstdev(values))


def check_trial(membership, identification, planted: np.ndarray) -> list[str]:
    """Correctness of one trial (papers/000 6.2); returns the failures (empty: pass).

    Membership must be positive iff anything is planted; identification
    must return exactly the planted positions.
    """
    failures = []
    if membership.enrolled != (len(planted) > 0):
        failures.append(f"membership count {membership.count} but {len(planted)} planted")
    if not np.array_equal(np.asarray(identification.positions, np.int64), np.asarray(planted, np.int64)):
        got = np.asarray(identification.positions).tolist()
        failures.append(f"identification returned {got[:10]}{'...' if len(got) > 10 else ''}, "
                        f"planted {np.asarray(planted).tolist()[:10]}")
    return failures


def _query(client: Client, server: Server, workload: Workload) -> dict:
    """One query trial: membership round trip and identification; timings, sizes, results and failures."""
    t0 = time.perf_counter()
    q = client.encrypt_query(workload.query)
    encrypt_s = time.perf_counter() - t0
    m_bytes = server.search(q, "membership")
    m_search = float(server.last_search.get("seconds", 0.0))
    membership = client.decrypt(m_bytes)
    rtt = time.perf_counter() - t0
    q2 = client.encrypt_query(workload.query)
    i_bytes = server.search(q2, "identification")
    i_search = float(server.last_search.get("seconds", 0.0))
    identification = client.decrypt(i_bytes)
    failures = check_trial(membership, identification, workload.planted)
    return {
        "membership_s": m_search,
        "identification_s": i_search,
        "rtt_s": rtt,
        "encrypt_s": encrypt_s,
        "query_bytes": len(q),
        "membership_result_bytes": len(m_bytes),
        "identification_result_bytes": len(i_bytes),
        "membership_count": membership.count,
        "membership_raw_count": membership.raw_count,
        "identification_matches": int(identification.count),
        "ok": not failures,
        "failures": failures,
    }


# ---------------------------------------------------------------------------
# One configuration


#: Query metrics aggregated over the passing timed trials, and the key of each one's standard deviation.
QUERY_METRICS = {
    "membership_s": "membership_std_s",
    "identification_s": "identification_std_s",
    "rtt_s": "rtt_std_s",
    "peak_rss_bytes": "peak_rss_bytes_std",
}


def bench_config(
    workload: Workload,
    strategy: str,
    work_dir: Path,
    *,
    preset: str = "default",
    kappa: int = DEFAULT_KAPPA,
    n1: int = 0,
    trials: int = 11,
    memory_budget: int | None = None,
    sampler: RssSampler | None = None,
    progress: bool | None = None,
    query_fn: Callable[[Client, Server, Workload], dict] = _query,
    encryption: str = "public-key",
    layout: str = "plain",
) -> dict:
    """Benchmark ``workload`` with ``strategy`` for ``trials`` trials in ``work_dir``; returns the record.

    ``layout`` is one of :data:`LAYOUTS`.

    ``encryption`` is how the gallery is enrolled: ``public-key`` (any
    enroller, as in papers/000) or ``secret-key`` (the key owner: seeded
    uniform halves, half the index bytes).

    ``work_dir`` receives ``keys/`` and ``index/`` (kept for the disk
    figures; the caller removes them). ``query_fn`` runs one query trial
    (:func:`_query`; tests substitute it). The record holds the setup
    (trial 1), every trial, and the mean and population std of
    :data:`QUERY_METRICS` over the passing trials 2..t.
    """
    if trials < 2:
        raise InvalidArgument(f"trials must be at least 2 (trial 1 is the setup), got {trials}")
    if encryption not in ENCRYPTIONS:
        raise InvalidArgument(f"encryption must be one of {', '.join(ENCRYPTIONS)}, got {encryption!r}")
    if layout not in LAYOUTS:
        raise InvalidArgument(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    own_sampler = sampler is None
    sampler = sampler or RssSampler()
    if own_sampler:
        sampler.__enter__()
    work_dir = Path(work_dir)
    key_dir, index_dir = work_dir / "keys", work_dir / "index"
    size = len(workload.gallery)
    rec: dict = {"K": size, "Km": int(len(workload.planted)), "strategy": strategy, "encryption": encryption,
                 "layout": layout, "workload": workload.name, "delta": workload.delta, "trials": []}
    try:
        sampler.reset()
        t_setup = time.perf_counter()
        t0 = time.perf_counter()
        client = Client.generate(key_dir, preset=preset, kappa=kappa, dim=workload.dim, strategy=strategy,
                                 n1=0 if strategy == "dg" else n1, expected_size=size, memory_budget=memory_budget,
                                 fold=layout == "folded")
        keygen_s = time.perf_counter() - t0
        with client:
            owner = key_dir if encryption == "secret-key" else None
            enroller = Enroller(client.server_key_dir, owner_key_dir=owner)
            enroller.create_index(index_dir, workload.delta)
            t0 = time.perf_counter()
            summary = enroller.enroll(index_dir, workload.gallery, progress=False)
            enroll_s = time.perf_counter() - t0
            with Server(index_dir, client.server_key_dir, memory_budget) as server:
                first = query_fn(client, server, workload)  # warm-up: trial 1
                t0 = time.perf_counter()
                programs = server.wait_comparators()  # recorded after the warm-up: the steady state
                wait_s = time.perf_counter() - t0
                sampler.sample()
                first["peak_rss_bytes"] = sampler.peak
                rec["setup"] = {
                    "keygen_s": keygen_s,
                    "keygen_core_s": float((client.keygen_info or {}).get("seconds", 0.0)),
                    "enroll_s": enroll_s,
                    "enroll_core_s": summary.seconds,
                    "server_open_s": server.open_seconds,
                    "comparator_programs": programs,
                    "comparator_wait_s": wait_s,
                    "total_s": time.perf_counter() - t_setup,
                    "rotation_keys": (client.keygen_info or {}).get("rotation_keys"),
                    "trial": first,
                }
                rec.update(n1=client.n1, streamed=server.streamed, params=client.params)
                rec["predicted_membership_s"] = predicted_membership(
                    workload.dim, preset, kappa, strategy, client.n1, size, memory_budget,
                    seeded=encryption == "secret-key", fold=layout == "folded")
                bar = progress_bar(range(2, trials + 1), desc=f"K={size:,} {strategy}", unit="trial",
                                   show=progress is None or bool(progress))
                for i in bar:
                    sampler.reset()
                    tr = query_fn(client, server, workload)
                    sampler.sample()
                    tr["peak_rss_bytes"] = sampler.peak
                    tr["trial"] = i
                    rec["trials"].append(tr)
                    bar.set_postfix(membership=f"{tr['membership_s']:.2f}s", ok=tr["ok"])
        rec["key_disk_bytes"] = _dir_bytes(client.server_key_dir)
        rec["key_bytes_sent"] = int((client.keygen_info or {}).get("server_key_bytes") or rec["key_disk_bytes"])
        rec["index_disk_bytes"] = _dir_bytes(index_dir)
        rec["index_bytes_per_entry"] = rec["index_disk_bytes"] / max(size, 1)
    finally:
        if own_sampler:
            sampler.__exit__(None, None, None)
    passing = [t for t in rec["trials"] if t["ok"]]
    rec["passed"] = len(passing)
    rec["failed"] = len(rec["trials"]) - len(passing) + (0 if rec["setup"]["trial"]["ok"] else 1)
    for metric, std_key in QUERY_METRICS.items():
        rec[metric], rec[std_key] = _mean_std([t[metric] for t in passing])
    last = (passing or rec["trials"] or [rec["setup"]["trial"]])[-1]
    for k in ("query_bytes", "membership_result_bytes", "identification_result_bytes"):
        rec[k] = last[k]
    return rec


def predicted_membership(dim: int, preset: str, kappa: int, strategy: str, n1: int, size: int,
                         memory_budget: int | None, *, seeded: bool, fold: bool) -> float | None:
    """The cost model's membership time for this configuration on this machine's cores and kernel set
    (:func:`encmatch.choose_strategy`, docs/STRATEGIES.md), or ``None`` where it has none."""
    res = choose_strategy(dim, preset, kappa, strategy=strategy, n1=n1, expected_size=size,
                          memory_budget=memory_budget, seeded=seeded, fold=fold)
    return res["candidates"][0]["query_seconds"] if res["candidates"] else None


# ---------------------------------------------------------------------------
# The whole run


def _bench_config_child(kwargs: dict) -> dict:
    """Child-process entry point of :func:`run`: one configuration, its own RSS sampler."""
    return bench_config(**kwargs)


def hardware() -> dict:
    """This machine: CPU model (/proc/cpuinfo), cores, RAM, OS, the core's kernel set."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_bytes": ram, "os": platform.platform(),
            "python": platform.python_version(), "kernels": version()["kernels"]}


def run(
    sizes: Sequence[int] = (1024, 16384),
    strategies: Sequence[str] = ("bsgs-tbe", "dg"),
    *,
    encryptions: Sequence[str] = ("public-key",),
    layouts: Sequence[str] | None = None,
    matches: int = 1,
    n1: int = 0,
    trials: int = 11,
    preset: str = "default",
    kappa: int = DEFAULT_KAPPA,
    dim: int = 512,
    workload: str = "synthetic",
    memory_budget: int | None = None,
    work_dir: Path | None = None,
    seed: int = 0,
    progress: bool | None = None,
    log: Callable[[str], None] | None = None,
    query_fn: Callable[[Client, Server, Workload], dict] = _query,
    isolate: bool = True,
) -> dict:
    """Run every (K, strategy, encryption, layout) configuration; returns the results document (see :func:`write_outputs`).

    The workload of each K is generated once and shared by the
    strategies. ``dim`` is ignored by the ``faces`` workload (192-d).
    ``layouts`` defaults to the one a new key set of ``preset`` takes
    (``folded`` where the preset can fold, else ``plain``).
    Keys and indexes go to a temporary directory under ``work_dir`` (made if
    missing) and are removed after each configuration. With ``isolate`` (the default,
    unless a test substitutes ``query_fn``) each configuration runs in a
    fresh child process, so that its peak RSS is its own and not what an
    earlier configuration left in the Go runtime.
    """
    isolate = isolate and query_fn is _query
    if workload == "faces":
        dim = FACES_DIM
    params = describe(preset, kappa, dim)
    if layouts is None:
        layouts = ("folded",) if params.get("fold") else ("plain",)
    doc: dict = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "hardware": hardware(),
        "parameters": {"preset": preset, "log_n": params.get("log_n"), "log_qp": params.get("log_qp"),
                       "kappa": kappa, "dim": dim, "n1": n1, "trials": trials, "matches": matches,
                       "workload": workload, "memory_budget_bytes": int(memory_budget or 0),
                       "insecure": bool(params.get("insecure")), "seed": seed},
        "workloads": {},
        "configs": [],
    }
    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    with RssSampler() as sampler, tempfile.TemporaryDirectory(prefix="encmatch-bench-", dir=work_dir) as tmp:
        for size in sizes:
            wl = make_workload(workload, int(size), matches, dim, kappa=kappa, seed=seed)
            doc["workloads"][str(size)] = wl.info
            doc["parameters"]["delta"] = wl.delta
            for strategy, encryption, layout in itertools.product(strategies, encryptions, layouts):
                if log:
                    log(f"K = {size:,}, {strategy}, {encryption} enrollment, {layout}: keygen, enrollment, warm-up ...")
                cfg_dir = Path(tmp) / f"{size}-{strategy}-{encryption}-{layout}"
                kwargs = dict(workload=wl, strategy=strategy, work_dir=cfg_dir, preset=preset, kappa=kappa,
                              n1=n1, trials=trials, memory_budget=memory_budget, progress=progress,
                              encryption=encryption, layout=layout)
                if isolate:
                    ctx = multiprocessing.get_context("spawn")
                    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
                        rec = pool.submit(_bench_config_child, kwargs).result()
                else:
                    rec = bench_config(sampler=sampler, query_fn=query_fn, **kwargs)
                rec.pop("params", None)
                doc["configs"].append(rec)
                shutil.rmtree(cfg_dir, ignore_errors=True)
                if log:
                    log(_summary_line(rec))
    return doc


def fmt_pm(mean: float | None, std: float | None, scale: float = 1.0, digits: int = 2, n: int | None = None) -> str:
    """``mean ± std`` (scaled) over ``n`` samples; ``mean (n=1)`` for a single sample (a spread of one sample is
    not 0, it is unknown); ``-`` without a value."""
    if mean is None:
        return "-"
    if n == 1:
        return f"{mean / scale:.{digits}f} (n=1)"
    return f"{mean / scale:.{digits}f} ± {(std or 0.0) / scale:.{digits}f}"


def series(rec: dict) -> str:
    """The name of a configuration's line in plots and tables: the strategy, marked when the store is seeded and
    when the layout is folded."""
    return (rec["strategy"] + (" seeded" if rec.get("encryption") == "secret-key" else "")
            + (" folded" if rec.get("layout") == "folded" else ""))


def _summary_line(rec: dict) -> str:
    """One line per configuration for the log."""
    n = rec.get("passed")
    model = rec.get("predicted_membership_s")
    predicted = f" (model: {model:.2f} s)" if model is not None else ""
    return (f"K = {rec['K']:,}, {series(rec)}: membership {fmt_pm(rec['membership_s'], rec['membership_std_s'], n=n)}"
            f" s{predicted}, identification {fmt_pm(rec['identification_s'], rec['identification_std_s'], n=n)} s, "
            f"peak RSS {fmt_pm(rec['peak_rss_bytes'], rec['peak_rss_bytes_std'], GB, 1, n=n)} GB, "
            f"{rec['passed']} passed, {rec['failed']} failed")


# ---------------------------------------------------------------------------
# Reference data and outputs
