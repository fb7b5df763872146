"""Issue 13, parts 2 and 3: the threshold belongs to the index, and names never reach the server.

- The bisection attack: a key holder searches one entry with 11 thresholds
  through every path it has (the core's ABI, the SDK, the CLI, the HTTP
  service). Every threshold other than the index's is refused; the searches
  that run all give the same match bits, so nothing beyond them is learnt.
- A delta that is NaN, infinite or outside (-1, 1) is refused at creation,
  and nothing is written.
- Labels are sealed for the key holder: after a remote enrollment no file
  of the service's data directory holds a name; remote and local searches
  and ``encmatch decrypt`` show them; a tampered, moved or foreign sealed
  file is refused.

Toy preset (INSECURE, fast) throughout.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

import encmatch
from encmatch import EncryptedIndex, Enroller, InvalidArgument, Server, _core
from encmatch import labels as labels_mod
from encmatch.errors import Corrupt, Mismatch
from encmatch.service import Conflict, RemoteIndex
from encmatch.service.measure import ServerProcess, add_tenant

from conftest import run_cli

DIM = 16
KAPPA = 8
DELTA = 0.5
#: The attacker's 11 thresholds: 0.0, 0.1, ..., 1.0 with the index's own among them.
DELTAS = [round(0.1 * i, 1) for i in range(11)]
NAMES = ["Zoë Quartermaine", "Bartholomew Xylander", "Ngozi Okonkwo-Vasquez", "Þórunn Ísleifsdóttir"]


def gallery(rng: np.random.Generator, n: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random unit vectors and a query scoring 0.73 with entry 0 and |score| < 0.35 with the rest."""
    while True:
        g = rng.standard_normal((n, DIM))
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        other = rng.standard_normal(DIM)
        other -= other @ g[0] * g[0]
        other /= np.linalg.norm(other)
        q = 0.73 * g[0] + np.sqrt(1 - 0.73**2) * other
        s = g @ q
        if np.all(np.abs(s[1:]) < 0.35):
            return g.astype(np.float32), q.astype(np.float32)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("leak-keys")
    out = {}
    for name in ("a", "b"):
        encmatch.Client.generate(root / name, preset="toy", kappa=KAPPA, dim=DIM).close()
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def local(tmp_path_factory, keys):
    """A local EncryptedIndex (keys linked in) with the gallery, labelled."""
    rng = np.random.default_rng(13)
    g, q = gallery(rng)
    path = tmp_path_factory.mktemp("leak-local") / "ix"
    path.mkdir()
    (path / "keys").symlink_to(keys["a"], target_is_directory=True)
    Enroller(path / "keys" / "server").create_index(path / "index", DELTA)
    ix = EncryptedIndex(path)
    ix.add(g, labels=[NAMES[i % len(NAMES)] + f" #{i}" for i in range(len(g))])
    yield {"index": ix, "gallery": g, "query": q, "path": path}
    ix.close()


