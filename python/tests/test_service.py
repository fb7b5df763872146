"""The HTTP service through a real ``encmatch serve`` process on loopback (no mocks).

One server (toy preset admitted with --allow-insecure, 4 MiB body limit, 8 searches queued)
serves the module: end to end through RemoteIndex and the CLI, tenancy,
the secret-key refusal, a suite of bad input after which the server still
answers correctly, and a load test of concurrent clients in which every
answer is checked. A second server without --allow-insecure refuses the
toy preset. The hardening of issue 14 (secret material refused by content,
a refused commit leaving the previous generation served, bounded locks and
bodies, checks before a body is read) is tested at the end.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import struct
import threading
import time
import warnings
from pathlib import Path

import httpx
import numpy as np
import pytest

import encmatch
from encmatch import threshold as th
from encmatch.service import Forbidden, RemoteIndex, ServiceClient, Unauthorized
from encmatch.service.measure import (
    ServerProcess,
    add_tenant,
    expected_results,
    rss_bytes,
    run_load,
    same_answer,
    separated_gallery,
)
from encmatch.service.frames import parse_header
from encmatch.service.tenancy import hash_token

from conftest import run_cli

DIM = 16
KAPPA = 8
DELTA = 0.5
CHUNK = 1 << 20
MODES = ("membership", "identification")


def seal(kind: str, fingerprint: str, key_id: str, payload: bytes) -> bytes:
    """A well-formed frame (core/base/envelope layout) around ``payload``."""
    out = b"ENCMATCH" + struct.pack("<H", 1)
    for field in (kind, fingerprint, key_id):
        raw = field.encode()
        out += struct.pack("<H", len(raw)) + raw
    out += struct.pack("<Q", len(payload)) + payload
    return out + hashlib.sha256(out).digest()


def reframe(frame: bytes, offset: int, value: int) -> bytes:
    """``frame`` with the 8-byte little-endian field at ``offset`` of its payload set to ``value``,
    its own checksum recomputed (a well-formed frame whose content lies)."""
    h = parse_header(frame)
    body = bytearray(frame[:-32])
    body[h.payload_offset + offset:h.payload_offset + offset + 8] = struct.pack("<Q", value)
    return bytes(body) + hashlib.sha256(bytes(body)).digest()


def check_answers(index, gallery, queries, modes=MODES):
    """Search ``queries`` in every mode and assert the exact plaintext answers."""
    for mode in modes:
        got = index.search(queries, mode)
        want = expected_results(gallery, queries, DELTA, mode)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert same_answer(g, w), f"{mode}: {g} != {w}"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Toy key sets: ``a`` (the indexes'), ``a2`` (same parameters, another key set), ``b`` (dim 8)."""
    root = tmp_path_factory.mktemp("svc-keys")
    out = {}
    for name, dim in (("a", DIM), ("a2", DIM), ("b", 8)):
        encmatch.Client.generate(root / name, preset="toy", kappa=KAPPA, dim=dim).close()
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def data():
    """The gallery (one group), its identities and the queries (one per identity)."""
    rng = np.random.default_rng(3)
    gallery, who, queries = separated_gallery(rng, DIM, 600, 16)
    return {"gallery": gallery, "labels": [f"person-{w:02d}" for w in who], "queries": queries}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A running service with tenants alice and bob (4 MiB bodies, 8 searches queued or running)."""
    data_dir = tmp_path_factory.mktemp("svc") / "data"
    tokens = {name: add_tenant(data_dir, name) for name in ("alice", "bob")}
    proc = ServerProcess(data_dir, "--allow-insecure", "--max-body-mb", "4", "--max-queue", "8").start()
    proc.tokens = tokens
    yield proc
    code = proc.stop()
    proc.kill()
    assert code == 0, proc.log()[-3000:]
    assert "Traceback" not in proc.log(), proc.log()[-5000:]


@pytest.fixture(scope="module")
def ready(server, keys, data):
    """Alice's index holding the gallery (labelled)."""
    index = RemoteIndex.create(server.url, server.tokens["alice"], keys["a"], DELTA, chunk_size=CHUNK, label="ready")
    index.add(data["gallery"], data["labels"])
    yield index
    index.close()


def http(server, token=None):
    """A raw HTTP client of the server (with alice's token by default)."""
    token = server.tokens["alice"] if token is None else token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=60)


# ---- basics ------------------------------------------------------------------------------


def test_health_and_openapi(server):
    with http(server, token="") as c:
        health = c.get("/v1/health").json()
        assert health["status"] == "ok" and health["insecure_allowed"] is True
        paths = c.get("/openapi.json").json()["paths"]
    for path in ("/v1/indexes", "/v1/indexes/{index_id}", "/v1/indexes/{index_id}/files/{name}",
                 "/v1/indexes/{index_id}/commit", "/v1/indexes/{index_id}/search", "/v1/health"):
        assert path in paths
    assert set(paths["/v1/indexes/{index_id}/files/{name}"]) == {"put", "get", "patch"}


def test_end_to_end(server, keys, data):
    token = server.tokens["alice"]
    with RemoteIndex.create(server.url, token, keys["a"], DELTA, chunk_size=CHUNK) as index:
        assert len(index) == 0 and index.info()["state"] == "ready"
        empty = index.search(data["queries"][0], "membership")
        assert empty.count == 0 and not empty.enrolled
        summary = index.add(data["gallery"][:500], data["labels"][:500])
        assert summary.added == 500 and summary.uploaded_bytes > 0
        check_answers(index, data["gallery"][:500], data["queries"][:6])
        ident = index.search(data["queries"][2], "identification")
        assert ident.count > 0 and ident.labels == [data["labels"][p] for p in ident.positions]
        index.add(data["gallery"][500:], data["labels"][500:])  # appended: fills the first group (issue 31)
        info = index.info()
        assert (info["count"], info["groups"], info["generation"]) == (600, 1, 3)
        assert info["loaded"] and info["uploads"] == []
        check_answers(index, data["gallery"], data["queries"][6:12])
        index_id = index.id
    with RemoteIndex(server.url, token, index_id, keys["a"]) as again:
        assert len(again) == 600 and again.labels == data["labels"]
        assert index_id in [s["id"] for s in again.service.indexes()]
        check_answers(again, data["gallery"], data["queries"][:4], modes=("identification",))
        again.delete()
        with pytest.raises(encmatch.NotFound):
            again.info()
        assert index_id not in [s["id"] for s in again.service.indexes()]


