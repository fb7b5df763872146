"""The Ray backend on a local Ray cluster that this module starts (toy preset).

The same index is searched in process and sharded over Ray actors (one
group per actor, and groups spread over two actors): identical, exact
answers. An actor killed before or during a query is restarted, reloads
its shards and the query is retried; a shard that cannot be served fails
the query with a clear error. A service started with ``--backend ray``
answers through the cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import encmatch  # noqa: E402
from encmatch import EncryptedIndex  # noqa: E402
from encmatch.cluster import RayBackend, RayServer, shard_groups  # noqa: E402
from encmatch.errors import Corrupt, InvalidArgument, Mismatch, ShardUnavailable  # noqa: E402
from encmatch.server import SearchBackend  # noqa: E402
from encmatch.service import RemoteIndex  # noqa: E402
from conftest import run_cli  # noqa: E402
from encmatch.service.measure import (  # noqa: E402
    ServerProcess,
    add_tenant,
    expected_results,
    same_answer,
    separated_gallery,
)

DIM = 16
DELTA = 0.5
MODES = ("membership", "identification")


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster for this module: 6 logical CPUs on whatever cores there are, and one logical GPU
    (Ray places actors on it; nothing here runs on a GPU)."""
    ray.init(num_cpus=6, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def data():
    """A gallery of 4,300 entries (3 groups at the toy preset) and one query per identity."""
    rng = np.random.default_rng(5)
    gallery, _, queries = separated_gallery(rng, DIM, 4300, 12)
    return {"gallery": gallery, "queries": queries}


@pytest.fixture(scope="module")
def index_path(tmp_path_factory, data):
    """An index of ``data`` in three groups (two adds), made and closed in process."""
    path = tmp_path_factory.mktemp("cluster") / "idx"
    with EncryptedIndex.create(path, dim=DIM, preset="toy", kappa=8, delta=DELTA, strategy="bsgs-tbe") as index:
        index.add(data["gallery"][:3000])
        index.add(data["gallery"][3000:])
        assert len(index.info()["groups"]) == 3
    return path


def exact(index, data, queries=None, modes=MODES):
    """Assert that ``index`` answers every query exactly (brute force), in every mode."""
    queries = data["queries"] if queries is None else queries
    for mode in modes:
        got = index.search(queries, mode)
        want = expected_results(data["gallery"], queries, DELTA, mode)
        for g, w in zip(got, want):
            assert same_answer(g, w), f"{mode}: {g} != {w}"


def test_shard_layout():
    assert shard_groups(5, shards_per_actor=2) == [[0, 1], [2, 3], [4]]
    assert shard_groups(5, workers=2) == [[0, 1, 2], [3, 4]]
    assert shard_groups(2, workers=4) == [[0], [1]]
    with pytest.raises(InvalidArgument):
        shard_groups(0)
    with pytest.raises(InvalidArgument):
        shard_groups(3, shards_per_actor=0)
    for bad in (-1.0, float("nan")):
        with pytest.raises(InvalidArgument, match="recovery_wait"):
            RayBackend(recovery_wait=bad)


def test_refuses_a_layout_the_cluster_cannot_place(cluster, index_path):
    keys = index_path / "keys" / "server"
    with pytest.raises(InvalidArgument, match=r"need 1.5 GPUs; the Ray cluster has 1, 1 free"):
        RayBackend(workers=1, num_gpus=1.5).open(index_path / "index", keys)
    with pytest.raises(InvalidArgument, match=r"3 actors x 4 CPUs need 12 CPUs"):
        RayBackend(shards_per_actor=1, num_cpus=4).open(index_path / "index", keys)
    # Fits the cluster but not what another open index leaves free: refused after the wait, not left pending.
    with RayBackend(workers=1, num_cpus=4).open(index_path / "index", keys):
        with pytest.raises(InvalidArgument, match=r"need 3 CPUs; the Ray cluster has 6, 2 free"):
            RayBackend(workers=3, num_cpus=1, placement_wait=0.5).open(index_path / "index", keys)


@pytest.mark.parametrize("backend", [RayBackend(shards_per_actor=1), RayBackend(workers=2)],
                         ids=["one-group-per-actor", "two-actors"])
def test_same_answers_as_in_process(cluster, index_path, data, backend):
    with EncryptedIndex(index_path) as local:
        exact(local, data)
    with EncryptedIndex(index_path, backend=backend) as sharded:
        exact(sharded, data)
        server = sharded._open_server()
        assert isinstance(server, RayServer) and isinstance(server, SearchBackend)
        assert [i["groups"] for i in server.actor_info] == shard_groups(3, backend.shards_per_actor, backend.workers)
        assert server.last_search["groups"] == 3
        assert all(i["threads"] == 1 for i in server.actor_info)  # each actor's share of the CPUs


def test_shards_share_a_gpu(cluster, index_path, data):
    with EncryptedIndex(index_path, backend=RayBackend(workers=2, num_gpus=0.5)) as index:
        exact(index, data, modes=("identification",))
        gpus = [i["gpus"] for i in index._open_server().actor_info]
        assert gpus[0] == gpus[1] and len(gpus[0]) == 1, gpus  # two actors, one GPU
        with pytest.raises(InvalidArgument, match=r"need 1 GPUs; the Ray cluster has 1, 0 free"):
            RayBackend(workers=2, num_gpus=0.5, placement_wait=0.5).open(index_path / "index", index.client.server_key_dir)


def _kill(server: RayServer, shard: int) -> int:
    """SIGKILL the process of shard ``shard``'s actor; returns its pid."""
    pid = server.actor_info[shard]["pid"]
    os.kill(pid, signal.SIGKILL)
    return pid


def _pid(server: RayServer, shard: int) -> int:
    return ray.get(server._actors[shard].info.remote())["pid"]


def test_dead_actor_is_restarted_and_the_query_retried(cluster, index_path, data):
    with EncryptedIndex(index_path, backend=RayBackend(shards_per_actor=1, max_restarts=3, task_retries=3)) as index:
        exact(index, data, modes=("identification",))
        server = index._open_server()
        # Killed between queries: the next query finds it dead, Ray restarts it, the query is retried.
        old = _kill(server, 1)
        exact(index, data, modes=("membership",))
        assert _pid(server, 1) != old
        # Killed while the query runs: the shard's search is retried on the restarted actor.
        server.actor_info = [ray.get(a.info.remote()) for a in server._actors]
        q = index.client.encrypt_query(data["queries"][0])
        killer = threading.Timer(0.05, _kill, (server, 0))
        killer.start()
        t0 = time.monotonic()
        result = server.search(q, "identification")
        killer.join()
        got = index.client.decrypt(result)
        want = expected_results(data["gallery"], data["queries"][:1], DELTA, "identification")[0]
        assert same_answer(got, want)
        assert _pid(server, 0) != server.actor_info[0]["pid"], f"actor 0 was not restarted ({time.monotonic() - t0:.2f} s)"


def test_unservable_shard_fails_clearly(cluster, index_path, data, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(index_path, broken)
    manifest = (broken / "index" / "manifest.json").read_text()
    group_files = sorted(p for p in (broken / "index").iterdir() if p.name != "manifest.json" and p.is_file())
    assert group_files, manifest
    victim = group_files[1]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # truncated group file
    with EncryptedIndex(broken, backend=RayBackend(shards_per_actor=1)) as index:
        with pytest.raises(ShardUnavailable,
                           match=r"groups \[\d\] \(entries \d+-\d+\) cannot be served: .*corrupt or truncated"):
            index.search(data["queries"][0])
    # Streamed, the group is read at query time: the query fails with the core's error, naming the shard.
    with EncryptedIndex(broken, memory_budget=1, backend=RayBackend(shards_per_actor=1)) as index:
        with pytest.raises(Corrupt, match=r"groups \[\d\] \(entries \d+-\d+\)"):
            index.search(data["queries"][0])
    # An actor that may not be restarted: its shard is unavailable, the query fails (never a partial answer).
    with EncryptedIndex(index_path, backend=RayBackend(shards_per_actor=1, max_restarts=0)) as index:
        exact(index, data, modes=("membership",))
        _kill(index._open_server(), 2)
        with pytest.raises(ShardUnavailable, match=r"groups \[2\]"):
            index.search(data["queries"][0], "membership")


def test_keys_of_another_key_set_refused_before_any_actor(cluster, index_path, tmp_path):
    encmatch.Client.generate(tmp_path / "other", preset="toy", kappa=8, dim=DIM, strategy="bsgs-tbe").close()
    with pytest.raises(Mismatch, match="key set"):
        RayBackend().open(index_path / "index", tmp_path / "other" / "server")


def test_service_with_ray_backend(cluster, index_path, data, tmp_path):
    data_dir = tmp_path / "svc"
    token = add_tenant(data_dir, "alice")
    proc = ServerProcess(data_dir, "--allow-insecure", "--backend", "ray", "--ray-address", cluster,
                         "--shards-per-actor", "2").start()
    try:
        remote = RemoteIndex.create(proc.url, token, index_path / "keys", DELTA, label="ray")
        remote.add(data["gallery"][:3000])
        remote.add(data["gallery"][3000:])
        exact(remote, data)
        remote.close()
    finally:
        code = proc.stop()
        proc.kill()
    assert code == 0, proc.log()[-3000:]
    assert "Traceback" not in proc.log(), proc.log()[-5000:]


def test_cli_query_on_ray(cluster, index_path, data, tmp_path):
    np.save(tmp_path / "q.npy", data["queries"][3])
    keys, index = index_path / "keys", index_path / "index"
    outputs = []
    for extra in ((), ("--backend", "ray", "--ray-address", cluster, "--ray-workers", "2", "--spread",
                       "--recovery-wait", "30")):
        out = tmp_path / f"r{len(outputs)}.bin"
        q = run_cli("query", "--keys", keys, "--index", index, "--out", out, tmp_path / "q.npy", *extra)
        assert q.returncode == 0, q.stderr
        d = run_cli("decrypt", "--keys", keys, "--index", index, "--json", out)
        assert d.returncode == 0, d.stderr
        outputs.append(json.loads(d.stdout))
    assert outputs[0] == outputs[1]
    want = expected_results(data["gallery"], data["queries"][3:4], DELTA, "identification")[0]
    assert outputs[0]["positions"] == want.positions.tolist()


def test_set_threads():
    before = encmatch.params.set_threads(0)["threads"]
    try:
        assert encmatch.params.set_threads(1) == {"previous": before, "threads": 1}
        with pytest.raises(InvalidArgument):
            encmatch.params.set_threads(-1)
    finally:
        encmatch.params.set_threads(before)


def test_payload_mode_through_ray(cluster, tmp_path):
    """Payload results of the shards are laid out for the whole index and merged by the core (cells added):
    the sharded answer equals the in-process one and brute force, for every query."""
    from encmatch.evaluation.bruteforce import payload_search
    from encmatch.data import separated_gallery

    rng = np.random.default_rng(8)
    # 16 orthogonal identities: identities 0-11 (the queries) keep 3 entries each, 12-15 pad to 2 groups.
    entries, who, queries = separated_gallery(rng, DIM, 9000, 16)
    keep = np.concatenate([np.flatnonzero(who == p)[:3] for p in range(12)] + [np.flatnonzero(who >= 12)])
    gallery, queries = entries[np.sort(keep)], queries[:12]
    assert len(gallery) > 2048
    payloads = rng.integers(-32768, 32768, size=(len(gallery), 3), dtype=np.int16)
    path = tmp_path / "payload-idx"
    with EncryptedIndex.create(path, dim=DIM, preset="toy", kappa=8, delta=DELTA, strategy="bsgs-tbe",
                               payload_width=3, rule=">") as index:
        index.add(gallery, payloads=payloads)
        assert len(index.info()["groups"]) == 2
        local = index.search(queries, mode="payload", bound=8)
    want = payload_search(gallery, payloads, queries, DELTA, rule=">", bound=8)
    assert all(w.count == 3 for w in want)
    with EncryptedIndex(path, backend=RayBackend(workers=2)) as sharded:
        got = sharded.search(queries, mode="payload", bound=8)
        assert sharded._open_server().last_search["groups"] == 2
    for g, l, w in zip(got, local, want):
        assert g.count == l.count == w.count
        np.testing.assert_array_equal(g.payloads, w.payloads)
        np.testing.assert_array_equal(l.payloads, w.payloads)