def tree_bytes(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---- part 2: the threshold belongs to the index ------------------------------------


def test_bisection_attack_learns_only_match_bits(local, tmp_path):
    """11 thresholds against one entry (score 0.73): only the index's own runs, through every path."""
    ix, q = local["index"], local["query"]
    before = tree_bytes(ix.index_dir)
    client = ix.client
    runs = []
    with Server(ix.index_dir, client.server_key_dir) as server:
        handle = server._handle.get()
        for d in DELTAS:
            blob = client.encrypt_query(q)
            # The core's ABI: a "delta" argument other than the index's is refused, never used.
            if d != DELTA:
                with pytest.raises(InvalidArgument, match="belongs to the index"):
                    _core.call("search", {"handle": handle, "mode": "identification", "delta": d}, blob)
                with pytest.raises(InvalidArgument, match="belongs to the index"):
                    _core.call("search", {"handle": handle, "mode": "membership", "delta": d}, blob)
            else:
                _, out = _core.call("search", {"handle": handle, "mode": "identification", "delta": d}, blob)
                runs.append(client.decrypt(out).positions.tolist())
            # The SDK has no threshold to give a search at all.
            with pytest.raises(TypeError):
                server.search(blob, "identification", delta=d)  # type: ignore[call-arg]
            runs.append(client.decrypt(server.search(blob, "identification")).positions.tolist())
            assert client.decrypt(server.search(blob, "membership")).count == 1
    assert runs == [[0]] * len(runs) and len(runs) == len(DELTAS) + 1
    for hit in (ix.search(q, "identification"),):  # the index front: same bits, the label joined here
        assert hit.positions.tolist() == [0] and hit.labels == [NAMES[0] + " #0"]
    assert tree_bytes(ix.index_dir) == before


def _forge_delta(result: bytes, new: bytes) -> bytes:
    """``result`` with its header's threshold replaced by ``new`` (same length), its checksum recomputed:
    a well-formed result file whose header lies."""
    body = result[:-32]
    old = b'"delta":0.5'
    assert body.count(old) == 1 and len(new) == 3
    body = body.replace(old, b'"delta":' + new)
    return body + hashlib.sha256(body).digest()


def test_forged_result_threshold_is_refused(local, tmp_path):
    """Issue 31: the result header's threshold is checked against the index the client holds (SDK and
    CLI), never just shown; without an index the unchecked value is not shown at all."""
    ix, path, q = local["index"], local["path"], local["query"]
    with Server(ix.index_dir, ix.client.server_key_dir) as server:
        result = server.search(ix.client.encrypt_query(q), "identification")
    forged = _forge_delta(result, b"0.3")
    assert ix.client.decrypt(result, delta=DELTA).delta == DELTA
    with pytest.raises(Mismatch, match="names threshold 0.3"):
        ix.client.decrypt(forged, delta=DELTA)
    assert ix.client.decrypt(forged).delta is None  # no index to check against: not shown
    (tmp_path / "forged.bin").write_bytes(forged)
    p = run_cli("decrypt", "--keys", path / "keys", "--index", path / "index", tmp_path / "forged.bin")
    assert p.returncode == 2 and "names threshold 0.3" in p.stderr, p.stderr
    (tmp_path / "good.bin").write_bytes(result)
    p = run_cli("decrypt", "--keys", path / "keys", "--index", path / "index", "--json", tmp_path / "good.bin")
    assert p.returncode == 0 and json.loads(p.stdout)["positions"] == [0], p.stdout


def test_cli_refuses_another_delta(local, tmp_path):
    path, q = local["path"], local["query"]
    np.save(tmp_path / "q.npy", q)
    for d in DELTAS:
        out = tmp_path / f"r-{d}.bin"
        p = run_cli("query", "--keys", path / "keys", "--index", path / "index", "--delta", d, "--out", out,
                    "--decrypt", tmp_path / "q.npy")
        if d != DELTA:
            assert p.returncode == 2 and "error: the threshold belongs to the index" in p.stderr, p.stderr
            assert not out.exists()
        else:
            assert p.returncode == 0, p.stderr
            assert "identification: 1 match(es)" in p.stdout and f"0  {NAMES[0]} #0" in p.stdout
    # Nor can an enrollment change it.
    np.save(tmp_path / "more.npy", local["gallery"][:2])
    before = tree_bytes(path / "index")
    p = run_cli("enroll", "--keys", path / "keys", "--index", path / "index", "--delta", 0.3, tmp_path / "more.npy")
    assert p.returncode == 2 and "error: the threshold belongs to the index" in p.stderr
    assert tree_bytes(path / "index") == before


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "1", "-1", "1.5", "-7"])
def test_bad_delta_refused_at_creation(keys, tmp_path, bad):
    np.save(tmp_path / "g.npy", np.ones((2, DIM), dtype=np.float32))
    p = run_cli("enroll", "--keys", keys["a"], "--index", tmp_path / "ix", f"--delta={bad}", tmp_path / "g.npy")
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("error: delta must be"), p.stderr
    assert not (tmp_path / "ix").exists()
    with pytest.raises(InvalidArgument, match="open interval"):
        EncryptedIndex.create(tmp_path / "new", dim=DIM, preset="toy", kappa=KAPPA, delta=float(bad))
    assert not (tmp_path / "new").exists()
    with pytest.raises(InvalidArgument):
        Enroller(keys["a"] / "server").create_index(tmp_path / "ix2", float(bad))
    assert not (tmp_path / "ix2").exists()


def test_create_needs_a_delta(tmp_path):
    with pytest.raises(TypeError):
        EncryptedIndex.create(tmp_path / "ix", dim=DIM, preset="toy", kappa=KAPPA)  # type: ignore[call-arg]
    assert not (tmp_path / "ix").exists()


# ---- part 3: sealed labels, local -------------------------------------------------------


def test_local_labels_are_sealed(local):
    ix = local["index"]
    names = [NAMES[i % len(NAMES)] + f" #{i}" for i in range(len(local["gallery"]))]
    assert ix.labels == names
    for p, data in tree_bytes(ix.index_dir).items():
        for n in NAMES:
            assert n.encode() not in data, f"{p} holds {n!r}"
    assert "labels" not in ix.info()


