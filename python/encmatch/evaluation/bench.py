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

Outputs (:func:`write_outputs`): ``results.json``, ``results.csv`` (one
row per K x strategy, with hardware and parameters), ``time.png``,
``ram.png``, ``disk.png`` and ``results.md`` (:func:`markdown_table`: our
figures beside papers/000 Tables 6-8, :func:`load_reference`, at a secure
preset; at an INSECURE one our rows are marked so and the published ones
are set apart, as not comparable). A figure of a single timed trial is
shown as ``value (n=1)``, without a ``±``; the plots of one gallery size
are bars (:func:`figure`), and every tick is a plain number.
:func:`check_out_dir` checks the output folder before any work.
"""

from __future__ import annotations

import concurrent.futures
import csv
import itertools
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .._util.plots import pyplot
from .. import data as data_mod
from .._util.atomic import check_writable_folder
from .._util.defaults import DEFAULT_KAPPA
from .._util.progress import progress as progress_bar
from ..keyholder import Client
from ..enroller import Enroller
from ..server import Server
from ..params import comparator, describe
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
    "load_reference",
    "write_outputs",
    "check_out_dir",
    "markdown_table",
    "figure",
    "series",
]

#: How a gallery can be enrolled: by any enroller under the public key, or by
#: the key owner under the secret key with seeded uniform halves (half the bytes).
ENCRYPTIONS = ("public-key", "secret-key")

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
) -> dict:
    """Benchmark ``workload`` with ``strategy`` for ``trials`` trials in ``work_dir``; returns the record.

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
    own_sampler = sampler is None
    sampler = sampler or RssSampler()
    if own_sampler:
        sampler.__enter__()
    work_dir = Path(work_dir)
    key_dir, index_dir = work_dir / "keys", work_dir / "index"
    size = len(workload.gallery)
    rec: dict = {"K": size, "Km": int(len(workload.planted)), "strategy": strategy, "encryption": encryption,
                 "workload": workload.name, "delta": workload.delta, "trials": []}
    try:
        sampler.reset()
        t_setup = time.perf_counter()
        t0 = time.perf_counter()
        client = Client.generate(key_dir, preset=preset, kappa=kappa, dim=workload.dim, strategy=strategy,
                                 n1=0 if strategy == "dg" else n1, expected_size=size, memory_budget=memory_budget)
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
                sampler.sample()
                first["peak_rss_bytes"] = sampler.peak
                rec["setup"] = {
                    "keygen_s": keygen_s,
                    "keygen_core_s": float((client.keygen_info or {}).get("seconds", 0.0)),
                    "enroll_s": enroll_s,
                    "enroll_core_s": float(summary.get("seconds", 0.0)),
                    "server_open_s": server.open_seconds,
                    "total_s": time.perf_counter() - t_setup,
                    "rotation_keys": (client.keygen_info or {}).get("rotation_keys"),
                    "trial": first,
                }
                rec.update(n1=client.n1, streamed=server.streamed, params=client.params)
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


# ---------------------------------------------------------------------------
# The whole run


def _bench_config_child(kwargs: dict) -> dict:
    """Child-process entry point of :func:`run`: one configuration, its own RSS sampler."""
    return bench_config(**kwargs)


def hardware() -> dict:
    """This machine: CPU model (/proc/cpuinfo), cores, RAM, OS."""
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
            "python": platform.python_version()}


