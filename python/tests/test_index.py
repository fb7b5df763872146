"""End to end through the SDK at the toy preset: encrypted answers equal brute force."""

from __future__ import annotations

import numpy as np
import pytest

import encmatch
from encmatch import Client, EncryptedIndex, Enroller, IdentificationResult, MembershipResult, Server

from encmatch._util.defaults import DEFAULT_KAPPA
from encmatch.errors import InvalidArgument

from conftest import KAPPA, TOY


def test_core_answers_version_presets_describe():
    assert "version" in encmatch.version()
    names = {p["preset"] for p in encmatch.presets()}
    assert {"default", "toy"} <= names
    d = encmatch.describe(TOY, KAPPA, 32)
    assert d["insecure"] is True and d["dim"] == 32 and d["slots"] == 2048 and d["group_size"] == 2048
    assert encmatch.describe("default", KAPPA, 32)["security_bits"] >= 128
    assert {"real", "toy-real"} <= names
    real = encmatch.describe("real", KAPPA, 512)
    assert real["ring"] == "ConjugateInvariant" and real["slots"] == real["group_size"] == 32768
    assert real["security_bits"] >= 128 and real["insecure"] is False
    assert encmatch.describe("toy-real", KAPPA, 32)["insecure"] is True


def test_describe_recognises_key_sets_made_with_the_old_primes():
    """Key sets made before 2026-11-29 name Lattigo's alternating primes in their fingerprint (pinned in
    core/base/params): describe with that fingerprint gives those primes, the service's key check accepts it."""
    new = encmatch.describe("toy", 7, 8, fold=False)
    legacy_fp = "a247bf2e9ab6b4a07849c68a006b348f"
    assert new["moduli"] == "below" and new["fingerprint"] != legacy_fp
    old = encmatch.describe("toy", 7, 8, fold=False, fingerprint=legacy_fp)
    assert old["moduli"] == "alternating" and old["fingerprint"] == legacy_fp
    unknown = encmatch.describe("toy", 7, 8, fold=False, fingerprint="0" * 32)
    assert unknown["fingerprint"] == new["fingerprint"]


def test_real_ring_index_near_threshold(tmp_path, planted, check):
    """The conjugate-invariant toy (4,096 real slots per group): two groups, scores planted around delta,
    every decision outside the band equal to brute force through the SDK."""
    rng = np.random.default_rng(3)
    delta, dim = 0.5, 32
    q = rng.standard_normal(dim)
    targets = [delta + o for o in (-0.1, -0.01, -0.005, 0.005, 0.01, 0.1, 0.49)]
    gallery = planted(rng, q, targets, 4200)
    with encmatch.EncryptedIndex.create(tmp_path / "ix", dim=dim, preset="toy-real", kappa=KAPPA, delta=delta) as ix:
        assert ix.info()["params"]["slots"] == 4096
        ix.add(gallery)
        assert len(ix.info()["groups"]) == 2
        report, results, _, _ = check(ix, gallery, np.vstack([q, gallery[5000 % len(gallery)]]))
        assert results["identification"][0].count >= 4  # the planted matches (random 32-d vectors add some)


def test_default_kappa_is_the_cores():
    """The SDK's DEFAULT_KAPPA is the core's (describe with kappa 0 takes the core's default)."""
    assert encmatch.describe(TOY, 0, 32)["kappa"] == DEFAULT_KAPPA


def test_comparator_model_and_bands():
    res = encmatch.comparator(KAPPA, 0.5, np.array([-1.0, 0.0, 0.3, 0.7, 1.0]))
    v = np.array(res["values"])
    assert v.shape == (5,)
    np.testing.assert_allclose(v, [0, 0, 0, 1, 1], atol=1e-3)
    assert 0 < res["decision_band"] <= res["value_band"] < 0.2