def test_tampered_moved_or_foreign_sealed_files_refused(local, keys, tmp_path):
    src = local["path"]
    work = tmp_path / "ix"
    shutil.copytree(src / "index", work / "index")
    (work / "keys").symlink_to(keys["a"], target_is_directory=True)
    sealed = work / "index" / "labels" / labels_mod.sealed_name(0, len(local["gallery"]))
    good = sealed.read_bytes()
    with EncryptedIndex(work) as ix:
        assert ix.labels == local["index"].labels
        # A flipped bit: the frame's checksum catches it...
        sealed.write_bytes(good[:-40] + bytes([good[-40] ^ 1]) + good[-39:])
        with pytest.raises(Corrupt):
            ix.labels
        # ... and with the checksum recomputed, the AEAD tag does.
        body = bytearray(good[:-32])
        body[-20] ^= 1
        sealed.write_bytes(bytes(body) + hashlib.sha256(body).digest())
        with pytest.raises(Corrupt, match="authentication failed"):
            ix.labels
        # Moved to another range of the same index: the range is in the associated data.
        sealed.unlink()
        (sealed.parent / labels_mod.sealed_name(0, len(local["gallery"]) - 1)).write_bytes(good)
        with pytest.raises(Mismatch, match="positions"):
            ix.labels
    # Another index of the same key set, same range: its uid differs.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keys").symlink_to(keys["a"], target_is_directory=True)
    Enroller(keys["a"] / "server").create_index(tmp_path / "other" / "index", DELTA)
    with EncryptedIndex(tmp_path / "other") as other:
        other.add(local["gallery"])  # unlabelled
        assert other.labels is None
        labels_mod.write_sealed(other.index_dir, sealed.name, good)
        with pytest.raises(Mismatch, match="another index"):
            other.labels
    # Another key set's label key cannot open it either.
    with encmatch.Client(keys["b"]) as b:
        manifest = encmatch.index_info(src / "index")
        with pytest.raises((Mismatch, Corrupt)):
            b.open_labels(dict(manifest, key_id=b.key_id), {sealed.name: lambda: good})


def test_public_key_enroller_without_label_key(keys, tmp_path):
    """Keys made before sealed labels (no labels.pub): a labelled public-key enrollment fails first, clearly."""
    old = tmp_path / "old"
    shutil.copytree(keys["a"], old)
    (old / "server" / labels_mod.PUBLIC_FILE).unlink()
    (old / labels_mod.SECRET_FILE).unlink()
    enroller = Enroller(old / "server")
    enroller.create_index(tmp_path / "ix", DELTA)
    before = tree_bytes(tmp_path / "ix")
    with pytest.raises(labels_mod.MissingLabelKey, match="no label key"):
        enroller.enroll(tmp_path / "ix", np.ones((2, DIM)), labels=["a", "b"])
    assert tree_bytes(tmp_path / "ix") == before
    enroller.enroll(tmp_path / "ix", np.ones((2, DIM)))  # unlabelled still works
    # The key holder's own enroller makes the label key of such a key set.
    Enroller(old / "server", owner_key_dir=old).enroll(tmp_path / "ix", np.ones((1, DIM)), labels=["c"])
    assert (old / labels_mod.SECRET_FILE).is_file() and (old / "server" / labels_mod.PUBLIC_FILE).is_file()
    with encmatch.Client(old) as c:
        assert c.open_labels(encmatch.index_info(tmp_path / "ix"), labels_mod.local_files(tmp_path / "ix")) == \
            ["", "", "c"]


# ---- the service ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("leak-svc") / "data"
    token = add_tenant(data_dir, "alice")
    proc = ServerProcess(data_dir, "--allow-insecure").start()
    proc.token = token
    proc.data_dir = data_dir
    yield proc
    code = proc.stop()
    proc.kill()
    assert code == 0, proc.log()[-3000:]


