"""Bad input, corrupt bytes and files, missing directories and foreign keys raise the right EncmatchError."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import encmatch
from encmatch import Client, Corrupt, EncryptedIndex, Enroller, InvalidArgument, Mismatch, NotFound, Server, _core

from conftest import KAPPA, TOY, run_cli

DIM = 16


@pytest.fixture
def filled(new_index):
    """A small toy index (dim 16, delta 0.5) with 20 enrolled vectors, and the vectors."""
    rng = np.random.default_rng(11)
    ix = new_index(DIM, 0.5)
    g = rng.standard_normal((20, DIM)).astype(np.float32)
    ix.add(g)
    return ix, g


# ---- bad vectors: refused by Python, and by the core too -------------------------


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.ones((2, DIM + 1)), "dimension"),
        (np.full((1, DIM), np.nan), "NaN"),
        (np.full((1, DIM), np.inf), "infinite"),
        (np.zeros((1, DIM)), "zero"),
    ],
)
def test_bad_vectors_refused_on_add_and_search(filled, bad, message):
    ix, _ = filled
    with pytest.raises(InvalidArgument, match=message):
        ix.add(bad)
    with pytest.raises(InvalidArgument, match=message):
        ix.search(bad, "membership")
    with pytest.raises(InvalidArgument):
        ix.client.encrypt_query(bad[0])
    assert len(ix) == 20  # nothing was written


@pytest.mark.parametrize("values", [np.full(DIM, np.nan), np.zeros(DIM), np.full(DIM, np.inf)])
def test_core_refuses_bad_vectors_itself(filled, values):
    """The core validates too: bypass the Python checks and call it directly."""
    ix, _ = filled
    raw = np.ascontiguousarray(values, dtype="<f4")
    with pytest.raises(InvalidArgument):
        _core.call("encrypt_query", {"handle": ix.client._handle.get(), "dim": DIM}, raw)
    with pytest.raises(InvalidArgument):
        _core.call(
            "enroll",
            {"index_dir": ix.index_dir, "server_key_dir": ix.client.server_key_dir, "n": 1, "dim": DIM},
            raw,
        )


def test_core_refuses_wrong_dimension(filled):
    ix, _ = filled
    raw = np.ones((2, DIM + 2), dtype="<f4")
    with pytest.raises(InvalidArgument):
        _core.call(
            "enroll",
            {"index_dir": ix.index_dir, "server_key_dir": ix.client.server_key_dir, "n": 2, "dim": DIM + 2},
            raw,
        )


def test_bad_labels_and_parameters(filled, tmp_path):
    ix, g = filled
    with pytest.raises(InvalidArgument, match="labels"):
        ix.add(g[:3], labels=["a", "b"])
    with pytest.raises(InvalidArgument):
        Client.generate(tmp_path / "k1", preset="no-such-preset", kappa=KAPPA, dim=DIM)
    with pytest.raises(InvalidArgument):
        Client.generate(tmp_path / "k2", preset=TOY, kappa=99, dim=DIM)
    with pytest.raises(InvalidArgument):
        Client.generate(tmp_path / "k3", preset=TOY, kappa=KAPPA, dim=0)
    with pytest.raises(InvalidArgument):
        Enroller(ix.client.server_key_dir).create_index(tmp_path / "ix", delta=float("nan"))
    with pytest.raises(InvalidArgument):
        Enroller(ix.client.server_key_dir).create_index(tmp_path / "ix", delta=1.5)
    with pytest.raises(InvalidArgument):
        encmatch.describe("no-such-preset", KAPPA, DIM)


# ---- corrupt or truncated bytes ------------------------------------------------


def _flip(blob: bytes, at: int) -> bytes:
    b = bytearray(blob)
    b[at] ^= 0x5A
    return bytes(b)


def test_truncated_and_corrupt_query_bytes(filled):
    ix, g = filled
    q = ix.client.encrypt_query(g[0])
    with Server(ix.index_dir, ix.client.server_key_dir) as server:
        for bad in (q[: len(q) // 2], q[:10], _flip(q, len(q) // 2), _flip(q, len(q) - 1), q + b"x", b"garbage"):
            with pytest.raises(Corrupt):
                server.search(bad, "membership")
        with pytest.raises((Corrupt, InvalidArgument)):
            server.search(b"", "membership")
        with pytest.raises(InvalidArgument):
            server.search("not bytes", "membership")  # type: ignore[arg-type]
        server.search(q, "membership")  # the intact query still works


def test_truncated_and_corrupt_result_bytes(filled):
    ix, g = filled
    with Server(ix.index_dir, ix.client.server_key_dir) as server:
        q = ix.client.encrypt_query(g[0])
        results = [server.search(q, m) for m in ("membership", "identification")]
    for r in results:
        for bad in (r[: len(r) // 2], r[:16], _flip(r, len(r) // 2), _flip(r, len(r) - 1), b"garbage"):
            with pytest.raises(Corrupt):
                ix.client.decrypt(bad)
        assert ix.client.decrypt(r).mode in ("membership", "identification")
    with pytest.raises((Corrupt, Mismatch)):
        ix.client.decrypt(q)  # a query is not a result


# ---- corrupt files and missing directories -------------------------------------------


def test_corrupt_manifest(filled):
    ix, _ = filled
    path, manifest = ix.path, ix.index_dir / "manifest.json"
    ix.close()
    original = manifest.read_text()
    manifest.write_text("{ not json")
    with pytest.raises(Corrupt):
        EncryptedIndex(path)
    m = json.loads(original)
    m["count"] = m.get("count", 20) + 5
    manifest.write_text(json.dumps(m))
    with pytest.raises(Corrupt):
        encmatch.index_info(path / "index")
    manifest.write_text(original)
    with EncryptedIndex(path) as again:
        assert len(again) == 20


def test_corrupt_group_file(filled):
    ix, g = filled
    group = sorted(ix.index_dir.glob("group-*"))[0]
    blob = group.read_bytes()
    group.write_bytes(_flip(blob, len(blob) // 2))
    with pytest.raises(Corrupt):
        Server(ix.index_dir, ix.client.server_key_dir)
    group.write_bytes(blob[: len(blob) // 3])
    with pytest.raises(Corrupt):
        Server(ix.index_dir, ix.client.server_key_dir)


def test_missing_directories(tmp_path, keysets):
    with pytest.raises(NotFound):
        Client(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound):
        Client(tmp_path / "empty")  # exists, but holds no keys: the core says so
    with pytest.raises(NotFound):
        EncryptedIndex(tmp_path / "nope")
    with pytest.raises(NotFound):
        Enroller(tmp_path / "nope")
    with pytest.raises(NotFound):
        encmatch.index_info(tmp_path / "empty")
    with pytest.raises(NotFound):
        Server(tmp_path / "empty", keysets(DIM) / "server")


def test_missing_secret_key(tmp_path, keysets):
    keys = tmp_path / "keys"
    shutil.copytree(keysets(DIM), keys)
    (keys / "secret.key").unlink()
    with pytest.raises(NotFound):
        Client(keys)


# ---- keys of another key set or other parameters ----------------------------------


def test_keys_of_another_key_set(filled, keysets):
    ix, g = filled
    other_keys = keysets(DIM, "b")  # same parameters, another key set
    with pytest.raises(Mismatch):
        Server(ix.index_dir, other_keys / "server")
    with pytest.raises(Mismatch):
        Enroller(other_keys / "server").enroll(ix.index_dir, g[:2])
    with Client(other_keys) as other:
        foreign_query = other.encrypt_query(g[0])
        with Server(ix.index_dir, ix.client.server_key_dir) as server:
            with pytest.raises(Mismatch):
                server.search(foreign_query, "identification")
            result = server.search(ix.client.encrypt_query(g[0]), "identification")
        with pytest.raises(Mismatch):
            other.decrypt(result)
    assert len(ix) == 20


def test_keys_with_other_parameters(filled, keysets):
    ix, g = filled
    with pytest.raises(Mismatch):
        Server(ix.index_dir, keysets(32) / "server")
    with Client(keysets(32)) as other:
        q = other.encrypt_query(np.ones(32))
        with Server(ix.index_dir, ix.client.server_key_dir) as server:
            with pytest.raises(Mismatch):
                server.search(q, "membership")


def test_server_key_dir_with_a_secret_key_is_refused(filled):
    ix, _ = filled
    with pytest.raises(InvalidArgument):
        Enroller(ix.client.key_dir).create_index(ix.path / "other-index", 0.5)


def test_failed_enroll_leaves_no_index(keysets, tmp_path):
    """Issue 31: an enrollment that fails after creating its index (vectors of the wrong dimension) leaves
    no index behind, only the error; an existing index it fails on is unchanged."""
    keys = keysets(DIM)
    np.save(tmp_path / "wrong.npy", np.ones((3, DIM + 1), np.float32))
    p = run_cli("enroll", "--keys", keys, "--index", tmp_path / "new", "--delta", 0.5, tmp_path / "wrong.npy")
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("error: "), p.stderr
    assert not (tmp_path / "new").exists()
    np.save(tmp_path / "good.npy", np.eye(DIM, dtype=np.float32)[:3])
    assert run_cli("enroll", "--keys", keys, "--index", tmp_path / "old", "--delta", 0.5, tmp_path / "good.npy").returncode == 0
    before = (tmp_path / "old" / "manifest.json").read_bytes()
    p = run_cli("enroll", "--keys", keys, "--index", tmp_path / "old", tmp_path / "wrong.npy")
    assert p.returncode == 2 and (tmp_path / "old" / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("label", ["a\x00b", "evil\u202egnp.exe", "two\nlines", "\x1b[31mred", "x" * 1001])
def test_labels_must_be_printable_text(filled, label):
    """Issue 31: a label with a control or format character (NUL, newline, escapes, a right-to-left
    override) or over 1,000 characters is refused before anything is written; joiners are text."""
    ix = filled[0]
    before = len(ix)
    with pytest.raises(InvalidArgument, match="label 1"):
        ix.add(np.eye(DIM, dtype=np.float32)[:2], labels=["fine", label])
    assert len(ix) == before
