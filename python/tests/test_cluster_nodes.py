"""A sharded search on a two-node Ray cluster (toy preset).

A head and a worker node are started separately with ``ray start`` on
loopback, each with its own temporary directory and object store
(:class:`encmatch.cluster.localnodes.LocalCluster`). The index's two groups
are spread over two actors, one per node, and every answer equals brute
force. The worker node is then killed (SIGKILL of all its processes, as a
lost machine) while a query runs: its actor is restarted on the head, the
shard's search is retried and the answer is still exact; the next query
too.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from encmatch import EncryptedIndex  # noqa: E402
from encmatch.cluster import RayBackend  # noqa: E402
from encmatch.cluster.localnodes import WORKER_PORTS, LocalCluster, _ephemeral_start, free_port, worker_port_ranges  # noqa: E402
from encmatch.evaluation.bruteforce import expected_results, same_answer
from encmatch.data import separated_gallery  # noqa: E402

DIM = 16
DELTA = 0.5


@pytest.fixture(scope="module")
def nodes():
    """A head and one worker node, 2 logical CPUs each, and this process connected to the head.

    The cluster's token is put in this process's environment for the
    module and removed afterwards, so later modules start their own local
    Ray without it."""
    if ray.is_initialized():
        ray.shutdown()
    root = tempfile.mkdtemp(prefix="emr", dir="/tmp")  # short: Ray's socket paths are limited
    with LocalCluster(root, workers=1, cpus=2) as cluster:
        cluster.connect()
        try:
            cluster.wait_alive(2)
            yield cluster
        finally:
            cluster.disconnect()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def data():
    """A gallery of 4,000 entries (2 groups at the toy preset) and one query per identity."""
    gallery, _, queries = separated_gallery(np.random.default_rng(11), DIM, 4000, 8)
    return {"gallery": gallery, "queries": queries}


@pytest.fixture(scope="module")
def index_path(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("nodes-index") / "idx"
    with EncryptedIndex.create(path, dim=DIM, preset="toy", kappa=8, delta=DELTA, strategy="bsgs-tbe") as index:
        index.add(data["gallery"])
        assert len(index.info()["groups"]) == 2
    return path


def test_port_choices_never_overlap():
    """Worker-port ranges are disjoint and below the kernel's ephemeral range, where every port that
    free_port draws lies (a collision there made `ray start` refuse a node)."""
    start = _ephemeral_start()
    for _ in range(50):
        ranges = worker_port_ranges(3)
        assert all(hi - lo + 1 == WORKER_PORTS and 10000 <= lo and hi < start for lo, hi in ranges)
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))
    taken: set[int] = set()
    ports = [free_port(taken) for _ in range(20)]
    assert len(set(ports)) == 20 and set(ports) == taken and min(ports) >= start


def _exact(index, data, mode):
    got = index.search(data["queries"], mode)
    want = expected_results(data["gallery"], data["queries"], DELTA, mode)
    for g, w in zip(got, want):
        assert same_answer(g, w), f"{mode}: {g} != {w}"


def test_two_nodes_answer_and_survive_a_lost_node(nodes, index_path, data):
    backend = RayBackend(workers=2, num_cpus=1, spread=True, max_restarts=3, task_retries=3)
    with EncryptedIndex(index_path, backend=backend) as index:
        _exact(index, data, "membership")
        _exact(index, data, "identification")
        server = index._open_server()
        placed = {info["node"] for info in server.actor_info}
        assert len(placed) == 2, f"the two shards were not spread over the two nodes: {server.actor_info}"
        worker_node = next(n["NodeID"] for n in ray.nodes() if n["Resources"].get("node-worker1"))
        lost = [i for i, info in enumerate(server.actor_info) if info["node"] == worker_node]
        assert len(lost) == 1

        # The worker node is lost while queries run: its actor comes back on the head, searches are retried.
        # A search can end before the kill lands (about 0.1 s here with vector kernels), so searches run in
        # a loop across the kill, and one more starts after it; every answer must be exact.
        query = index.client.encrypt_query(data["queries"][0])
        want = expected_results(data["gallery"], data["queries"][:1], DELTA, "identification")[0]
        killer = threading.Timer(0.05, nodes.nodes[1].kill)
        killer.start()
        t0 = time.monotonic()
        while True:
            killed = not killer.is_alive()
            got = index.client.decrypt(server.search(query, "identification"))
            assert same_answer(got, want)
            if killed:
                break
        killer.join()
        recovered = time.monotonic() - t0
        assert not nodes.nodes[1].pids(), "the worker node's processes survived the kill"
        infos = [ray.get(a.info.remote()) for a in server._actors]
        assert infos[lost[0]]["node"] != worker_node, f"the lost shard's actor did not move ({recovered:.1f} s)"
        assert infos[lost[0]]["pid"] != server.actor_info[lost[0]]["pid"]
        print(f"query through the lost node answered in {recovered:.1f} s")
        # And the cluster of one node keeps answering exactly.
        _exact(index, data, "membership")
