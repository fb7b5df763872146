"""The GPU engine (:mod:`encmatch.gpu`).

Its kernels are checked against exact arithmetic, and its results, byte
for byte, against the core's CPU engine: on the CPU build of the kernels
everywhere, and on CUDA where a GPU is visible (skipped elsewhere).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from encmatch.keyholder import Client
from encmatch.enroller import Enroller
from encmatch.server import SearchBackend, Server, merge_results
from encmatch.errors import Corrupt, InvalidArgument
from encmatch.gpu import GpuServer, cuda_available, get_backend
from encmatch.gpu.ring import Ring, _bitrev

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not cuda_available(), reason="no CUDA GPU"))]
#: The strategies, and folded key sets ("-folded": each vector's halves in complex slots).
STRATEGIES = ["bsgs-tbe", "bsgs-tbs", "bsgs-diagonal", "dg", "bsgs-tbe-folded", "dg-folded"]
DIM = 32


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _ntt_primes(logn: int, bits: list[int]) -> tuple[list[int], list[int]]:
    """Primes q = 1 mod 2N of the given sizes, with a primitive 2N-th root each."""
    m = 2 << logn
    primes, roots = [], []
    for b in bits:
        q = (1 << b) // m * m + 1
        while not _is_prime(q) or q in primes:
            q -= m
        g = 2
        while pow(pow(g, (q - 1) // m, q), m // 2, q) != q - 1:
            g += 1
        primes.append(q)
        roots.append(pow(g, (q - 1) // m, q))
    return primes, roots


def _ring(device: str, logn: int) -> Ring:
    primes, roots = _ntt_primes(logn, [60, 45, 45, 61])
    return Ring(get_backend(device), {"log_n": logn, "q": primes[:3], "p": primes[3:], "psi": roots})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("logn", [3, 4, 5, 7, 8])
def test_ntt_is_lattigos_transform(device, logn):
    """Forward NTT: out[bitrev(i)] = sum_j x_j psi^((2i+1) j); the inverse undoes it."""
    ring = _ring(device, logn)
    n, rng = ring.n, random.Random(logn)
    rows = [0, 1, 2, 3, 1]  # moduli of five rows, P's included
    x = np.array([[rng.randrange(ring.moduli[m]) for _ in range(n)] for m in rows], dtype=np.uint64)
    x[0, :3] = [0, 1, ring.moduli[0] - 1]
    dev = ring.be.put(x)
    sel = ring._rows(("t", logn), range(len(rows)), rows)
    ring.ntt(dev, sel)
    got = ring.be.get(dev)
    rev = _bitrev(logn)
    for r, m in enumerate(rows):
        q = ring.moduli[m]
        psi = pow(ring.be.get(ring.roots)[m, rev[1]].item(), 1, q)  # psi^1 sits at bitrev(1)
        want = [sum(int(x[r, j]) * pow(psi, (2 * i + 1) * j, q) for j in range(n)) % q for i in range(n)]
        assert [int(got[r, rev[i]]) for i in range(n)] == want
    ring.intt(dev, sel)
    assert np.array_equal(ring.be.get(dev), x)


def _reference_ntt(x: list[int], roots: list[int], q: int) -> list[int]:
    """Lattigo's Cooley-Tukey NTT (bit-reversed twiddles roots[m + i]),
    stage by stage on Python integers."""
    a = np.array(x, dtype=object)
    n, m = len(x), 1
    while m < n:
        t = n // (2 * m)
        blocks = a.reshape(m, 2, t)
        w = np.array(roots[m:2 * m], dtype=object)[:, None]
        u, v = blocks[:, 0, :].copy(), blocks[:, 1, :] * w % q
        blocks[:, 0, :], blocks[:, 1, :] = (u + v) % q, (u - v) % q
        a = blocks.reshape(n)
        m *= 2
    return [int(v) for v in a]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("logn, block_elems", [(12, None), (12, 64), (15, None), (15, 256), (15, 2048)])
def test_ntt_split_into_blocks_is_lattigos_transform(device, logn, block_elems):
    """The NTT's stages in two launches of shared-memory blocks, at every
    block size a launch may pick: equal to the stage-by-stage transform,
    and the inverse undoes it."""
    ring = _ring(device, logn)
    rng = np.random.default_rng(logn)
    rows = [2, 0, 3]
    x = np.stack([rng.integers(0, ring.moduli[m], ring.n, dtype=np.uint64) for m in rows])
    x[1, :4] = [0, 1, ring.moduli[0] - 1, ring.moduli[0] - 2]
    dev = ring.be.put(x)
    sel = ring._rows(("split", logn), range(len(rows)), rows)
    assert len(ring._ntt_chunks(len(rows), block_elems)) == 2
    ring.ntt(dev, sel, block_elems)
    got = ring.be.get(dev)
    roots = ring.be.get(ring.roots)
    for r, m in enumerate(rows):
        want = _reference_ntt([int(v) for v in x[r]], [int(v) for v in roots[m]], ring.moduli[m])
        assert [int(v) for v in got[r]] == want
    ring.intt(dev, sel, block_elems)
    assert np.array_equal(ring.be.get(dev), x)


@pytest.mark.parametrize("device", DEVICES)
def test_products_are_exact_at_the_edges(device):
    """The linear kernel's products and sums against Python integers, with 0, 1 and q - 1."""
    ring = _ring(device, 4)
    n, r, rng = ring.n, 3, random.Random(7)
    edge = lambda q: [0, 1, q - 1, q - 2, (q - 1) // 2] + [rng.randrange(q) for _ in range(n - 5)]
    a = np.array([[edge(ring.moduli[j]) for j in range(r)] for _ in range(2)], dtype=np.uint64)[None]
    b = np.array([[edge(ring.moduli[j])[::-1] for j in range(r)] for _ in range(2)], dtype=np.uint64)[None]
    s = np.array([[[ring.moduli[j] - 1, rng.randrange(ring.moduli[j])] for j in range(r)] for _ in range(2)], dtype=np.uint64)
    c = np.array([[ring.moduli[j] - 1, 3] for j in range(r)], dtype=np.uint64)
    out = ring.be.get(ring.linear([ring.be.put(a), ring.be.put(b)], ring.be.put(s), ring.be.put(c), 1, 1, r))
    for comp in range(2):
        for j in range(r):
            q = ring.moduli[j]
            for k in range(n):
                h = int(k >= n // 2)
                want = (int(s[0, j, h]) * int(a[0, comp, j, k]) + int(s[1, j, h]) * int(b[0, comp, j, k])
                        + (int(c[j, h]) if comp == 0 else 0)) % q
                assert int(out[0, comp, j, k]) == want
    t = ring.be.get(ring.tensor(ring.be.put(a), ring.be.put(b), 1, r))
    for j in range(r):
        q = ring.moduli[j]
        a0, a1, b0, b1 = (int(v) for v in (a[0, 0, j, 2], a[0, 1, j, 2], b[0, 0, j, 2], b[0, 1, j, 2]))
        assert [int(t[0, i, j, 2]) for i in range(3)] == [a0 * b0 % q, (a0 * b1 + a1 * b0) % q, a1 * b1 % q]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """``indexes(strategy)``: keys and a two-group toy index (a crowd planted near delta) and queries."""
    made = {}

    def get(strategy: str):
        if strategy not in made:
            base = tmp_path_factory.mktemp(f"gpu-{strategy}")
            rng = np.random.default_rng(len(made))
            name = strategy.removesuffix("-folded")
            Client.generate(base / "keys", preset="toy", kappa=7, dim=DIM, strategy=name,
                            fold=name != strategy).close()
            gal = _unit(rng, 2600)
            q = gal[7].copy()
            for i, cos in enumerate(np.linspace(0.47, 0.53, 24)):  # scores crowding delta 0.5
                w = _unit(rng, 1)[0]
                w -= w.dot(q) * q
                gal[100 + 90 * i] = cos * q + np.sqrt(1 - cos * cos) * w / np.linalg.norm(w)
            en = Enroller(base / "keys" / "server")
            en.create_index(base / "index", 0.5)
            en.enroll(base / "index", gal, progress=False)
            made[strategy] = (base / "keys", base / "index", [q, _unit(rng, 1)[0]])
        return made[strategy]

    return get


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_results_equal_the_cpu_engines(indexes, device, strategy):
    """The same encrypted queries give the same result bytes on both engines."""
    keys, index, queries = indexes(strategy)
    with Client(keys) as client, Server(index, keys / "server") as cpu, GpuServer(index, keys / "server", device=device) as gpu:
        assert gpu.device == device and len(gpu.groups) == 2
        assert isinstance(cpu, SearchBackend) and isinstance(gpu, SearchBackend)
        for q in queries:
            qb = client.encrypt_query(q)
            for mode in ("membership", "identification"):
                assert gpu.search(qb, mode) == cpu.search(qb, mode), (strategy, mode)
                assert gpu.last_search["groups"] == 2
        if device == "cuda":  # the searches ran as captured CUDA graphs
            assert gpu.graphs and gpu.last_search["graph"], gpu.graph_error


@pytest.fixture(scope="module")
def payload_index(tmp_path_factory):
    """A payload key set (kappa 12: a narrow band, so that the answer
    decodes) and a two-group toy index with 3 payload values per record,
    12 matches planted at cosines 0.51 to 0.9; its payloads and two
    queries."""
    base = tmp_path_factory.mktemp("gpu-payload")
    rng = np.random.default_rng(7)
    Client.generate(base / "keys", preset="toy", kappa=12, dim=DIM, strategy="bsgs-tbe", payload=True).close()
    gal = _unit(rng, 2600)
    q = gal[11].copy()
    for i, cos in enumerate(np.linspace(0.51, 0.9, 12)):
        w = _unit(rng, 1)[0]
        w -= w.dot(q) * q
        gal[150 + 180 * i] = cos * q + np.sqrt(1 - cos * cos) * w / np.linalg.norm(w)
    pays = rng.integers(-2**15, 2**15, size=(len(gal), 3), dtype=np.int16)
    en = Enroller(base / "keys" / "server")
    en.create_index(base / "index", 0.5, payload_width=3)
    en.enroll(base / "index", gal, payloads=pays, progress=False)
    return base / "keys", base / "index", pays, [q, _unit(rng, 1)[0]]


@pytest.mark.parametrize("device", DEVICES)
def test_payload_results_equal_the_cpu_engines(payload_index, device):
    """A payload fetch through the GPU engine (similarity and comparator on the
    device, the cells compacted by the core) gives the CPU engine's bytes,
    for the default bound and a small one, whole and as merged shards; the
    answer holds the matching records' payloads."""
    keys, index, pays, queries = payload_index
    with Client(keys) as client, Server(index, keys / "server") as cpu, \
            GpuServer(index, keys / "server", device=device) as gpu:
        for q in queries:
            qb = client.encrypt_query(q)
            for bound in (None, 4):
                got = gpu.search(qb, "payload", bound=bound)
                assert got == cpu.search(qb, "payload", bound=bound), bound
        qb = client.encrypt_query(queries[0])
        want = client.decrypt(cpu.search(qb, "identification"))
        answer = client.decrypt(gpu.search(qb, "payload"))
        assert answer.complete and answer.count == want.count > 3
        assert sorted(answer.positions.tolist()) == want.positions.tolist()
        for pos, row in zip(answer.positions, answer.payloads):
            assert row.tolist() == pays[pos].tolist()
        with Server(index, keys / "server", groups=[0]) as cpu0, \
                GpuServer(index, keys / "server", groups=[1], device=device) as gpu1:
            merged, info = merge_results(index, [cpu0.search(qb, "payload"), gpu1.search(qb, "payload")])
        assert info["complete"]
        assert sorted(client.decrypt(merged).positions.tolist()) == want.positions.tolist()
        with pytest.raises(InvalidArgument, match="bound"):
            gpu.search(qb, "payload", bound=0)
        with pytest.raises(InvalidArgument, match="bound"):
            gpu.search(qb, "membership", bound=4)


@pytest.mark.parametrize("device", DEVICES)
def test_gpu_shard_merges_with_cpu_shard(indexes, device):
    """A GPU shard's partial result merges with a CPU shard's into the whole search's answer."""
    keys, index, queries = indexes("bsgs-tbe")
    with Client(keys) as client:
        qb = client.encrypt_query(queries[0])
        with Server(index, keys / "server") as whole:
            want = client.decrypt(whole.search(qb, "identification"))
        with Server(index, keys / "server", groups=[0]) as cpu, GpuServer(index, keys / "server", groups=[1], device=device) as gpu:
            merged, info = merge_results(index, [cpu.search(qb, "identification"), gpu.search(qb, "identification")])
        assert info["complete"]
        got = client.decrypt(merged)
        assert got.positions.tolist() == want.positions.tolist() and got.count > 5


def test_bad_input_is_refused(indexes, tmp_path):
    keys, index, queries = indexes("bsgs-tbe")
    with Client(keys) as client, GpuServer(index, keys / "server", device="cpu") as gpu:
        qb = client.encrypt_query(queries[0])
        with pytest.raises(Corrupt):
            gpu.search(qb[:-5], "membership")
        bad = bytearray(qb)
        bad[len(bad) // 2] ^= 0xFF
        with pytest.raises(Corrupt):
            gpu.search(bytes(bad), "membership")
        with pytest.raises(InvalidArgument, match="payload"):
            gpu.search(qb, "payload")
        with pytest.raises(InvalidArgument):
            gpu.search("not bytes", "membership")
    with pytest.raises(InvalidArgument):
        GpuServer(index, keys / "server", groups=[5], device="cpu")
    with pytest.raises(InvalidArgument, match="unknown device"):
        GpuServer(index, keys / "server", device="tpu")
    real = tmp_path / "real"
    Client.generate(real / "keys", preset="toy-real", kappa=7, dim=DIM, strategy="bsgs-tbe").close()
    Enroller(real / "keys" / "server").create_index(real / "index", 0.5)
    with pytest.raises(InvalidArgument, match="standard ring"):
        GpuServer(real / "index", real / "keys" / "server", device="cpu")


def test_ray_gpu_engine_needs_gpus():
    pytest.importorskip("ray")
    from encmatch.cluster.ray_backend import RayBackend

    with pytest.raises(InvalidArgument, match="num_gpus"):
        RayBackend(engine="gpu")
    with pytest.raises(InvalidArgument, match="engine"):
        RayBackend(engine="tpu")


@pytest.mark.skipif(not cuda_available(), reason="no CUDA GPU")
def test_ray_actors_run_the_gpu_engine(indexes):
    """Ray actors with num_gpus search their shards on the GPU; the merged answer is the core's."""
    pytest.importorskip("ray")
    from encmatch.cluster.ray_backend import RayBackend

    keys, index, queries = indexes("bsgs-tbe")
    with Client(keys) as client, Server(index, keys / "server") as cpu:
        qb = client.encrypt_query(queries[0])
        want = client.decrypt(cpu.search(qb, "identification"))
        with RayBackend(engine="gpu", num_gpus=0.5, workers=2).open(index, keys / "server") as ray_srv:
            assert all(i["engine"] == "gpu" for i in ray_srv.actor_info)
            got = client.decrypt(ray_srv.search(qb, "identification"))
    assert got.positions.tolist() == want.positions.tolist()