def test_service_never_sees_names(service, keys, tmp_path):
    rng = np.random.default_rng(5)
    g, q = gallery(rng, 40)
    names = [NAMES[i % len(NAMES)] + f" #{i}" for i in range(40)]
    np.savez(tmp_path / "g.npz", emb=g[:25], name=np.array(names[:25]))
    env = {"ENCMATCH_TOKEN": service.token}
    # The CLI, as a public-key enroller with only server/ (labels.pub travels there).
    enroller_keys = tmp_path / "enroller"
    shutil.copytree(keys["a"] / "server", enroller_keys / "server")
    p = run_cli("enroll", "--server", service.url, "--keys", enroller_keys, "--delta", DELTA,
                "--labels-from", "name", tmp_path / "g.npz", env=env)
    assert p.returncode == 0, p.stderr
    index_id = p.stdout.split("created remote index ")[1].split()[0]
    # The SDK, as the key owner.
    with RemoteIndex(service.url, service.token, index_id, keys["a"]) as index:
        index.add(g[25:], labels=names[25:])
        assert index.labels == names
        hit = index.search(q, "identification")
        assert hit.positions.tolist() == [0] and hit.labels == [names[0]]
    for path, data in tree_bytes(service.data_dir).items():
        for n in names + NAMES:
            for enc in ("utf-8", "utf-16-le", "utf-16-be"):
                assert n.encode(enc) not in data, f"{path} holds {n!r}"
    # Remote query and decrypt show the labels, opened on this side.
    np.save(tmp_path / "q.npy", q)
    out = tmp_path / "r.bin"
    p = run_cli("query", "--server", service.url, "--keys", keys["a"], "--index", index_id, "--out", out,
                "--decrypt", tmp_path / "q.npy", env=env)
    assert p.returncode == 0 and f"0  {names[0]}" in p.stdout, p.stderr
    p = run_cli("decrypt", "--server", service.url, "--keys", keys["a"], "--index", index_id, "--json", out, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"mode": "identification", "positions": [0], "labels": [names[0]], "uncertain": []}
    # Another key set's holder can read neither the result nor the labels.
    p = run_cli("decrypt", "--server", service.url, "--keys", keys["b"], "--index", index_id, out, env=env)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("error: ")


def test_service_refuses_another_delta(service, keys, tmp_path):
    rng = np.random.default_rng(6)
    g, q = gallery(rng)
    with RemoteIndex.create(service.url, service.token, keys["a"], DELTA) as index:
        index.add(g, labels=[f"x{i}" for i in range(len(g))])
        before = tree_bytes(service.data_dir)
        blob = index.client.encrypt_query(q)
        headers = {"Authorization": f"Bearer {service.token}", "Content-Type": "application/octet-stream"}
        bits = []
        for d in DELTAS + ["nan", "0.50000001"]:
            resp = httpx.post(f"{service.url}/v1/indexes/{index.id}/search", params={"mode": "identification",
                              "delta": d}, content=blob, headers=headers, timeout=60)
            if d == DELTA:
                assert resp.status_code == 200
                bits.append(index.client.decrypt(resp.content).positions.tolist())
            else:
                assert resp.status_code == 422, resp.text  # invalid_argument (docs/SERVICE.md)
                assert resp.json()["kind"] == "invalid_argument" and "belongs to the index" in resp.json()["error"]
        bits.append(index.client.decrypt(index.service.search(index.id, blob, "identification")[0]).positions.tolist())
        assert bits == [[0], [0]]
        # A commit cannot move the threshold either.
        manifest = dict(index.manifest, delta=0.3)
        with pytest.raises(Conflict, match="changes delta"):  # 409: only groups and count may change
            index.service.commit(index.id, manifest)
        # Nor carry names in plaintext.
        with pytest.raises(InvalidArgument, match="labels"):
            index.service.commit(index.id, dict(index.manifest, labels=["x"] * len(g)))
        after = tree_bytes(service.data_dir)
        assert {p: b for p, b in after.items() if "uploads" not in str(p)} == \
            {p: b for p, b in before.items() if "uploads" not in str(p)}
        # Bad thresholds are refused before anything reaches the service.
        listed = len(index.service.indexes())
        for bad in (float("nan"), 1.0, -1.0, float("inf")):
            with pytest.raises(InvalidArgument):
                RemoteIndex.create(service.url, service.token, keys["a"], bad)
        assert len(index.service.indexes()) == listed
        assert len(list((service.data_dir / "tenants" / "alice").iterdir())) == listed


def test_service_sealed_file_swapped(service, keys, tmp_path):
    """A sealed file of another remote index (same key set, same range) is refused, not joined."""
    rng = np.random.default_rng(7)
    g, _ = gallery(rng)
    with RemoteIndex.create(service.url, service.token, keys["a"], DELTA) as a, \
            RemoteIndex.create(service.url, service.token, keys["a"], DELTA) as b:
        a.add(g, labels=[f"a{i}" for i in range(len(g))])
        b.add(g)
        name = labels_mod.sealed_name(0, len(g))
        sealed_a = a.service.sealed_file(a.id, name)
        stage = tmp_path / "stage"
        stage.mkdir()
        (stage / name).write_bytes(sealed_a)
        b.service.upload_file(b.id, stage / name)
        b.service.commit(b.id, b.manifest, [name])  # the service cannot tell: it never reads them
        b.refresh()
        with pytest.raises(Mismatch, match="another index"):
            b.labels