def test_planted_scores_near_threshold(new_index, planted, check):
    """Gallery entries planted at delta +- 0.005..0.3: every one outside the decision band is decided exactly."""
    rng = np.random.default_rng(1)
    delta = 0.5
    ix = new_index(32, delta)
    q = rng.standard_normal(32)
    targets = [delta + o for o in (-0.3, -0.1, -0.03, -0.01, -0.005, 0.005, 0.01, 0.03, 0.1, 0.3, 0.49)]
    gallery = planted(rng, q, targets, 400)
    ix.add(gallery)
    assert len(ix) == len(gallery)
    queries = np.vstack([q, rng.standard_normal((2, 32)), gallery[:2]])
    report, results, scores, _ = check(ix, gallery, queries)
    assert results["identification"][0].count == 6  # the planted matches
    assert results["membership"][0].enrolled


def test_results_have_sdk_shapes(new_index):
    rng = np.random.default_rng(2)
    ix = new_index(16, 0.6)
    g = rng.standard_normal((40, 16)).astype(np.float32)
    ix.add(g)
    one = ix.search(g[3], "membership")
    assert isinstance(one, MembershipResult) and one.enrolled and one.count >= 1
    many = ix.search(g[:2], "identification")
    assert isinstance(many, list) and len(many) == 2
    assert all(isinstance(r, IdentificationResult) for r in many)
    assert 0 in many[0].positions and 1 in many[1].positions
    assert many[0].positions.dtype == np.int64
    assert many[0].labels is None  # no labels enrolled
    with pytest.raises(encmatch.InvalidArgument):
        ix.search(g[0], "nearest")


def test_multiple_adds_labels_round_trip_and_reopen(new_index, check):
    rng = np.random.default_rng(4)
    ix = new_index(16, 0.55)
    a = rng.standard_normal((30, 16))
    b = rng.standard_normal((45, 16))
    la = [f"alice-{i}" for i in range(30)]
    lb = [f"bob-{i}" for i in range(45)]
    s1 = ix.add(a, labels=la)
    s2 = ix.add(b, labels=np.array(lb))
    assert s1.added == 30 and s2.added == 45 and len(ix) == 75
    assert ix.labels == la + lb
    gallery = np.vstack([a, b])
    queries = np.vstack([a[5], b[40], rng.standard_normal(16)])
    _, results, _, _ = check(ix, gallery, queries, labels=la + lb)
    hit_a, hit_b = results["identification"][0], results["identification"][1]
    assert 5 in hit_a.positions and "alice-5" in hit_a.labels
    assert 70 in hit_b.positions and "bob-40" in hit_b.labels
    for got in results["identification"]:
        assert got.labels == [(la + lb)[p] for p in got.positions]
    # Reopen from disk: same count, labels and answers.
    path = ix.path
    ix.close()
    with EncryptedIndex(path) as again:
        assert len(again) == 75 and again.labels == la + lb
        assert again.search(b[40], "identification").labels == hit_b.labels


def test_unlabelled_add_after_labelled_add(new_index):
    rng = np.random.default_rng(5)
    ix = new_index(16, 0.5)
    ix.add(rng.standard_normal((3, 16)), labels=["a", "b", "c"])
    ix.add(rng.standard_normal((2, 16)))
    assert len(ix) == 5
    labels = ix.labels
    assert labels is None or labels[:3] == ["a", "b", "c"]


def test_many_small_groups(new_index, check):
    """Enrolling in batches smaller than a group fills one group call after call; positions stay global."""
    rng = np.random.default_rng(6)
    ix = new_index(16, 0.5)
    g = rng.standard_normal((150, 16)).astype(np.float32)
    summary = Enroller(ix.client.server_key_dir).enroll(ix.index_dir, g, batch_size=64, progress=False)
    assert summary.added == 150
    ix.manifest = encmatch.index_info(ix.index_dir)
    assert len(ix) == 150
    check(ix, g, np.vstack([g[10], g[100], g[149]]))


def test_owner_enrollment_is_seeded_and_half_the_bytes(new_index, check):
    """EncryptedIndex.add enrolls as the key owner (seeded); a public-key enroller filling that group stores it
    whole, twice the bytes, and the owner's next fill makes it seeded again; answers are exact every time."""
    rng = np.random.default_rng(8)
    ix = new_index(16, 0.5)
    g = rng.standard_normal((90, 16)).astype(np.float32)
    owner = ix.add(g[:30])
    public = Enroller(ix.client.server_key_dir).enroll(ix.index_dir, g[30:60], progress=False)
    ix.manifest = encmatch.index_info(ix.index_dir)
    assert [grp.get("seeded", False) for grp in ix.manifest["groups"]] == [False]
    assert 0.45 < owner.bytes / public.bytes < 0.55
    check(ix, g[:60], np.vstack([g[3], g[40], rng.standard_normal(16)]))
    again = ix.add(g[60:])
    assert [grp.get("seeded", False) for grp in ix.manifest["groups"]] == [True]
    assert 0.45 < again.bytes / public.bytes < 0.55
    check(ix, g, np.vstack([g[3], g[40], g[80], rng.standard_normal(16)]))


