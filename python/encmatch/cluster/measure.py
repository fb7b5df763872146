"""Measure the Ray backend against the in-process server on one gallery.

``python -m encmatch.cluster.measure --work DIR --out DIR`` generates a key
set (secure preset, bsgs-tbe), enrolls a gallery of ``--groups`` full
groups and a one-group gallery under the same keys, then times the same
membership queries (every answer decrypted and checked against brute
force) in these configurations; the first two together, their queries
interleaved, the others one after the other (they do not all fit in
memory at once):

- ``in-process``: :class:`encmatch.Server`, all cores;
- ``ray-1x2``: one actor with 2 CPUs holding every group;
- ``ray-2x1``: two actors with 1 CPU each, the groups split between them;
- ``ray-1x1``: one actor with 1 CPU holding every group;
- ``ray-1x2-one-group``: one actor with 2 CPUs holding the one-group gallery.

``--profile-only`` runs only ``ray-1x2`` and ``ray-1x2-one-group``, one
after the other (what the profile needs, on a machine that cannot hold the
in-process server and an actor side by side).

It writes ``results.json`` and ``results.md`` (medians, ratios, actors'
peak memory) and the ``cpu-2core`` planning profile derived from them
(``profile.json``: per-shard time and memory of a 2-CPU worker) to
``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._util.extras import require

require("ray")
import ray  # noqa: E402


from ..keyholder import Client
from ..enroller import Enroller
from ..server import Server
from ..params import describe
from ..evaluation.bench import hardware
from ..evaluation.bruteforce import expected_results, same_answer
from ..data import separated_gallery
from .ray_backend import RayBackend, RayServer

__all__ = ["main"]

DELTA = 0.5


def _peak_rss(pid: int) -> int:
    """Peak resident memory (bytes) of a local process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _prepare(work: Path, dim: int, kappa: int, n1: int, groups: int, seed: int) -> dict[str, Any]:
    """Keys, a gallery of ``groups`` full groups and a one-group gallery (reused when present)."""
    keys = work / "keys"
    if not keys.is_dir():
        Client.generate(keys, preset="default", kappa=kappa, dim=dim, strategy="bsgs-tbe", n1=n1).close()
    with Client(keys) as client:
        group_size = int(client.params["group_size"])
        server_keys = client.server_key_dir
    rng = np.random.default_rng(seed)
    gallery, _, queries = separated_gallery(rng, dim, groups * group_size, 16)
    indexes = {}
    for name, n in (("full", groups * group_size), ("one-group", group_size)):
        path = work / f"index-{name}"
        if not path.is_dir():
            enroller = Enroller(server_keys, owner_key_dir=keys)
            enroller.create_index(path, DELTA)
            enroller.enroll(path, gallery[:n], progress=True)
        indexes[name] = (path, gallery[:n])
    return {"keys": keys, "server_keys": server_keys, "indexes": indexes, "queries": queries}


def add_gallery_arguments(ap: argparse.ArgumentParser, kappa: int, queries_help: str) -> None:
    """The options of the measured key set and gallery, shared by this module and ``measure_nodes``."""
    ap.add_argument("--work", type=Path, required=True, help="keys and indexes (reused when present)")
    ap.add_argument("--out", type=Path, required=True, help="results directory")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--kappa", type=int, default=kappa)
    ap.add_argument("--n1", type=int, default=32)
    ap.add_argument("--groups", type=int, default=2, help="groups of the gallery (>= 2)")
    ap.add_argument("--queries", type=int, default=5, help=queries_help)
    ap.add_argument("--seed", type=int, default=0)


def prepare_from_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """Check the gallery options and make (or reuse) the key set and galleries they describe."""
    if args.groups < 2:
        ap.error("--groups must be >= 2")
    args.work.mkdir(parents=True, exist_ok=True)
    return _prepare(args.work, args.dim, args.kappa, args.n1, args.groups, args.seed)


def _time_configs(configs: list[tuple[str, str, RayBackend | None]], setup: dict, queries: int) -> list[dict]:
    """Open configurations together, warm each up, then time ``queries`` checked membership searches of
    each, interleaved (query i on every configuration before query i + 1), and close them."""
    servers, rows = [], []
    for name, index, backend in configs:
        path, _ = setup["indexes"][index]
        t0 = time.perf_counter()
        server = Server(path, setup["server_keys"]) if backend is None else backend.open(path, setup["server_keys"])
        servers.append(server)
        rows.append({"config": name, "index": index, "groups": len(server.manifest.get("groups") or []),
                     "open_seconds": time.perf_counter() - t0, "latencies": [], "wrong": 0})
    with Client(setup["keys"]) as client:
        for i in range(queries + 1):
            q = setup["queries"][i % len(setup["queries"])]
            for (_, index, _), server, row in zip(configs, servers, rows):
                blob = client.encrypt_query(q)
                t = time.perf_counter()
                out = server.search(blob, "membership")
                if i:  # the first search warms up
                    row["latencies"].append(time.perf_counter() - t)
                got = client.decrypt(out)
                want = expected_results(setup["indexes"][index][1], q[None, :], DELTA, "membership")[0]
                row["wrong"] += not same_answer(got, want)
    for server, row in zip(servers, rows):
        row["median_seconds"] = statistics.median(row["latencies"])
        row["interleaved_with"] = [r["config"] for r in rows if r is not row]
        if isinstance(server, RayServer):
            row["actors"] = len(server.layout)
            row["actor_cpus"] = server.backend.num_cpus
            row["actor_peak_rss"] = [_peak_rss(i["pid"]) for i in server.actor_info]
        server.close()
        print(json.dumps({k: v for k, v in row.items() if k != "latencies"}), flush=True)
    return rows


