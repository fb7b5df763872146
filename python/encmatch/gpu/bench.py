"""Benchmark and conformance check of the GPU engine
(``python -m encmatch.gpu.bench --out DIR``).

On one machine, in one run:

1. conformance at the ``toy`` preset for each strategy asked for: the same
   encrypted queries through the CPU engine (the core) and the GPU engine
   give the same result bytes in both modes;
2. at the secure preset (or the one asked for): a key set, an index of
   ``--groups`` groups of random unit vectors (each group holds 2^(logN-1)
   entries), the CPU engine's answers and timings, the GPU engine's
   answers (byte-compared with the CPU engine's) and timings for 1 to
   ``--groups`` groups, and for more groups by replicating the enrolled
   groups' ciphertexts on the device (the arithmetic does not depend on the
   data; rows say ``replicated``), GPU memory per group and for the keys;
   with ``--payload-width W`` also payload fetches (conformance and end
   to end timing, the core's compaction included);
3. with ``--processes 2``: two processes sharing the GPU, each searching
   its own one-group shard, against one process alone.

Results go to ``DIR/gpu-bench.json``; every number is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..keyholder import Client
from ..enroller import Enroller
from ..server import Server

__all__ = ["main"]


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _near(rng: np.random.Generator, v: np.ndarray, cos: float) -> np.ndarray:
    """A unit vector at cosine cos from unit vector v."""
    w = rng.normal(size=v.shape).astype(np.float64)
    w -= w.dot(v) * v
    w /= np.linalg.norm(w)
    return (cos * v + np.sqrt(1 - cos * cos) * w).astype(np.float32)


def _make_index(work: Path, preset: str, kappa: int, dim: int, strategy: str, n: int, seed: int, delta: float = 0.5,
                owner: bool = False, fold: bool = False, n1: int = 0,
                payload_width: int = 0) -> tuple[Path, Path, list[np.ndarray], dict]:
    """Keys, an index of n random unit vectors (with a crowd planted around
    delta for the first query) and three queries; with timings. With owner
    the key owner enrolls (secret-key encryption, seeded halves); with fold
    the key set folds (half the diagonals); with payload_width a payload
    key set and that many random int16 payload values per record."""
    rng = np.random.default_rng(seed)
    keys, index = work / "keys", work / "index"
    t = time.perf_counter()
    Client.generate(keys, preset=preset, kappa=kappa, dim=dim, strategy=strategy, fold=fold, n1=n1,
                    payload=payload_width > 0).close()
    keygen = time.perf_counter() - t
    gallery = _unit(rng, n, dim)
    queries = [gallery[3].copy(), _unit(rng, 1, dim)[0], gallery[n - 1].copy()]
    for i, c in enumerate(np.linspace(delta - 0.2, delta + 0.2, min(40, n // 4))):
        gallery[10 + i] = _near(rng, queries[0], float(c))
    en = Enroller(keys / "server", owner_key_dir=keys if owner else None)
    en.create_index(index, delta, payload_width=payload_width)
    pays = rng.integers(-2**15, 2**15, size=(n, payload_width), dtype=np.int16) if payload_width else None
    t = time.perf_counter()
    en.enroll(index, gallery, payloads=pays, progress=False)
    enroll = time.perf_counter() - t
    return keys, index, queries, {"keygen_seconds": keygen, "enroll_seconds": enroll, "entries": n}


def _conformance(work: Path, strategies: list[str], device: str, log: Any) -> list[dict]:
    from .server import GpuServer

    rows = []
    for i, strategy in enumerate(strategies):
        keys, index, queries, info = _make_index(work / f"toy-{strategy}", "toy", 13, 64, strategy, 3000, seed=i)
        client = Client(keys)
        cpu = Server(index, keys / "server")
        gpu = GpuServer(index, keys / "server", device=device)
        for q in queries:
            qb = client.encrypt_query(q)
            for mode in ("membership", "identification"):
                a = cpu.search(qb, mode)
                b = gpu.search(qb, mode)
                rows.append({"preset": "toy", "strategy": strategy, "mode": mode, "equal": a == b})
                log(f"toy {strategy} {mode}: {'equal' if a == b else 'DIFFERENT'}")
        cpu.close()
        gpu.close()
        client.close()
    return rows


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def _time_compute(gpu: Any, q: np.ndarray, mode: str, diags: list, trials: int, graphs: bool) -> dict:
    """Median of trials searches, after a warm-up (kernels compiled, pools
    filled, the graph captured), eager or as a CUDA graph."""
    gpu.graphs = graphs
    first = time.perf_counter()
    gpu.compute(q, mode, diags)
    first = time.perf_counter() - first
    totals, phases = [], []
    launches = gpu.backend.launches
    for _ in range(trials):
        _, st = gpu.compute(q, mode, diags)
        totals.append(st["seconds"])
        phases.append(st)
    out = {"median_seconds": _median(totals), "min_seconds": min(totals), "max_seconds": max(totals),
           "trials": trials, "first_call_seconds": first, "graph": bool(phases[-1].get("graph")),
           "launches_per_search": (gpu.backend.launches - launches) / trials}
    for k in ("rotations_seconds", "similarity_seconds", "comparison_seconds", "aggregation_seconds"):
        if k in phases[-1]:
            out[k] = _median([p[k] for p in phases])
    return out


def _secure(work: Path, args: argparse.Namespace, log: Any) -> dict:
    from .server import GpuServer

    out: dict[str, Any] = {"preset": args.preset, "kappa": args.kappa, "dim": args.dim, "strategy": args.strategy,
                           "fold": bool(args.fold), "n1": args.n1, "payload_width": args.payload_width}
    modes = ["membership", "identification"] + (["payload"] if args.payload_width else [])
    from .. import _core

    slots = int(_core.call("describe", {"preset": args.preset, "kappa": args.kappa, "dim": args.dim,
                                        "fold": bool(args.fold)})[0]["slots"])
    n = args.groups * slots
    keys, index, queries, info = _make_index(work / "secure", args.preset, args.kappa, args.dim, args.strategy, n, seed=7,
                                             owner=args.owner_enroll, fold=args.fold, n1=args.n1,
                                             payload_width=args.payload_width)
    out.update(info)
    log(f"{args.preset}: keys in {info['keygen_seconds']:.1f} s, {n} entries enrolled in {info['enroll_seconds']:.1f} s")
    client = Client(keys)
    qbs = [client.encrypt_query(q) for q in queries][: max(1, args.cpu_queries)]
    cpu_res: dict = {}
    if args.cpu_queries > 0:
        t = time.perf_counter()
        cpu = Server(index, keys / "server")
        out["cpu_open_seconds"] = time.perf_counter() - t
        cpu_t = {}
        for mode in modes:
            ts = []
            for qb in qbs:
                t = time.perf_counter()
                cpu_res[(mode, qb)] = cpu.search(qb, mode)
                ts.append(time.perf_counter() - t)
            cpu_t[mode] = _median(ts)
            log(f"cpu engine {mode}, {args.groups} groups: median {cpu_t[mode]:.2f} s over {len(ts)} queries")
        out["cpu_seconds"] = cpu_t
        cpu.close()

    t = time.perf_counter()
    gpu = GpuServer(index, keys / "server", device=args.device)
    out["device"] = gpu.device
    out["gpu_open_seconds"] = time.perf_counter() - t
    pool = None
    if gpu.device == "cuda":
        import cupy

        pool = cupy.get_default_memory_pool()
        out["gpu_pool_bytes_after_open"] = int(pool.used_bytes())
    out["gpu_bytes_per_group"] = int(gpu._diags[0].nbytes)
    out["gpu_key_bytes"] = int(gpu.keys.nbytes)
    log(f"gpu open {out['gpu_open_seconds']:.1f} s; {out['gpu_bytes_per_group'] / 2**30:.2f} GiB per group, keys {out['gpu_key_bytes'] / 2**30:.2f} GiB")
    equal = []
    for mode in modes:
        for qb in qbs:
            b = gpu.search(qb, mode)
            if (mode, qb) in cpu_res:
                equal.append({"mode": mode, "equal": b == cpu_res[(mode, qb)]})
    out["conformance"] = equal
    out["graphs"], out["graph_error"] = gpu.graphs, gpu.graph_error
    if equal:
        log(f"secure conformance ({'graphs' if gpu.graphs else 'eager'}): {sum(e['equal'] for e in equal)} of {len(equal)} results byte-identical"
            + (f" [graphs off: {gpu.graph_error}]" if gpu.graph_error else ""))
    if args.payload_width:
        out["gpu_payload"] = _time_payload(gpu, qbs[0], args.trials, log)
    _, raw = _query_array(gpu, qbs[0])
    if args.profile:
        out["profile"] = _profile(gpu, raw, log)
    rows = []
    g = 1
    while g <= args.groups * args.replicate:
        diags = [gpu._diags[i % len(gpu._diags)] for i in range(g)]
        for mode in ("membership", "identification"):
            for graphs in ((False, True) if gpu.device == "cuda" else (False,)):
                row = {"groups": g, "entries": g * slots, "mode": mode, "replicated": g > len(gpu._diags)}
                row.update(_time_compute(gpu, raw, mode, diags, args.trials, graphs))
                rows.append(row)
                phases = ""
                if "similarity_seconds" in row:
                    phases = (f" (rot {row['rotations_seconds'] * 1e3:.1f}, sim {row['similarity_seconds'] * 1e3:.1f}, "
                              f"cmp {row['comparison_seconds'] * 1e3:.1f}, agg {row['aggregation_seconds'] * 1e3:.1f}; "
                              f"{row['launches_per_search']:.0f} launches)")
                log(f"gpu K={g * slots} ({g} groups{', replicated' if row['replicated'] else ''}) {mode} "
                    f"{'graph' if row['graph'] else 'eager'}: median {row['median_seconds'] * 1e3:.1f} ms{phases}"
                    + (f" [graphs off: {gpu.graph_error}]" if graphs and not row["graph"] else ""))
        if gpu.device == "cuda":
            gpu.release_graphs()
            gpu.graphs = True
        g *= 2
    out["gpu_timings"] = rows
    if pool is not None:
        out["gpu_pool_bytes_peak_after_timings"] = int(pool.total_bytes())
    out["index_dir"], out["key_dir"] = str(index), str(keys)
    gpu.close()
    client.close()
    return out


def _time_payload(gpu: Any, qb: bytes, trials: int, log: Any) -> dict:
    """A payload fetch end to end through :meth:`GpuServer.search` (the
    device's similarity and comparator, then the core's compaction on the
    CPU): medians of trials after a warm-up."""
    gpu.search(qb, "payload")
    total, core = [], []
    for _ in range(trials):
        t = time.perf_counter()
        gpu.search(qb, "payload")
        total.append(time.perf_counter() - t)
        core.append(gpu.last_search["framing_seconds"])
    row = {"median_seconds": _median(total), "compaction_median_seconds": _median(core), "trials": trials}
    log(f"gpu payload fetch, {len(gpu._diags)} groups: median {row['median_seconds'] * 1e3:.1f} ms "
        f"(the core's compaction {row['compaction_median_seconds'] * 1e3:.1f} ms)")
    return row


def _profile(gpu: Any, q: np.ndarray, log: Any) -> dict:
    """Per-kernel times of one eager membership search over all the
    shard's groups (after a warm-up)."""
    graphs, gpu.graphs = gpu.graphs, False
    gpu.compute(q, "membership", gpu._diags)
    gpu.backend.profile_start()
    _, st = gpu.compute(q, "membership", gpu._diags)
    prof = gpu.backend.profile_stop()
    gpu.graphs = graphs
    total = sum(v["ms"] for v in prof.values())
    log(f"profile of one eager membership search ({st['seconds'] * 1e3:.1f} ms with events; kernels {total:.1f} ms):")
    for name, v in sorted(prof.items(), key=lambda kv: -kv[1]["ms"]):
        log(f"  {name:16s} {v['launches']:6d} launches {v['ms']:8.2f} ms ({v['ms'] / v['launches'] * 1e3:.1f} us each)")
    return {"search_seconds": st["seconds"], "kernels": prof}