def test_remote_index_refuses_other_keys(server, keys, ready):
    with pytest.raises(encmatch.Mismatch):
        RemoteIndex(server.url, server.tokens["alice"], ready.id, keys["a2"])


def test_cli_remote(server, keys, data, tmp_path):
    np.savez(tmp_path / "gallery.npz", emb=data["gallery"][:300], name=np.array(data["labels"][:300]))
    np.save(tmp_path / "query.npy", data["queries"][5])
    p = run_cli("tenant", "add", "carol", "--data", server.data_dir)
    assert p.returncode == 0, p.stderr
    token = p.stdout.strip()
    assert token.startswith("em_") and token not in (server.data_dir / "tenants.json").read_text()
    p = run_cli("enroll", "--server", server.url, "--token", token, "--keys", keys["a"], "--delta", DELTA,
                "--labels-from", "name", tmp_path / "gallery.npz")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    index_id = re.search(r"created remote index ([0-9a-f]{16})", p.stdout).group(1)
    assert "enrolled 300 vectors" in p.stdout
    env = {"ENCMATCH_TOKEN": token}
    watcher = RemoteIndex(server.url, token, index_id, keys["a"])
    assert len(watcher) == 300 and watcher.labels == data["labels"][:300]
    p = run_cli("query", "--server", server.url, "--keys", keys["a"], "--index", index_id, "--mode",
                "identification", "--out", tmp_path / "r.bin", tmp_path / "query.npy", env=env)
    assert p.returncode == 0, p.stderr
    p = run_cli("decrypt", "--keys", keys["a"], "--json", tmp_path / "r.bin")
    want = expected_results(data["gallery"][:300], data["queries"][5:6], DELTA, "identification")[0]
    assert json.loads(p.stdout)["positions"] == want.positions.tolist() and want.count > 0
    p = run_cli("enroll", "--server", server.url, "--index", index_id, "--keys", keys["a"],
                "--encryption", "public-key", tmp_path / "gallery.npz", env=env)  # any enroller's, appended
    assert p.returncode == 0 and f"index {index_id} holds 600" in p.stdout, p.stderr
    # the service path fills the partial group (downloaded, filled here, replaced by the commit)
    assert "to fill the last group" in p.stdout and "warning" not in p.stderr, (p.stdout, p.stderr)
    assert watcher.service.manifest(index_id)["groups"][0]["count"] == 600
    assert len(watcher) == 300  # its manifest is cached until it is told to look again
    watcher.refresh()
    assert len(watcher) == 600 and watcher.labels == data["labels"][:300] + [""] * 300  # appended unlabelled
    watcher.close()
    p = run_cli("query", "--server", server.url, "--token", "em_wrong", "--keys", keys["a"], "--index", index_id,
                "--out", tmp_path / "r2.bin", tmp_path / "query.npy")
    assert p.returncode == 3 and "refused the token" in p.stderr and "Traceback" not in p.stderr  # refused: 3
    p = run_cli("query", "--server", server.url, "--keys", keys["a"], "--index", "0123456789abcdef",
                "--out", tmp_path / "r2.bin", tmp_path / "query.npy", env=env)
    assert p.returncode == 2 and "no index" in p.stderr


# ---- tenancy and what the service refuses -------------------------------------------------


def test_tenancy(server, keys, data, ready):
    bob = server.tokens["bob"]
    with http(server, bob) as c:
        for method, path, kwargs in (
            ("GET", f"/v1/indexes/{ready.id}", {}),
            ("GET", f"/v1/indexes/{ready.id}/manifest", {}),
            ("DELETE", f"/v1/indexes/{ready.id}", {}),
            ("POST", f"/v1/indexes/{ready.id}/commit", {"json": {"manifest": ready.manifest}}),
            ("PUT", f"/v1/indexes/{ready.id}/files/group-000009.ct", {"json": {"size": 10, "sha256": "0" * 64}}),
            ("POST", f"/v1/indexes/{ready.id}/search?mode=membership",
             {"content": ready.client.encrypt_query(data["queries"][0])}),
        ):
            r = c.request(method, path, **kwargs)
            assert (r.status_code, r.json()["kind"]) == (404, "not_found"), (method, path, r.text)
        assert ready.id not in [s["id"] for s in c.get("/v1/indexes").json()["indexes"]]
    for token in ("", "em_not-a-token"):
        with http(server, token) as c:
            r = c.get("/v1/indexes")
            assert r.status_code == 401 and r.json()["kind"] == "unauthorized"
            assert c.post(f"/v1/indexes/{ready.id}/search", content=b"x").status_code == 401
    with pytest.raises(Unauthorized):
        RemoteIndex(server.url, "em_not-a-token", ready.id, keys["a"])
    stored = (server.data_dir / "tenants.json").read_text()
    for token in server.tokens.values():
        assert token not in stored and hash_token(token) in stored
    # revoking takes effect while the server runs
    dave = add_tenant(server.data_dir, "dave")
    with http(server, dave) as c:
        assert c.get("/v1/indexes").status_code == 200
        encmatch.service.tenancy.TokenStore(server.data_dir).revoke("dave")
        assert c.get("/v1/indexes").status_code == 401
    check_answers(ready, data["gallery"], data["queries"][:3])