def _profile(rows: dict[str, dict], dim: int, kappa: int, groups: int, out: Path) -> dict:
    """The planning profile of a 2-CPU worker from the measured rows."""
    one, full = rows["ray-1x2-one-group"], rows["ray-1x2"]
    shard_bytes = (max(full["actor_peak_rss"]) - max(one["actor_peak_rss"])) / (groups - 1)
    hw = hardware()
    return {
        "name": "cpu-2core", "shard_size": 16384, "kappa": kappa,
        "description": f"a Ray actor with 2 CPUs ({hw['cpu'] or 'unknown CPU'}, vector kernels {hw['kernels']}), N = 2^15, "
                       f"{dim}-d, kappa {kappa}, bsgs-tbe, groups in memory",
        "shard_seconds": one["median_seconds"], "shard_bytes": shard_bytes,
        "worker_overhead_bytes": max(one["actor_peak_rss"]) - shard_bytes,
        "concurrent": 1, "overhead_seconds": 0.0, "measured": {str(groups): full["median_seconds"]},
        "source": f"python -m encmatch.cluster.measure --kappa {kappa} ({out}): medians of membership "
                  "queries through Ray, merge included; memory is the actors' peak RSS",
    }


def _markdown(rows: dict[str, dict], meta: dict) -> str:
    """The results as a Markdown table with the ratios the docs quote."""
    lines = [f"# Ray backend vs in process ({meta['params']})", "",
             "| config | actors x CPUs | groups | open (s) | median query (s) | queries | wrong | actor peak RSS (GB) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows.values():
        actors = f"{r.get('actors', '-')} x {r.get('actor_cpus', '-')}"
        rss = ", ".join(f"{b / 1e9:.2f}" for b in r.get("actor_peak_rss", [])) or "-"
        lines.append(f"| {r['config']} | {actors} | {r['groups']} | {r['open_seconds']:.1f} | "
                     f"{r['median_seconds']:.3f} | {len(r['latencies'])} | {r['wrong']} | {rss} |")
    m = {k: r["median_seconds"] for k, r in rows.items()}
    lines.append("")
    if {"in-process", "ray-1x2"} <= m.keys():
        paired = [b - a for a, b in zip(rows["in-process"]["latencies"], rows["ray-1x2"]["latencies"])]
        lines.append(f"- Ray overhead per query (1 actor x 2 CPUs vs in process): "
                     f"{m['ray-1x2'] - m['in-process']:+.3f} s between the medians ({m['ray-1x2'] / m['in-process']:.3f}x); "
                     f"median of the {len(paired)} interleaved pairs' differences {statistics.median(paired):+.3f} s "
                     f"(from {min(paired):+.3f} to {max(paired):+.3f} s)")
    if {"ray-1x1", "ray-2x1"} <= m.keys():
        lines.append(f"- 2 workers x 1 CPU vs 1 worker x 1 CPU: {m['ray-1x1'] / m['ray-2x1']:.2f}x faster")
    if {"ray-1x2", "ray-2x1"} <= m.keys():
        lines.append(f"- 2 workers x 1 CPU vs 1 worker x 2 CPUs: {m['ray-1x2'] / m['ray-2x1']:.2f}x faster")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the measurement; see the module doc."""
    ap = argparse.ArgumentParser(prog="python -m encmatch.cluster.measure", description=__doc__.split("\n\n")[0])
    add_gallery_arguments(ap, kappa=8, queries_help="timed queries per configuration")
    ap.add_argument("--profile-only", action="store_true",
                    help="only the two configurations the planning profile needs (ray-1x2 and ray-1x2-one-group), "
                         "one after the other: for a machine without the memory for the in-process server and an "
                         "actor side by side")
    args = ap.parse_args(argv)
    setup = prepare_from_args(ap, args)
    ray.init(include_dashboard=False, log_to_driver=False)
    runs = [[("in-process", "full", None), ("ray-1x2", "full", RayBackend(workers=1, num_cpus=2))],
            [("ray-2x1", "full", RayBackend(workers=2, num_cpus=1))], [("ray-1x1", "full", RayBackend(workers=1, num_cpus=1))],
            [("ray-1x2-one-group", "one-group", RayBackend(workers=1, num_cpus=2))]]
    if args.profile_only:
        runs = [[("ray-1x2", "full", RayBackend(workers=1, num_cpus=2))],
                [("ray-1x2-one-group", "one-group", RayBackend(workers=1, num_cpus=2))]]
    rows = {row["config"]: row for run in runs for row in _time_configs(run, setup, args.queries)}
    ray.shutdown()
    p = describe("default", args.kappa, args.dim)
    meta = {"params": f"N = 2^{p['log_n']}, logQP {round(p['log_qp'])}, kappa {args.kappa}, {args.dim}-d, bsgs-tbe n1 = "
                      f"{args.n1}, {args.groups} groups = {args.groups * int(p['group_size'])} vectors",
            "cores": 2, "delta": DELTA}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (args.out / "results.md").write_text(_markdown(rows, meta))
    (args.out / "profile.json").write_text(json.dumps(_profile(rows, args.dim, args.kappa, args.groups, args.out), indent=2))
    print(_markdown(rows, meta))
    return 0 if not any(r["wrong"] for r in rows.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