def _query_array(gpu: Any, qb: bytes) -> tuple[dict, np.ndarray]:
    from .. import _core

    info, raw = _core.call("offload_query", {"handle": gpu._handle.get()}, qb)
    return info, np.frombuffer(raw, dtype="<u8").reshape(2, int(info["level"]) + 1, gpu.ring.n)


def _worker(args: argparse.Namespace) -> None:
    """One process of the shared-GPU run: opens a one-group shard, waits for
    the start file, then searches and prints its timings as JSON."""
    from .server import GpuServer

    gpu = GpuServer(args.index, Path(args.keys) / "server", groups=[args.group], device=args.device)
    client = Client(args.keys)
    _, q = _query_array(gpu, client.encrypt_query(_unit(np.random.default_rng(1), 1, args.dim)[0]))
    gpu.compute(q, "membership", gpu._diags)  # warm-up (and the graph's capture)
    Path(args.ready).touch()
    while not Path(args.start).exists():
        time.sleep(0.01)
    ts = []
    t0 = time.perf_counter()
    for _ in range(args.trials):
        _, st = gpu.compute(q, "membership", gpu._diags)
        ts.append(st["seconds"])
    print(json.dumps({"group": args.group, "median_seconds": _median(ts), "wall_seconds": time.perf_counter() - t0,
                      "trials": args.trials, "graph": gpu.graphs}))