def test_secret_key_refused(server, keys):
    secret = (keys["a"] / "secret.key").read_bytes()
    meta = json.loads((keys["a"] / "server" / "keys.json").read_text())
    with http(server) as c:
        index_id = c.post("/v1/indexes", json={"keys": meta}).json()["id"]
        base = f"/v1/indexes/{index_id}/files"
        for name in ("group-000000.ct", "relin.key"):
            r = c.put(f"{base}/{name}", json={"size": len(secret), "sha256": hashlib.sha256(secret).hexdigest()})
            assert r.status_code == 200, r.text
            r = c.patch(f"{base}/{name}", params={"offset": 0}, content=secret,
                        headers={"X-Chunk-SHA256": hashlib.sha256(secret).hexdigest()})
            assert (r.status_code, r.json()["kind"]) == (403, "forbidden") and "secret key" in r.json()["error"]
            assert c.get(f"{base}/{name}").status_code == 404  # the upload was dropped
        r = c.put(f"{base}/secret.key", json={"size": len(secret), "sha256": hashlib.sha256(secret).hexdigest()})
        assert r.status_code == 422
    for path in server.data_dir.rglob("*"):
        if path.is_file() and path.stat().st_size >= len(secret):
            assert secret not in path.read_bytes(), path


def test_insecure_preset_refused_by_default(tmp_path, keys):
    data_dir = tmp_path / "strict"
    token = add_tenant(data_dir, "alice")
    with ServerProcess(data_dir) as strict:
        with ServiceClient(strict.url, token) as c:
            assert c.health()["insecure_allowed"] is False
            with pytest.raises(Forbidden, match="INSECURE"):
                RemoteIndex.create(strict.url, token, keys["a"], DELTA)
            assert c.indexes() == []


# ---- bad input ---------------------------------------------------------------------------------


