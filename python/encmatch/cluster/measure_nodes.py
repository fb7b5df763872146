"""Measure a sharded search on a two-node Ray cluster, and its recovery from a lost node.

``python -m encmatch.cluster.measure_nodes --work DIR --out DIR`` makes (or
reuses) the key set and the ``--groups``-group gallery of
``encmatch.cluster.measure``, starts a head and a worker node with ``ray
start`` on this host (:class:`~encmatch.cluster.localnodes.LocalCluster`:
separate temporary directories, object stores and ports, one cluster
token), spreads the groups over two 1-CPU actors, one per node, and:

1. times ``--queries`` membership queries (after a warm-up), every answer
   decrypted and compared with brute force;
2. kills the worker node (SIGKILL of all its processes) ``--kill-after``
   seconds into a query and times that query until its (checked) answer:
   Ray declares the node dead, restarts its actor on the head, the actor
   reloads its groups and the shard's search is sent again;
3. times ``--queries`` more queries on the surviving node.

It writes ``results.json`` and ``results.md`` to ``--out``; exit 1 if any
answer differs from brute force.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time

from .._util.extras import require

require("ray")
import ray  # noqa: E402

from ..keyholder import Client
from ..params import describe
from ..evaluation.bruteforce import expected_results, same_answer
from .localnodes import LocalCluster
from .measure import DELTA, _peak_rss, add_gallery_arguments, prepare_from_args
from .ray_backend import RayBackend

__all__ = ["main"]


def _checked(server, client, gallery, q) -> tuple[float, bool]:
    """One membership search: its seconds and whether the decrypted answer equals brute force."""
    blob = client.encrypt_query(q)
    t = time.perf_counter()
    out = server.search(blob, "membership")
    seconds = time.perf_counter() - t
    got = client.decrypt(out)
    return seconds, same_answer(got, expected_results(gallery, q[None, :], DELTA, "membership")[0])


def main(argv: list[str] | None = None) -> int:
    """Run the measurement; see the module doc."""
    ap = argparse.ArgumentParser(prog="python -m encmatch.cluster.measure_nodes", description=__doc__.split("\n\n")[0])
    add_gallery_arguments(ap, kappa=13, queries_help="timed queries before and after the node is lost")
    ap.add_argument("--kill-after", type=float, default=1.0, help="seconds into the query when the node is killed")
    ap.add_argument("--memory-budget-gb", type=float, default=4.0,
                    help="each actor's memory budget (GB); groups that do not fit are streamed from disk per query")
    args = ap.parse_args(argv)
    setup = prepare_from_args(ap, args)
    path, gallery = setup["indexes"]["full"]
    queries = setup["queries"]
    root = tempfile.mkdtemp(prefix="emr", dir="/tmp")
    rows: dict = {"before": [], "after": [], "wrong": 0}
    # The head has a spare CPU for the worker node's actor once that node is lost.
    with LocalCluster(root, workers=1, cpus=1, head_cpus=2) as cluster:
        cluster.connect()
        try:
            cluster.wait_alive(2)
            backend = RayBackend(workers=2, num_cpus=1, spread=True, max_restarts=3, task_retries=3)
            t0 = time.perf_counter()
            server = backend.open(path, setup["server_keys"], memory_budget=int(args.memory_budget_gb * 1e9))
            rows["streamed"] = server.streamed
            rows["open_seconds"] = time.perf_counter() - t0
            nodes = {n["NodeID"]: ("worker" if n["Resources"].get("node-worker1") else "head") for n in ray.nodes()}
            rows["placement"] = [nodes.get(i["node"], "?") for i in server.actor_info]
            with Client(setup["keys"]) as client:
                for i in range(args.queries + 1):
                    s, ok = _checked(server, client, gallery, queries[i % len(queries)])
                    rows["wrong"] += not ok
                    if i:
                        rows["before"].append(s)
                rows["peak_rss_before"] = [_peak_rss(i["pid"]) for i in server.actor_info]
                killer = threading.Timer(args.kill_after, cluster.nodes[1].kill)
                killer.start()
                s, ok = _checked(server, client, gallery, queries[0])
                killer.join()
                rows["wrong"] += not ok
                rows["through_lost_node_seconds"] = s
                server.actor_info = [ray.get(a.info.remote()) for a in server._actors]
                rows["placement_after"] = [nodes.get(i["node"], "?") for i in server.actor_info]
                for i in range(args.queries):
                    s, ok = _checked(server, client, gallery, queries[(i + 1) % len(queries)])
                    rows["wrong"] += not ok
                    rows["after"].append(s)
            server.close()
        finally:
            cluster.disconnect()
            shutil.rmtree(root, ignore_errors=True)
    p = describe("default", args.kappa, args.dim)
    meta = {"params": f"N = 2^{p['log_n']}, logQP {round(p['log_qp'])}, kappa {args.kappa}, {args.dim}-d, bsgs-tbe "
                      f"n1 = {args.n1}, {args.groups} groups = {args.groups * int(p['group_size'])} vectors",
            "cores": 2, "delta": DELTA, "kill_after_seconds": args.kill_after,
            "actor_memory_budget_gb": args.memory_budget_gb,
            "cluster": "head (2 logical CPUs) + worker node (1), each its own ray start, temp dir and object store; "
                       "2 actors x 1 CPU, SPREAD"}
    rows["median_before"] = statistics.median(rows["before"])
    rows["median_after"] = statistics.median(rows["after"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    md = "\n".join([
        f"# Two Ray nodes on one host ({meta['params']})", "",
        f"- {meta['cluster']}; actors on {rows['placement']}, open {rows['open_seconds']:.1f} s; memory budget "
        f"{args.memory_budget_gb:g} GB per actor (groups streamed from disk: {rows['streamed']})",
        f"- before the loss: median {rows['median_before']:.3f} s over {len(rows['before'])} queries "
        f"({min(rows['before']):.3f}-{max(rows['before']):.3f}); actors' peak RSS "
        + ", ".join(f"{b / 1e9:.2f} GB" for b in rows["peak_rss_before"]),
        f"- worker node killed {args.kill_after:g} s into a query: that query answered in "
        f"{rows['through_lost_node_seconds']:.1f} s; actors then on {rows['placement_after']}",
        f"- after: median {rows['median_after']:.3f} s over {len(rows['after'])} queries "
        f"({min(rows['after']):.3f}-{max(rows['after']):.3f})",
        f"- answers different from brute force: {rows['wrong']} of {2 * args.queries + 2}", ""])
    (args.out / "results.md").write_text(md)
    print(md)
    return 0 if not rows["wrong"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