def test_empty_index_matches_nothing(new_index):
    ix = new_index(16)
    assert len(ix) == 0
    assert ix.search(np.ones(16), "membership").count == 0
    assert ix.search(np.ones((2, 16)), "identification")[1].positions.size == 0


def test_create_and_roles_separately(tmp_path):
    """The three roles by hand: client keygen, enroller, server; results only the client can read."""
    rng = np.random.default_rng(7)
    g = rng.standard_normal((20, 16)).astype(np.float32)
    with Client.generate(tmp_path / "keys", preset=TOY, kappa=KAPPA, dim=16) as client:
        assert client.dim == 16 and client.insecure and client.keygen_info["key_id"] == client.key_id
        assert not (client.server_key_dir / "secret.key").exists()
        enroller = Enroller(client.server_key_dir)
        manifest = enroller.create_index(tmp_path / "index", 0.6)
        assert float(manifest["delta"]) == 0.6
        enroller.enroll(tmp_path / "index", g, labels=[f"p{i}" for i in range(20)])
        q = client.encrypt_query(g[7])
        assert isinstance(q, bytes) and len(q) > 0
        with Server(tmp_path / "index", client.server_key_dir) as server:
            r = server.search(q, "identification")
            assert server.last_search.get("mode") == "identification"
            m = server.search(q, "membership")
        d = client.decrypt(r)
        assert d.mode == "identification" and 7 in d.positions.tolist()
        assert client.decrypt(m).count >= 1
    assert client.closed


def test_create_refuses_existing_keys(tmp_path):
    with EncryptedIndex.create(tmp_path / "ix", dim=16, preset=TOY, kappa=KAPPA, delta=0.5) as ix:
        assert len(ix) == 0 and ix.params["insecure"]
    with pytest.raises(encmatch.Exists):
        EncryptedIndex.create(tmp_path / "ix", dim=16, preset=TOY, kappa=KAPPA, delta=0.5)


def test_handles_close_once(new_index):
    ix = new_index(16)
    client = ix.client
    ix.close()
    ix.close()
    assert client.closed
    with pytest.raises(encmatch.InvalidArgument, match="closed"):
        client.encrypt_query(np.ones(16))


def test_garbage_collected_handles_do_not_raise(keysets):
    import gc

    for _ in range(3):
        Client(keysets(16))  # never closed explicitly
    gc.collect()


def test_streamed_index_searches_several_queries_per_pass(new_index, check):
    """An index searched under a memory budget it does not fit streams its groups; several queries go to
    the core as one batch (Server.search_batch) and every answer still equals brute force; a batch gives
    each query's own search bytes, and bad batches are refused."""
    rng = np.random.default_rng(12)
    ix = new_index(16, 0.5)
    g = rng.standard_normal((2600, 16)).astype(np.float32)
    ix.add(g)
    streamed = encmatch.EncryptedIndex(ix.path, memory_budget=1)
    try:
        check(streamed, g, np.vstack([g[5], g[2100], rng.standard_normal(16), g[5]]))
        server = streamed._open_server()
        assert server.streamed
        qs = [ix.client.encrypt_query(g[i]) for i in (5, 2100)]
        batch = server.search_batch(qs, "identification")
        assert server.last_search["queries"] == 2
        assert batch == [server.search(q, "identification") for q in qs]
        with pytest.raises(InvalidArgument):
            server.search_batch([], "membership")
        with pytest.raises(InvalidArgument):
            server.search_batch(["not bytes"], "membership")
        with pytest.raises(InvalidArgument):
            server.search_batch(qs, "membership", bound=4)
    finally:
        streamed.close()