def run(
    sizes: Sequence[int] = (1024, 16384),
    strategies: Sequence[str] = ("bsgs-tbe", "dg"),
    *,
    encryptions: Sequence[str] = ("public-key",),
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
    """Run every (K, strategy, encryption) configuration; returns the results document (see :func:`write_outputs`).

    The workload of each K is generated once and shared by the
    strategies. ``dim`` is ignored by the ``faces`` workload (192-d).
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
            for strategy, encryption in itertools.product(strategies, encryptions):
                if log:
                    log(f"K = {size:,}, {strategy}, {encryption} enrollment: keygen, enrollment, warm-up ...")
                cfg_dir = Path(tmp) / f"{size}-{strategy}-{encryption}"
                kwargs = dict(workload=wl, strategy=strategy, work_dir=cfg_dir, preset=preset, kappa=kappa,
                              n1=n1, trials=trials, memory_budget=memory_budget, progress=progress,
                              encryption=encryption)
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


def _fmt_pm(mean: float | None, std: float | None, scale: float = 1.0, digits: int = 2, n: int | None = None) -> str:
    """``mean ± std`` (scaled) over ``n`` samples; ``mean (n=1)`` for a single sample (a spread of one sample is
    not 0, it is unknown); ``-`` without a value."""
    if mean is None:
        return "-"
    if n == 1:
        return f"{mean / scale:.{digits}f} (n=1)"
    return f"{mean / scale:.{digits}f} ± {(std or 0.0) / scale:.{digits}f}"


def series(rec: dict) -> str:
    """The name of a configuration's line in plots and tables: the strategy, marked when the store is seeded."""
    return rec["strategy"] + (" seeded" if rec.get("encryption") == "secret-key" else "")


def _summary_line(rec: dict) -> str:
    """One line per configuration for the log."""
    n = rec.get("passed")
    return (f"K = {rec['K']:,}, {series(rec)}: membership {_fmt_pm(rec['membership_s'], rec['membership_std_s'], n=n)}"
            f" s, identification {_fmt_pm(rec['identification_s'], rec['identification_std_s'], n=n)} s, "
            f"peak RSS {_fmt_pm(rec['peak_rss_bytes'], rec['peak_rss_bytes_std'], GB, 1, n=n)} GB, "
            f"{rec['passed']} passed, {rec['failed']} failed")


# ---------------------------------------------------------------------------
# Reference data and outputs


def load_reference() -> dict:
    """The published figures of papers/000 Tables 6-8 (``reference/papers000.json``, shipped with the package)."""
    return json.loads(resources.files("encmatch").joinpath("reference/papers000.json").read_text(encoding="utf-8"))


#: Columns of results.csv, in order.
CSV_FIELDS = (
    "K", "Km", "strategy", "encryption", "n1", "workload", "delta", "preset", "log_n", "log_qp", "kappa", "dim",
    "trials", "passed", "failed", "membership_s", "membership_std_s", "identification_s", "identification_std_s",
    "rtt_s", "rtt_std_s", "peak_rss_bytes", "peak_rss_bytes_std", "keygen_s", "enroll_s", "setup_s",
    "setup_peak_rss_bytes", "key_disk_bytes", "index_disk_bytes", "index_bytes_per_entry", "key_bytes_sent", "query_bytes",
    "membership_result_bytes", "identification_result_bytes", "rotation_keys", "streamed",
    "cpu", "cores", "ram_bytes",
)


def _csv_row(doc: dict, rec: dict) -> dict:
    """One results.csv row: the configuration's figures, parameters and hardware."""
    p, hw, setup = doc["parameters"], doc["hardware"], rec["setup"]
    row = {k: rec.get(k) for k in CSV_FIELDS}
    row.update({k: p.get(k) for k in ("preset", "log_n", "log_qp", "kappa", "dim")})
    row.update(trials=p["trials"], keygen_s=setup["keygen_s"], enroll_s=setup["enroll_s"], setup_s=setup["total_s"],
               setup_peak_rss_bytes=setup["trial"]["peak_rss_bytes"], rotation_keys=setup.get("rotation_keys"),
               cpu=hw["cpu"], cores=hw["cores"], ram_bytes=hw["ram_bytes"])
    return row


def _reference_rows(doc: dict, ref: dict) -> list[dict]:
    """The published CPU rows at our sizes, kappa (Table 6 for kappa 10, else Tables 7-8) and approaches."""
    kappa = doc["parameters"]["kappa"]
    want_kappa = 10 if kappa == 10 else 8
    sizes = {rec["K"] for rec in doc["configs"]}
    approaches = {REFERENCE_APPROACH.get(rec["strategy"]) for rec in doc["configs"]}
    return [r for r in ref["rows"] if r["device"] == "CPU" and r["kappa"] == want_kappa and r["K"] in sizes
            and r["approach"] in approaches]


_TABLE_HEAD = [
    "| K | Km | approach | source | RTT (s) | membership (s) | identification (s) | RAM (GB) | disk (GB) "
    "| index/entry (KB) | enroll (s) | keygen (s) | passed/failed |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
]


def _our_row(rec: dict, cores: int, insecure: str) -> str:
    """One of our configurations as a Markdown row; ``insecure`` is the preset name when it is INSECURE."""
    name = series(rec) if rec["strategy"] == "dg" else f"{series(rec)} n1={rec.get('n1')}"
    disk = (rec["key_disk_bytes"] + rec["index_disk_bytes"]) / GB
    per_entry = rec["index_disk_bytes"] / rec["K"] / 1e3
    n = rec.get("passed")
    source = f"encmatch, {cores} cores" + (f", INSECURE {insecure}" if insecure else "")
    return (f"| {rec['K']:,} | {rec['Km']} | {name} | {source} | "
            f"{_fmt_pm(rec['rtt_s'], rec['rtt_std_s'], n=n)} | "
            f"{_fmt_pm(rec['membership_s'], rec['membership_std_s'], n=n)} | "
            f"{_fmt_pm(rec['identification_s'], rec['identification_std_s'], n=n)} | "
            f"{_fmt_pm(rec['peak_rss_bytes'], rec['peak_rss_bytes_std'], GB, 1, n=n)} | {disk:.2f} | {per_entry:.1f} | "
            f"{rec['setup']['enroll_s']:.1f} | {rec['setup']['keygen_s']:.1f} | {rec['passed']}/{rec['failed']} |")


def _ref_row(r: dict) -> str:
    """One published papers/000 row as a Markdown row."""
    return (f"| {r['K']:,} | {r['Km']} | {r['approach']} | papers/000 Table {r['table']}, 40 threads | {r['rtt_s']:.2f} | "
            f"{r['membership_s']:.2f} ± {r['membership_std_s']:.2f} | {r['index_s']:.2f} ± {r['index_std_s']:.2f} | "
            f"{r['ram_gb']:.1f} ± {r['ram_std_gb']:.1f} | {r['disk_gb']:.2f} | - | - | - | - |")


def markdown_table(doc: dict, ref: dict | None = None) -> str:
    """Our figures and the published ones of papers/000 (same K, kappa, CPU approaches) as Markdown.

    At a secure preset the published rows sit beside ours, K by K. At an
    INSECURE preset (``toy``, ``toy-real``) they are not comparable: our
    rows are marked INSECURE and the published ones go to a separate table,
    for reference only. A figure of a single timed trial is shown without
    ``±`` and marked ``(n=1)``.
    """
    ref = ref if ref is not None else load_reference()
    p, hw = doc["parameters"], doc["hardware"]
    insecure = p["preset"] if p.get("insecure") else ""
    lines = [
        f"# encmatch benchmark ({p['workload']} workload)",
        "",
        f"Machine: {hw['cpu']}, {hw['cores']} cores, {hw['ram_bytes'] / GB:.1f} GB RAM. "
        f"Parameters: preset {p['preset']}{' (INSECURE)' if insecure else ''}, N = 2^{p['log_n']}, "
        f"log QP {float(p['log_qp'] or 0):.0f}, kappa {p['kappa']}, dim {p['dim']}, delta {p.get('delta')}, "
        f"Km = {p['matches']}, {p['trials']} trials (trial 1 = setup; mean ± population std of trials 2..t "
        f"that passed, n in the passed column; a single passing trial is shown as its value with (n=1), no ±).",
        "",
    ]
    if insecure:
        lines += [f"**INSECURE: preset {insecure} gives no security (a small ring, for tests). These figures are "
                  "not comparable with the published ones of papers/000, which are at secure parameters; those "
                  "are listed apart below, for reference only.**", ""]
    refs = _reference_rows(doc, ref)
    if refs and refs[0]["kappa"] != p["kappa"]:
        lines += [f"The papers/000 rows are at their kappa {refs[0]['kappa']}, not ours: a comparison of "
                  "cost at the papers' setting, not at the same comparator.", ""]
    margins = sorted({round(w["margin"], 4) for w in doc["workloads"].values()}) if doc["workloads"] else []
    if margins:
        lines += [f"Comparator at kappa {p['kappa']}: value band +-{margins[-1]} around delta "
                  "(membership counts are exact for scores outside it; docs/COMPARATOR.md).", ""]
    lines += [
        "Membership and identification: server-side search time. RTT: membership round trip "
        "(encrypt, search, decrypt) in ours; in papers/000 RTT is enrollment + mean wall time of a whole run. "
        "RAM: peak RSS of the process (sampled every 0.5 s). Disk: keys + index. Index/entry: encrypted gallery "
        "bytes per entry (seeded = the key owner's secret-key enrollment, else public-key).",
        "",
    ]
    if insecure:
        lines.append(f"## encmatch at preset {insecure} (INSECURE)")
        lines.append("")
    lines += _TABLE_HEAD
    for size in sorted({rec["K"] for rec in doc["configs"]}):
        for rec in (r for r in doc["configs"] if r["K"] == size):
            lines.append(_our_row(rec, hw["cores"], insecure))
        if not insecure:
            lines += [_ref_row(r) for r in refs if r["K"] == size]
    if insecure and refs:
        lines += ["", "## papers/000, published (secure parameters): reference only, NOT comparable with the "
                      f"INSECURE {insecure} rows above", ""] + _TABLE_HEAD + [_ref_row(r) for r in refs]
    lines += ["", f"papers/000 hardware: {ref['hardware']['CPU']}. Approaches: "
              + "; ".join(f"{k} = {v}" for k, v in ref["approaches"].items() if "CPU" in k) + "."]
    if doc["workloads"]:
        lines += ["", "Workload margins (cosine): " + "; ".join(
            f"K = {int(k):,}: planted >= {w['min_planted_score'] if w['min_planted_score'] is None else round(w['min_planted_score'], 4)}, "
            f"others <= {w['max_other_score']:.4f}, delta {w['delta']} ± margin {w['margin']:.3f}"
            for k, w in doc["workloads"].items())]
    return "\n".join(lines) + "\n"


def _plot(doc: dict, path: Path, metrics: Sequence[tuple[str, str | None, str]], ylabel: str, scale: float) -> None:
    """Draw :func:`figure` and write it to ``path``."""
    plt = pyplot()
    fig = figure(doc, metrics, ylabel, scale)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def figure(doc: dict, metrics: Sequence[tuple[str, str | None, str]], ylabel: str, scale: float):
    """A figure of ``metrics`` (``(key, std key or None, label)``) per series (strategy and store).

    Several gallery sizes: a log-log plot against K, one line per series
    and metric, with std error bars where more than one trial passed. One
    size: grouped bars (a line of one point is only a dot). Ticks are
    plain numbers (``0.25``, never ``2.5x10^-1``); an INSECURE preset is
    named in the title.
    """
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    names = list(dict.fromkeys(series(r) for r in doc["configs"]))
    sizes = sorted({r["K"] for r in doc["configs"]})

    def values(recs, key, std_key):
        """(K, value, error, n) of each record with the metric: n the trials averaged (None for a metric
        measured once, without std), error 0 for a single trial."""
        out = []
        for r in recs:
            y = _metric(r, key)
            if y is None:
                continue
            n = r.get("passed") if std_key else None
            e = _metric(r, std_key) if std_key and (n or 0) > 1 else 0.0
            out.append((r["K"], y / scale, (e or 0.0) / scale, n))
        return out

    if len(sizes) == 1:
        bars = [(f"{name}{' ' + label if label else ''}", v)
                for name in names for key, std_key, label in metrics
                for v in values([r for r in doc["configs"] if series(r) == name], key, std_key)]
        x = np.arange(len(bars))
        errors = [b[1][2] for b in bars]
        ax.bar(x, [b[1][1] for b in bars], yerr=errors if any(errors) else None, capsize=3,
               color=[f"C{i % 10}" for i in range(len(bars))])
        for xi, (_label, (_k, y, _e, n)) in zip(x, bars):
            ax.annotate(f"{y:.3g}" + (" (n=1)" if n == 1 else ""), (xi, y), ha="center", va="bottom", fontsize=8, xytext=(0, 2),
                        textcoords="offset points")
        ax.set_xticks(x, [b[0] for b in bars], rotation=20, ha="right", fontsize=8)
        ax.set_xlabel(f"gallery size K = {sizes[0]:,}")
        ax.yaxis.set_major_formatter(plain)
    else:
        for name in names:
            recs = sorted((r for r in doc["configs"] if series(r) == name), key=lambda r: r["K"])
            for key, std_key, label in metrics:
                pts = values(recs, key, std_key)
                if not pts:
                    continue
                k, y, e, _n = zip(*pts)
                ax.errorbar(k, y, yerr=e, marker="o", capsize=3, label=f"{name}{' ' + label if label else ''}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{k:,}" for k in sizes])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
        ax.set_xlabel("gallery size K")
        ax.legend(fontsize=8)
    ax.set_ylabel(ylabel)
    p, hw = doc["parameters"], doc["hardware"]
    insecure = " (INSECURE)" if p.get("insecure") else ""
    ax.set_title(f"{p['workload']}, dim {p['dim']}, kappa {p['kappa']}, {p['preset']}{insecure}; {hw['cores']} cores",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def _metric(rec: dict, key: str | None):
    """A record's metric, looking into ``setup`` for setup metrics; disk is keys + index."""
    if key is None:
        return None
    if key == "disk_bytes":
        return rec["key_disk_bytes"] + rec["index_disk_bytes"]
    return rec.get(key, rec["setup"].get(key))


def check_out_dir(out_dir: str | os.PathLike) -> Path:
    """Raise InvalidArgument unless :func:`write_outputs` can write into ``out_dir``; returns it as a Path.

    Meant before the benchmark runs: ``out_dir`` is a folder or can be
    made (its nearest existing ancestor is a writable folder).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"--out {out} is a file, not a folder")
    probe = out
    while not probe.exists():
        probe = probe.parent
    check_writable_folder(probe, f"--out {out}")
    return out


def write_outputs(doc: dict, out_dir: Path) -> dict[str, Path]:
    """Write results.json, results.csv, time.png, ram.png, disk.png and results.md into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in
             ("results.json", "results.csv", "time.png", "ram.png", "disk.png", "results.md")}
    paths["results.json"].write_text(json.dumps(doc, indent=1, default=_json_default) + "\n")
    with open(paths["results.csv"], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for rec in doc["configs"]:
            w.writerow(_csv_row(doc, rec))
    _plot(doc, paths["time.png"], [("membership_s", "membership_std_s", "membership"),
                                   ("identification_s", "identification_std_s", "identification")], "seconds", 1.0)
    _plot(doc, paths["ram.png"], [("peak_rss_bytes", "peak_rss_bytes_std", "")], "peak RSS (GB)", GB)
    _plot(doc, paths["disk.png"], [("key_disk_bytes", None, "keys"), ("index_disk_bytes", None, "index"),
                                   ("disk_bytes", None, "total")], "disk (GB)", GB)
    paths["results.md"].write_text(markdown_table(doc))
    return paths


def _json_default(obj):
    """JSON encoding of numpy scalars and arrays."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")