def test_bad_queries(server, keys, data, ready):
    good = ready.client.encrypt_query(data["queries"][1])
    meta = json.loads((keys["a"] / "server" / "keys.json").read_text())
    with encmatch.Client(keys["a2"]) as other, encmatch.Client(keys["b"]) as small:
        other_keys = other.encrypt_query(data["queries"][1])
        other_params = small.encrypt_query(data["queries"][1][:8])
    rng = np.random.default_rng(0)
    cases = {
        "garbage": (rng.bytes(5000), "corrupt"),
        "truncated": (good[: len(good) // 2], "corrupt"),
        "padded": (good + b"\0" * 10, "corrupt"),
        "empty": (b"", "corrupt"),
        "another key set": (other_keys, "mismatch"),
        "other parameters": (other_params, "mismatch"),
        "not a query": (seal("result", meta["fingerprint"], meta["key_id"], b"x" * 64), "mismatch"),
        "bad payload": (seal("query", meta["fingerprint"], meta["key_id"], rng.bytes(4096)), "corrupt"),
    }
    with http(server) as c:
        for name, (body, kind) in cases.items():
            r = c.post(f"/v1/indexes/{ready.id}/search", params={"mode": "membership"}, content=body)
            assert (r.status_code, r.json()["kind"]) == (422, kind), (name, r.text)
        r = c.post(f"/v1/indexes/{ready.id}/search", params={"mode": "everything"}, content=good)
        assert r.status_code == 422 and r.json()["kind"] == "invalid_argument"
        r = c.post(f"/v1/indexes/{ready.id}/search", params={"delta": "7"}, content=good)
        assert r.status_code == 422
        r = c.post(f"/v1/indexes/{ready.id}/search", content=b"\0" * (5 << 20))
        assert (r.status_code, r.json()["kind"]) == (413, "too_large")
        r = c.post(f"/v1/indexes/{ready.id}/search", content=iter([b"\0" * (1 << 20)] * 5))  # chunked, no length
        assert (r.status_code, r.json()["kind"]) == (413, "too_large")
        r = c.post("/v1/indexes/zz../search", content=good)
        assert r.status_code == 404
    check_answers(ready, data["gallery"], data["queries"][::2])


def test_bad_json(server, keys):
    meta = json.loads((keys["a"] / "server" / "keys.json").read_text())
    bad_fp = dict(meta, fingerprint="0" * 32)
    with http(server) as c:
        for body in (b"{not json", b"[1, 2]", b"null", json.dumps({"keys": "x"}).encode(),
                     json.dumps({"keys": dict(meta, dim="sixteen")}).encode(),
                     json.dumps({"keys": dict(meta, galois_elements=[])}).encode(),
                     json.dumps({"keys": dict(meta, preset="huge")}).encode()):
            r = c.post("/v1/indexes", content=body, headers={"Content-Type": "application/json"})
            assert (r.status_code, r.json()["kind"]) == (422, "invalid_argument"), (body, r.text)
        r = c.post("/v1/indexes", json={"keys": bad_fp})
        assert (r.status_code, r.json()["kind"]) == (422, "mismatch")
        r = c.post("/v1/indexes", content=b"{" + b" " * (5 << 20) + b"}", headers={"Content-Type": "application/json"})
        assert r.status_code == 413


def test_bad_uploads(server, keys, data, ready, tmp_path):
    """Truncated, corrupt and foreign files, bad chunks and bad commits; the index is unharmed."""
    # a real group file of the ready index's key set, made locally
    stage = tmp_path / "stage"
    stage.mkdir()
    manifest = ready.service.manifest(ready.id)
    (stage / "manifest.json").write_text(json.dumps(manifest))
    encmatch.Enroller(keys["a"] / "server").enroll(stage, data["gallery"][:50], fill=False)  # the stage holds no group files
    new_manifest = json.loads((stage / "manifest.json").read_text())
    name = new_manifest["groups"][-1]["file"]
    blob = (stage / name).read_bytes()
    meta = json.loads((keys["a"] / "server" / "keys.json").read_text())
    base = f"/v1/indexes/{ready.id}/files"

    def declare(c, fname, content):
        r = c.put(f"{base}/{fname}", json={"size": len(content), "sha256": hashlib.sha256(content).hexdigest()})
        assert r.status_code == 200, r.text
        return r.json()

    def patch(c, fname, content, offset=0, sha=None):
        return c.patch(f"{base}/{fname}", params={"offset": offset}, content=content,
                       headers={"X-Chunk-SHA256": sha or hashlib.sha256(content).hexdigest()})

    def upload(c, fname, content):
        """Send ``content`` in chunks under the body limit; the last answer (or the first error)."""
        for off in range(0, len(content), CHUNK):
            r = patch(c, fname, content[off:off + CHUNK], offset=off)
            if r.status_code != 200:
                break
        return r

    with http(server) as c:
        declare(c, name, blob)
        r = patch(c, name, blob[:1000], sha="0" * 64)
        assert (r.status_code, r.json()["kind"]) == (422, "corrupt")
        r = patch(c, name, blob[2000:3000], offset=2000)
        assert (r.status_code, r.json()["kind"]) == (409, "conflict")
        assert patch(c, name, blob[:1000]).json()["received"] == 1000
        assert patch(c, name, blob[:1500]).json()["received"] == 1500  # overlapping retry: only the new part
        r = patch(c, name, b"X" * 1000, offset=500)
        assert r.status_code == 409  # differs from what was received
        # truncated: the commit finds it incomplete
        r = c.post(f"/v1/indexes/{ready.id}/commit", json={"manifest": new_manifest})
        assert (r.status_code, r.json()["kind"]) == (409, "conflict") and "not uploaded" in r.json()["error"]
        # corrupt: one flipped byte in the payload fails the frame's checksum when the file completes
        bad = bytearray(blob)
        bad[len(bad) // 2] ^= 0xFF
        declare(c, name, bytes(bad))
        r = upload(c, name, bytes(bad))
        assert (r.status_code, r.json()["kind"]) == (422, "corrupt") and "checksum" in r.json()["error"]
        # a key file of other parameters / another key set in place of a gallery file or a key
        with encmatch.Client(keys["b"]) as small:
            foreign = (small.server_key_dir / "relin.key").read_bytes()
        declare(c, name, foreign)
        r = patch(c, name, foreign)
        assert (r.status_code, r.json()["kind"]) == (422, "mismatch")
        pending = c.post("/v1/indexes", json={"keys": meta}).json()
        other_relin = (keys["a2"] / "server" / "relin.key").read_bytes()
        r = c.put(f"/v1/indexes/{pending['id']}/files/relin.key",
                  json={"size": len(other_relin), "sha256": hashlib.sha256(other_relin).hexdigest()})
        r = c.patch(f"/v1/indexes/{pending['id']}/files/relin.key", params={"offset": 0}, content=other_relin,
                    headers={"X-Chunk-SHA256": hashlib.sha256(other_relin).hexdigest()})
        assert (r.status_code, r.json()["kind"]) == (422, "mismatch") and "key set" in r.json()["error"]
        r = c.post(f"/v1/indexes/{pending['id']}/commit", json={"manifest": manifest})
        assert r.status_code == 409 and "key files" in r.json()["error"]
        r = c.post(f"/v1/indexes/{pending['id']}/search", content=b"x")
        assert r.status_code == 409
        # a well-framed group whose ciphertexts are garbage: stored, then refused by the core at commit
        fake = seal(parse_header(blob).kind, meta["fingerprint"], meta["key_id"],
                    np.random.default_rng(1).bytes(len(blob) - 200))
        declare(c, name, fake)
        assert upload(c, name, fake).json()["complete"]
        fake_manifest = json.loads(json.dumps(new_manifest))
        fake_manifest["groups"][-1]["bytes"] = len(fake)
        r = c.post(f"/v1/indexes/{ready.id}/commit", json={"manifest": fake_manifest})
        assert (r.status_code, r.json()["kind"]) == (422, "corrupt"), r.text
        assert "generation 2 is still served" in r.json()["error"] and f"deleted {name}" in r.json()["error"]
        assert c.get(f"{base}/{name}").status_code == 404  # the refused file is not kept
        assert not (ready_dir(server, ready.id) / "files" / name).exists()
        assert not (ready_dir(server, ready.id) / "uploads" / f"{name}.part").exists()
        # commits that rewrite history or are not manifests
        changed = json.loads(json.dumps(manifest))
        changed["groups"][0]["count"] -= 1
        # a client forging a fill: group 0 replaced by a "filled" file of more entries (the service never fills)
        forged = json.loads(json.dumps(manifest))
        forged["groups"][0].update(file="group-000000.fill-1.ct", fills=1, count=forged["groups"][0]["count"] + 1)
        for body, status in (({"manifest": changed}, 409), ({"manifest": forged}, 409), ({"manifest": []}, 422),
                             ({"manifest": {"groups": 3}}, 422),
                             ({"nothing": 1}, 422)):
            r = c.post(f"/v1/indexes/{ready.id}/commit", json=body)
            assert r.status_code == status, (body, r.text)
        status = c.get(f"/v1/indexes/{ready.id}").json()
    assert status["count"] == 600 and status["generation"] == 2 and status["loaded"]
    assert not list((ready_dir(server, ready.id)).glob("gen-000003"))
    check_answers(ready, data["gallery"], data["queries"][::2])


def ready_dir(server, index_id):
    """The on-disk directory of one of alice's indexes."""
    return server.data_dir / "tenants" / "alice" / index_id


# ---- load ----------------------------------------------------------------------------------------


def test_load(server, keys, data, ready):
    expected = {m: expected_results(data["gallery"], data["queries"], DELTA, m) for m in MODES}
    before = httpx.get(server.url + "/v1/health").json()["queue"]["served"]
    res = run_load(server.url, server.tokens["alice"], ready.id, keys["a"], data["queries"], expected,
                   clients=4, per_client=60)
    print(f"\nload test (toy, dim {DIM}, kappa {KAPPA}, K = 600, 4 clients x 60 searches): "
          f"{res['throughput_qps']:.1f} queries/s, latency p50 {res['latency']['p50'] * 1e3:.0f} ms, "
          f"p90 {res['latency']['p90'] * 1e3:.0f} ms, p99 {res['latency']['p99'] * 1e3:.0f} ms; "
          f"HTTP round trip p50 {res['round_trip']['p50'] * 1e3:.0f} ms")
    assert res["errors"] == [] and res["wrong"] == []
    assert res["answered"] == 240
    after = httpx.get(server.url + "/v1/health").json()["queue"]
    assert after["served"] - before == 240 and after["pending"] == 0


def test_busy_answer(server, ready, data):
    """Beyond the bounded queue the answer is 503 busy at once; RemoteIndex retries it."""
    # the module's server admits 8 searches queued or running; send twice as many at once
    blob = ready.client.encrypt_query(data["queries"][0])
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(16)

    def one():
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.tokens['alice']}"},
                          timeout=120) as c:
            barrier.wait()
            r = c.post(f"/v1/indexes/{ready.id}/search", params={"mode": "membership"}, content=blob)
            with lock:
                statuses.append(r.status_code)
                if r.status_code == 503:
                    assert r.json()["kind"] == "busy" and r.headers["Retry-After"]

    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 1 and statuses.count(503) >= 1, statuses
    with ServiceClient(server.url, server.tokens["alice"], retries=0) as c:
        assert c.health()["queue"]["pending"] == 0
    check_answers(ready, data["gallery"], data["queries"][:2])


def test_one_service_per_data_directory(server):
    second = ServerProcess(server.data_dir, "--allow-insecure")
    with pytest.raises(RuntimeError, match="another service process uses the data directory"):
        second.start(timeout=60)
    assert second.proc.returncode == 2
    assert httpx.get(server.url + "/v1/health").json()["status"] == "ok"


# ---- hardening (issue 14) --------------------------------------------------------------------------


def upload_raw(c, index_id, name, content):
    """Declare ``content`` as ``name`` and send it in one chunk; the chunk's answer."""
    r = c.put(f"/v1/indexes/{index_id}/files/{name}",
              json={"size": len(content), "sha256": hashlib.sha256(content).hexdigest()})
    assert r.status_code == 200, r.text
    return c.patch(f"/v1/indexes/{index_id}/files/{name}", params={"offset": 0}, content=content,
                   headers={"X-Chunk-SHA256": hashlib.sha256(content).hexdigest()})


@pytest.fixture(scope="module")
def threshold_setup(tmp_path_factory):
    """A finished 2-out-of-2 threshold setup (toy) and a receiver: real shares and receiver keys."""
    root = tmp_path_factory.mktemp("svc-threshold")
    setup = root / "setup.json"
    th.init_setup(setup, parties=2, threshold=2, dim=4, preset="toy", kappa=7, strategy="dg")
    for i in (1, 2):
        th.round1(setup, i, root / f"party-{i}", root / "board")
    for i in (1, 2):
        for j in (1, 2):
            (root / f"inbox-{j}").mkdir(exist_ok=True)
            shutil.move(root / f"party-{i}" / th.shamir_file(i, j), root / f"inbox-{j}" / th.shamir_file(i, j))
    for i in (1, 2):
        th.round2(setup, i, root / f"party-{i}", root / "board", root / f"inbox-{i}")
    th.finalize(setup, root / "board", root / "server")
    th.Receiver.generate(setup, root / "receiver")
    return root


def test_secret_material_refused_by_content(server, keys, threshold_setup):
    """Threshold shares, a receiver's secret key, a server signing key, a label secret key and unknown kinds are refused
    (403) under any name, at the first chunk, and nothing of them stays on disk."""
    root = threshold_setup
    meta = json.loads((root / "server" / "keys.json").read_text())
    secrets_ = {
        "threshold share": (root / "party-1" / th.share_file(1)).read_bytes(),
        "receiver secret key": (root / "receiver" / "receiver.key").read_bytes(),
        "unknown kind": seal("mystery-kind", meta["fingerprint"], meta["key_id"], b"s" * 4096),
        "round-1 state": seal("threshold-round1-state", meta["fingerprint"], meta["key_id"], b"t" * 4096),
        "server signing key": Path(th.generate_signing_key(root / "signing")["key"]).read_bytes(),
    }
    assert parse_header(secrets_["threshold share"]).kind == "threshold-share"
    assert parse_header(secrets_["receiver secret key"]).kind == "threshold-receiver-secret"
    with http(server) as c:
        # an index of the threshold key set itself: fingerprint and key id of the shares match
        index_id = c.post("/v1/indexes", json={"keys": meta}).json()["id"]
        names = ("group-000000.ct", "relin.key", f"gal-{meta['galois_elements'][0]}.key", "0-9.sealed")
        for what, blob in secrets_.items():
            for name in names:
                r = upload_raw(c, index_id, name, blob)
                assert (r.status_code, r.json()["kind"]) == (403, "forbidden"), (what, name, r.text)
                assert c.get(f"/v1/indexes/{index_id}/files/{name}").status_code == 404  # dropped
        # the label secret key of a key set, under the index of that key set
        label_key = (keys["a"] / "labels.key").read_bytes()
        a_meta = json.loads((keys["a"] / "server" / "keys.json").read_text())
        a_id = c.post("/v1/indexes", json={"keys": a_meta}).json()["id"]
        r = upload_raw(c, a_id, "group-000000.ct", label_key)
        assert (r.status_code, r.json()["kind"]) == (403, "forbidden") and "secret" in r.json()["error"]
        # a header too long to be read within the first 64 KiB: refused before anything past it is stored
        giant = seal("k" * 65535, meta["fingerprint"], meta["key_id"], b"g" * 200000)
        r = c.put(f"/v1/indexes/{index_id}/files/group-000000.ct",
                  json={"size": len(giant), "sha256": hashlib.sha256(giant).hexdigest()})
        assert r.status_code == 200
        r = c.patch(f"/v1/indexes/{index_id}/files/group-000000.ct", params={"offset": 0}, content=giant[:70000],
                    headers={"X-Chunk-SHA256": hashlib.sha256(giant[:70000]).hexdigest()})
        assert (r.status_code, r.json()["kind"]) == (422, "corrupt"), r.text
        assert c.get(f"/v1/indexes/{index_id}/files/group-000000.ct").status_code == 404
        # a public kind in the wrong place is a mismatch, not stored either
        r = upload_raw(c, index_id, "group-000000.ct", (root / "receiver" / "receiver.pub").read_bytes())
        assert (r.status_code, r.json()["kind"]) == (422, "mismatch")
        # the real key files are still accepted under their names
        r = upload_raw(c, index_id, "relin.key", (root / "server" / "relin.key").read_bytes())
        assert r.status_code == 200 and r.json()["complete"], r.text
    on_disk = [p.read_bytes() for p in server.data_dir.rglob("*") if p.is_file()]
    for what, blob in list(secrets_.items()) + [("label key", label_key)]:
        assert not any(blob[100:4000] in b for b in on_disk), what


def test_bad_key_commit_refused_and_replaceable(server, keys, data, ready, tmp_path):
    """A Galois key whose inner length field says 2^36 (its frame checksum recomputed): the first
    non-empty commit is refused with a JSON error (the core loads it in a child process first),
    the service goes on serving, the bad key is deleted and a corrected one completes the index."""
    bad = tmp_path / "bad-keys"
    shutil.copytree(keys["a"], bad, symlinks=True)
    meta = json.loads((bad / "server" / "keys.json").read_text())
    gal = bad / "server" / f"gal-{meta['galois_elements'][0]}.key"
    forged = reframe(gal.read_bytes(), 24, 1 << 36)
    gal.unlink()
    gal.write_bytes(forged)
    token = server.tokens["bob"]
    index = RemoteIndex.create(server.url, token, bad, DELTA, chunk_size=CHUNK, retries=0)  # empty: keys not loaded yet
    with pytest.raises(encmatch.Corrupt, match="commit refused, generation 1 is still served") as err:
        index.add(data["gallery"][:100])
    assert gal.name in str(err.value)
    with http(server, token="") as c:
        assert c.get("/v1/health").json()["status"] == "ok"
    check_answers(ready, data["gallery"], data["queries"][:2])  # another tenant's index: unharmed
    info = index.info()
    assert info["count"] == 0 and gal.name in info["missing_key_files"] and info["uploads"] == []
    d = server.data_dir / "tenants" / "bob" / index.id
    assert not any(p.is_file() and forged[200:4000] in p.read_bytes() for p in d.rglob("*"))
    with ServiceClient(server.url, token) as c:
        for name in info["missing_key_files"]:
            c.upload_file(index.id, keys["a"] / "server" / name)
    index.add(data["gallery"][:100])
    assert index.info()["count"] == 100 and index.info()["missing_key_files"] == []
    check_answers(index, data["gallery"][:100], data["queries"][:3])
    index.delete()


def test_commit_changes_only_groups_and_count(server, keys, data):
    """Issue 31, item 3: a tenant's token cannot move what an index's answers mean. A commit whose
    manifest differs from the committed one in any field but the groups and the count (the score
    scale the comparator reads, the threshold, the rule, the parameters...; a field added or
    dropped) is refused with 409, and the index answers as before."""
    token = server.tokens["bob"]
    index = RemoteIndex.create(server.url, token, keys["a"], DELTA, chunk_size=CHUNK, retries=0)
    index.add(data["gallery"][:100])
    d = server.data_dir / "tenants" / "bob" / index.id
    committed = json.loads((sorted(d.glob("gen-*"))[-1] / "manifest.json").read_text())
    changes = {"score_scale": committed["score_scale"] * 0.3 / 0.541, "delta": 0.3, "uid": "0" * 32, "rule": ">",
               "payload_width": 2, "strategy": "dg", "n1": 3, "format": 2, "key_id": committed["key_id"],
               "params": {**committed["params"], "kappa": 7}, "extra": True}
    with http(server, token=token) as c:
        for field, value in changes.items():
            m = dict(committed)
            m[field] = value
            if field == "key_id":
                del m["score_scale"]  # a dropped field
                field = "score_scale"
            r = c.post(f"/v1/indexes/{index.id}/commit", json={"manifest": m, "sealed": []})
            assert r.status_code == 409 and r.json()["kind"] == "conflict", (field, r.status_code, r.text)
            assert field in r.json()["error"], r.text
        r = c.post(f"/v1/indexes/{index.id}/commit", json={"manifest": committed, "sealed": []})
        assert r.status_code == 409 and "adds nothing" in r.json()["error"], r.text  # a replay
        for body in ({"manifest": committed, "sealed": [], "extra": 1}, {"manifest": committed, "sealed": "x"}):
            assert c.post(f"/v1/indexes/{index.id}/commit", json=body).status_code == 422  # typed fields
        r = c.put(f"/v1/indexes/{index.id}/files/g.bin", json={"size": True, "sha256": "0" * 64})
        assert r.status_code == 422, r.text  # true is not a size
    assert json.loads((sorted(d.glob("gen-*"))[-1] / "manifest.json").read_text()) == committed
    check_answers(index, data["gallery"][:100], data["queries"][:2])
    index.delete()


def test_remote_enrollment_resumes(server, keys, data, monkeypatch, tmp_path):
    """Issue 31, item 5: a remote enrollment journals what it committed (on the enroller's side), so a
    rerun of the same vectors adds nothing, whether the first run finished, died after its commit (its
    journal still pending) or died before it (nothing committed: the rerun adds them once)."""
    from encmatch._util.journal import RemoteJournal
    from encmatch.service.remote import AlreadyEnrolledWarning

    token = server.tokens["bob"]
    index = RemoteIndex.create(server.url, token, keys["a"], DELTA, chunk_size=CHUNK, retries=0)
    first, second, third = data["gallery"][:100], data["gallery"][100:150], data["gallery"][150:160]
    index.add(first)
    with pytest.warns(AlreadyEnrolledWarning, match="nothing added"):
        assert index.add(first).added == 0
    assert len(index) == 100

    def die(*_a, **_k):
        raise KeyboardInterrupt("killed after the commit")

    with monkeypatch.context() as m:  # killed between the commit and the journal's record of it
        m.setattr(RemoteJournal, "finish", die)
        with pytest.raises(KeyboardInterrupt):
            index.add(second)
    index.refresh()
    assert len(index) == 150
    with pytest.warns(AlreadyEnrolledWarning):
        assert index.add(second).added == 0
    with monkeypatch.context() as m:  # killed before the commit
        m.setattr(ServiceClient, "commit", die)
        with pytest.raises(KeyboardInterrupt):
            index.add(third)
    assert index.add(third).added == 10
    index.refresh()
    assert len(index) == 160
    check_answers(index, data["gallery"][:160], data["queries"][:2])
    # The command line: the same file enrolled twice adds it once.
    np.save(tmp_path / "more.npy", data["gallery"][160:170])
    cmd = ["enroll", "--server", server.url, "--token", token, "--keys", keys["a"], "--index", index.id,
           tmp_path / "more.npy"]
    p = run_cli(*cmd)
    assert p.returncode == 0 and "index " + index.id + " holds 170" in p.stdout, p.stderr
    p = run_cli(*cmd)
    assert p.returncode == 0 and "nothing added" in p.stderr and "holds 170" in p.stdout, (p.stdout, p.stderr)
    index.delete()


def test_lock_map_bounded(server):
    """DELETEs of 3,000 unknown 14 KB ids (and of unknown well-formed ids) leave no lock behind
    (sent pipelined on raw keep-alive connections: a client library's URL parsing would be the slow part)."""
    pid = server.proc.pid
    long_id = "a" * 14000
    auth = f"Authorization: Bearer {server.tokens['alice']}"
    statuses: list[int] = []

    def deletes(ids: list[str]) -> None:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
            f = sock.makefile("rb")
            for lo in range(0, len(ids), 50):
                batch = ids[lo:lo + 50]
                sock.sendall(b"".join(f"DELETE /v1/indexes/{i} HTTP/1.1\r\nHost: x\r\n{auth}\r\n\r\n".encode()
                                      for i in batch))
                for _ in batch:
                    status = int(f.readline().split()[1])
                    length = 0
                    while (line := f.readline()) not in (b"\r\n", b""):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    assert json.loads(f.read(length))["kind"] == "not_found"
                    statuses.append(status)

    before = rss_bytes(pid)[0]
    ids = [f"{long_id}{i}" for i in range(3000)] + [f"{i:016x}" for i in range(300)]
    threads = [threading.Thread(target=deletes, args=(ids[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [404] * 3300
    grown = rss_bytes(pid)[0] - before
    with http(server) as c:
        assert c.get("/v1/health").json()["load"]["index_locks"] == 0
    assert grown < 16 << 20, f"the server grew by {grown / 2**20:.1f} MiB"


def test_chunked_json_over_limit_is_413(server, keys, ready):
    """A JSON body over --max-body-mb without a Content-Length is 413 like one with it (not 400)."""
    meta = json.loads((keys["a"] / "server" / "keys.json").read_text())
    with http(server) as c:
        for method, path in (("POST", "/v1/indexes"), ("POST", f"/v1/indexes/{ready.id}/commit"),
                             ("PUT", f"/v1/indexes/{ready.id}/files/group-000042.ct")):
            body = iter([b'{"keys": "'] + [b"x" * (1 << 20)] * 5 + [b'"}'])
            r = c.request(method, path, content=body, headers={"Content-Type": "application/json"})
            assert (r.status_code, r.json()["kind"]) == (413, "too_large"), (path, r.text)
        r = c.post("/v1/indexes", content=iter([json.dumps({"keys": meta}).encode()]),
                   headers={"Content-Type": "application/json"})  # chunked, under the limit: read and served
        assert r.status_code == 201, r.text


def raw_request(server, head: str, body: bytes = b"") -> socket.socket:
    """A connection that sent ``head`` (request line and headers) and ``body`` (perhaps not all of the body)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
    return sock


def raw_answer(sock: socket.socket) -> tuple[int, dict, dict]:
    """Status, headers and JSON body of the answer on ``sock``."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        part = sock.recv(65536)
        assert part, "connection closed without an answer"
        buf += part
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(rest) < int(headers.get("content-length", 0)):
        rest += sock.recv(65536)
    return int(lines[0].split()[1]), headers, json.loads(rest)


def test_bodies_checked_before_they_are_read(server, ready, data):
    """Token, index, upload, offset and a query's size are checked on the headers: the answer
    comes without the body having been sent."""
    alice = server.tokens["alice"]
    good = ready.client.encrypt_query(data["queries"][0])
    query_len = len(good)
    cases = [
        (f"POST /v1/indexes/0123456789abcdef/search HTTP/1.1\nHost: x\nAuthorization: Bearer {alice}\n"
         f"Content-Length: {query_len}\n", b"", 404),
        (f"POST /v1/indexes/{ready.id}/search HTTP/1.1\nHost: x\nContent-Length: {query_len}\n", b"", 401),
        (f"POST /v1/indexes/{ready.id}/search HTTP/1.1\nHost: x\nAuthorization: Bearer {alice}\n"
         f"Content-Length: 3000000\n", b"\0" * 1024, 422),  # not the size of a query: 1 KiB read, no more
        (f"POST /v1/indexes/{ready.id}/search HTTP/1.1\nHost: x\nAuthorization: Bearer {alice}\n"
         f"Content-Length: {4 << 20}\n", good[:1024], 413),  # a query's header, not a query's size
        (f"PATCH /v1/indexes/{ready.id}/files/nothing.ct?offset=0 HTTP/1.1\nHost: x\nAuthorization: Bearer {alice}\n"
         f"Content-Length: 1000000\nX-Chunk-SHA256: {'0' * 64}\n", b"", 404),
        ("POST /v1/indexes HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 1000\n", b"", 401),
        (f"POST /v1/indexes HTTP/1.1\nHost: x\nAuthorization: Bearer {alice}\nContent-Length: {5 << 20}\n", b"", 413),
    ]
    for head, body, status in cases:
        with raw_request(server, head, body) as sock:
            t0 = time.monotonic()
            got, headers, answer = raw_answer(sock)
            assert got == status and "kind" in answer and time.monotonic() - t0 < 5, (head, got, answer)
    # bodies sent whole to an index that does not exist are not kept: 60 at once add little memory
    # (beyond the tenant's share of body bytes in flight they are refused busy at once)
    pid = server.proc.pid
    before = rss_bytes(pid)[0]
    blob = b"\0" * (4 << 20)
    answers: list[tuple[int, str]] = []

    def send() -> None:
        with http(server) as c:
            r = c.post("/v1/indexes/0123456789abcdef/search", content=blob)
            answers.append((r.status_code, r.json()["kind"]))

    threads = [threading.Thread(target=send) for _ in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 60 and set(answers) <= {(404, "not_found"), (503, "busy")}, answers
    assert (404, "not_found") in answers
    assert rss_bytes(pid)[0] - before < 64 << 20
    check_answers(ready, data["gallery"], data["queries"][:2])


def test_body_bytes_in_flight_bounded_per_tenant(server, keys):
    """Request bodies in flight are reserved by Content-Length: a tenant past its share is answered
    503 busy (JSON, Retry-After) at once; other tenants and the health check are not affected;
    a client that hangs up frees its share."""
    meta = json.loads((keys["a"] / "server" / "keys.json").read_text())
    alice = server.tokens["alice"]
    with http(server) as c:
        limits = c.get("/v1/health").json()["limits"]
        index_id = c.post("/v1/indexes", json={"keys": meta}).json()["id"]
        assert c.put(f"/v1/indexes/{index_id}/files/group-000000.ct",
                     json={"size": 8 << 20, "sha256": "0" * 64}).status_code == 200
    share = limits["max_tenant_body_inflight"]
    chunk = 3 << 20
    assert 2 * chunk <= share < 3 * chunk <= limits["max_body_inflight"]
    head = (f"PATCH /v1/indexes/{index_id}/files/group-000000.ct?offset=0 HTTP/1.1\nHost: x\n"
            f"Authorization: Bearer {alice}\nContent-Length: {chunk}\nX-Chunk-SHA256: {'0' * 64}\n")
    held = [raw_request(server, head, b"ENCMATCH") for _ in range(2)]  # admitted; their bodies never come
    time.sleep(0.5)
    with http(server, token="") as h:
        assert h.get("/v1/health").json()["load"]["body_bytes"] >= 2 * chunk
    with raw_request(server, head) as third:
        status, headers, answer = raw_answer(third)
    assert (status, answer["kind"]) == (503, "busy") and int(headers["retry-after"]) >= 1, answer
    with http(server, server.tokens["bob"]) as c:
        assert c.get("/v1/indexes").status_code == 200
    for sock in held:
        sock.close()
    deadline = time.monotonic() + 10
    with http(server, token="") as h:
        while h.get("/v1/health").json()["load"]["body_bytes"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    with http(server) as c:
        c.delete(f"/v1/indexes/{index_id}")


def test_tenant_quotas_and_memory_returned(tmp_path, keys, data):
    """Issue 31, item 4: per-tenant quotas answer 429 (indexes, uploads in progress) and 507 (bytes), one
    tenant's refusals leave another's work alone, and deleting an index gives its memory back."""
    data_dir = tmp_path / "data"
    tokens = {name: add_tenant(data_dir, name) for name in ("q1", "q2")}
    args = ("--allow-insecure", "--tenant-indexes", "2", "--tenant-gb", str(60 / 1024), "--tenant-uploads", "2")
    with ServerProcess(data_dir, *args) as srv:
        pid = srv.proc.pid
        with http(srv, token=tokens["q1"]) as c:
            meta = json.loads((keys["a"] / "server" / "keys.json").read_text())
            ids = [c.post("/v1/indexes", json={"keys": meta}).json()["id"] for _ in range(2)]
            r = c.post("/v1/indexes", json={"keys": meta})
            assert r.status_code == 429 and r.json()["kind"] == "quota" and "2 indexes" in r.json()["error"], r.text
            ok = [c.put(f"/v1/indexes/{ids[0]}/files/g{i}.bin", json={"size": 1000, "sha256": "0" * 64})
                  for i in range(2)]
            assert [r.status_code for r in ok] == [200, 200]
            r = c.put(f"/v1/indexes/{ids[0]}/files/g2.bin", json={"size": 1000, "sha256": "0" * 64})
            assert r.status_code == 429 and "uploads in progress" in r.json()["error"], r.text
            c.delete(f"/v1/indexes/{ids[0]}")
            r = c.put(f"/v1/indexes/{ids[1]}/files/big.bin", json={"size": 61 << 20, "sha256": "0" * 64})
            assert r.status_code == 507 and r.json()["kind"] == "insufficient_storage", r.text
            c.delete(f"/v1/indexes/{ids[1]}")
        # Another tenant is not held back by q1's refusals; an index deleted gives its memory back.
        # A first index, added to and searched, warms what a process keeps for good (parameters, the
        # vector kernels' root tables of every prime the search's key switching uses).
        warm = RemoteIndex.create(srv.url, tokens["q2"], keys["a"], DELTA, chunk_size=CHUNK)
        warm.add(data["gallery"][:10])
        check_answers(warm, data["gallery"][:10], data["queries"][:2], modes=("identification",))
        warm.delete()
        base = rss_bytes(pid)[0]
        index = RemoteIndex.create(srv.url, tokens["q2"], keys["a"], DELTA, chunk_size=CHUNK)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(6):  # one-vector adds: a group each
                index.add(data["gallery"][i:i + 1])
        peak = rss_bytes(pid)[0]
        check_answers(index, data["gallery"][:6], data["queries"][:2], modes=("identification",))
        index.delete()
        after = rss_bytes(pid)[0]
        assert peak > base + (20 << 20) and after < base + 0.2 * (peak - base), (base, peak, after)