def _shared(work: Path, secure: dict, args: argparse.Namespace, log: Any) -> dict:
    procs, ready = [], []
    start = work / "start"
    for g in range(args.processes):
        rd = work / f"ready{g}"
        ready.append(rd)
        cmd = [sys.executable, "-m", "encmatch.gpu.bench", "--worker", "--index", secure["index_dir"], "--keys", secure["key_dir"],
               "--group", str(g % args.groups), "--trials", str(args.trials), "--dim", str(args.dim), "--ready", str(rd), "--start", str(start),
               "--device", args.device]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    deadline = time.time() + 600
    while not all(r.exists() for r in ready):
        if time.time() > deadline or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.05)
    t0 = time.perf_counter()
    start.touch()
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    wall = time.perf_counter() - t0
    total = sum(o["trials"] for o in outs)
    res = {"processes": args.processes, "per_process": outs, "wall_seconds": wall, "searches_per_second": total / wall}
    log(f"{args.processes} processes sharing the GPU: {res['searches_per_second']:.2f} one-group membership searches/s "
        f"(medians {[round(o['median_seconds'] * 1e3, 1) for o in outs]} ms)")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m encmatch.gpu.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("gpu-bench"))
    ap.add_argument("--work", type=Path, default=None, help="work directory (default: OUT/work)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--toy-strategies", default="bsgs-tbe,dg,bsgs-diagonal,bsgs-tbs")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--kappa", type=int, default=13)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--strategy", default="bsgs-tbe")
    ap.add_argument("--n1", type=int, default=0, help="baby-step size at the secure preset (0: the default)")
    ap.add_argument("--groups", type=int, default=2, help="groups enrolled at the secure preset")
    ap.add_argument("--replicate", type=int, default=4, help="time up to groups x replicate groups")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--processes", type=int, default=0)
    ap.add_argument("--skip-secure", action="store_true")
    ap.add_argument("--cpu-queries", type=int, default=3, help="queries through the CPU engine (0: none, no conformance)")
    ap.add_argument("--owner-enroll", action="store_true", help="enroll as the key owner (seeded halves)")
    ap.add_argument("--fold", action="store_true", help="a folded key set (each vector's halves in complex slots)")
    ap.add_argument("--payload-width", type=int, default=0,
                    help="a payload key set and index with this many int16 values per record; times payload fetches")
    ap.add_argument("--profile", action="store_true", help="per-kernel times of one search")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--index", help=argparse.SUPPRESS)
    ap.add_argument("--keys", help=argparse.SUPPRESS)
    ap.add_argument("--group", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    ap.add_argument("--start", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    logf = open(args.out / "gpu-bench.log", "a")

    def log(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    result: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        result["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        result["gpu_memory_bytes"] = int(props["totalGlobalMem"])
    except Exception as exc:  # no GPU: the toy conformance still runs on the CPU backend
        result["gpu"] = f"none ({type(exc).__name__})"
    log(f"device {result['gpu']}, {result['cpus']} CPUs")

    def save() -> None:
        tmp = args.out / "gpu-bench.json.tmp"
        tmp.write_text(json.dumps(result, indent=1, default=str))
        os.replace(tmp, args.out / "gpu-bench.json")

    strategies = [s for s in args.toy_strategies.split(",") if s]
    result["toy_conformance"] = _conformance(work, strategies, args.device, log)
    save()
    if not args.skip_secure:
        result["secure"] = _secure(work, args, log)
        save()
        if args.processes > 1:
            result["shared"] = _shared(work, result["secure"], args, log)
            save()
    ok = all(r["equal"] for r in result["toy_conformance"]) and all(e["equal"] for e in result.get("secure", {}).get("conformance", []))
    log("all results byte-identical" if ok else "SOME RESULTS DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
