"""Similarity strategies at the toy preset: every one answers as brute force, streaming changes nothing.

One index per strategy over the same gallery (two groups, a dimension
that is padded) and the same queries, built once for the module.
"""

from __future__ import annotations


import json
import shutil

import numpy as np
import pytest

import encmatch
from encmatch import Enroller, EncryptedIndex, InvalidArgument, Mismatch, Server
from encmatch.errors import MemoryBudgetWarning

from conftest import KAPPA, TOY, planted_gallery

DIM = 24  # padded to 32, folded (new key sets fold) into l = 16 complex diagonals: default n1 = 4, n2 = 4
DELTA = 0.5
#: (strategy, n1 asked for, n1 expected): bsgs-tbe with a non-default baby-step size.
CASES = [("dg", 0, 16), ("bsgs-diagonal", 0, 4), ("bsgs-tbs", 0, 4), ("bsgs-tbe", 2, 2)]
STREAMABLE = ["dg", "bsgs-diagonal", "bsgs-tbe"]


@pytest.fixture(scope="module")
def data():
    """The shared gallery (planted scores around delta plus random vectors) and two queries."""
    rng = np.random.default_rng(31)
    q = rng.standard_normal(DIM)
    targets = [DELTA + o for o in (-0.2, -0.03, -0.005, 0.005, 0.03, 0.2, 0.45)]
    gallery = planted_gallery(rng, q, targets, 150)
    queries = np.vstack([q, gallery[10]]).astype(np.float32)
    return gallery, queries


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, data):
    """``indexes(strategy)``: an EncryptedIndex made for ``strategy`` holding the gallery in two groups."""
    gallery, _ = data
    root = tmp_path_factory.mktemp("strategies")
    opened: dict[str, EncryptedIndex] = {}

    def get(strategy: str) -> EncryptedIndex:
        if strategy not in opened:
            n1 = dict((s, n) for s, n, _ in CASES)[strategy]
            with EncryptedIndex.create(root / strategy, dim=DIM, preset=TOY, kappa=KAPPA, delta=DELTA,
                                       strategy=strategy, n1=n1) as ix:
                half = len(gallery) // 2
                ix.add(gallery[:half])
                # a second group though the first has room (an add would fill it): results merged over groups
                Enroller(ix.client.server_key_dir, owner_key_dir=ix.key_dir).enroll(ix.index_dir, gallery[half:],
                                                                                   fill=False)
            opened[strategy] = EncryptedIndex(root / strategy)
        return opened[strategy]

    yield get
    for ix in opened.values():
        ix.close()


@pytest.mark.parametrize("strategy, n1, want_n1", CASES)
def test_every_strategy_agrees_with_bruteforce(indexes, data, check, strategy, n1, want_n1):
    gallery, queries = data
    ix = indexes(strategy)
    assert (ix.strategy, ix.n1) == (strategy, want_n1)
    assert (ix.client.strategy, ix.client.n1) == (strategy, want_n1)
    assert len(ix.info()["groups"]) == 2
    _, results, _, _ = check(ix, gallery, queries)
    assert results["identification"][0].count >= 4  # the planted matches at delta + 0.005 .. 0.45 (check: all exact)
    assert 10 in results["identification"][1].positions
    assert ix.streamed is False


@pytest.mark.parametrize("strategy", STREAMABLE)
def test_streamed_server_gives_identical_answers(indexes, data, strategy):
    """memory_budget=1 byte: groups are streamed from disk per query, the answers are the same."""
    _, queries = data
    ix = indexes(strategy)
    q = ix.client.encrypt_query(queries[0])
    keys = ix.client.server_key_dir
    answers = {}
    with pytest.warns(MemoryBudgetWarning, match="below what streaming this index needs"):
        streamed = Server(ix.index_dir, keys, memory_budget=1)  # one byte cannot hold even the keys: said so
    with Server(ix.index_dir, keys) as resident, streamed:
        assert not resident.streamed and streamed.streamed
        assert not resident.warnings and streamed.warnings
        for mode in ("identification", "membership"):
            a = ix.client.decrypt(resident.search(q, mode))
            b = ix.client.decrypt(streamed.search(q, mode))
            assert streamed.last_search["streamed"] is True and resident.last_search["streamed"] is False
            if mode == "identification":
                assert a.positions.tolist() == b.positions.tolist()
            else:
                assert a.count == b.count and b.raw_count == pytest.approx(a.raw_count, abs=1e-6)
            answers[mode] = a
    # The budget is an open() argument of EncryptedIndex, passed to the server it opens (a fresh
    # encryption of the query: the planted scores are far outside the decision band).
    with EncryptedIndex(ix.path, memory_budget=1) as again:
        got = again.search(queries[0], "identification")
        assert again.streamed is True and got.positions.tolist() == answers["identification"].positions.tolist()


def test_bsgs_tbs_cannot_stream(indexes, data):
    ix = indexes("bsgs-tbs")
    with pytest.raises(InvalidArgument, match="stream"):
        Server(ix.index_dir, ix.client.server_key_dir, memory_budget=1)
    with EncryptedIndex(ix.path, memory_budget=1) as again, pytest.raises(InvalidArgument, match="stream"):
        again.search(data[1][0], "membership")


def test_keys_of_another_strategy_are_refused(indexes, tmp_path):
    tbe, dg = indexes("bsgs-tbe"), indexes("dg")
    with pytest.raises(Mismatch):
        Server(tbe.index_dir, dg.client.server_key_dir)
    with pytest.raises(Mismatch):
        Server(dg.index_dir, tbe.client.server_key_dir)
    # Same key set, but the index says it was made for another strategy (or n1).
    for field, value in (("strategy", "bsgs-diagonal"), ("n1", 8)):
        copy = tmp_path / f"index-{field}"
        shutil.copytree(tbe.index_dir, copy)
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest[field] = value
        (copy / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(Mismatch, match="strategy"):
            Server(copy, tbe.client.server_key_dir)


def test_choose_strategy_ranks_candidates(tmp_path):
    res = encmatch.choose_strategy(64, TOY, KAPPA)
    best = res["candidates"][0]
    assert (res["strategy"], res["n1"]) == (best["strategy"], best["n1"])
    assert {c["strategy"] for c in res["candidates"]} == set(encmatch.STRATEGIES) - {"auto"}
    assert set(best) >= {"keys", "key_bytes", "query_seconds", "load_seconds", "memory_bytes", "streamed"}
    named = encmatch.choose_strategy(64, TOY, KAPPA, strategy="bsgs-tbe")
    assert named["strategy"] == "bsgs-tbe" and named["n1"] == 8
    assert [(c["strategy"], c["n1"]) for c in named["candidates"]] == [("bsgs-tbe", 8)]
    assert encmatch.choose_strategy(64, TOY, KAPPA, strategy="dg")["n1"] == 32  # folded: 32 complex diagonals
    nothing = encmatch.choose_strategy(64, TOY, KAPPA, memory_budget=1)  # nothing fits one byte
    assert nothing["strategy"] is None and "budget" in nothing["error"] and nothing["candidates"]
    with pytest.raises(InvalidArgument):
        encmatch.Client.generate(tmp_path / "k", preset=TOY, kappa=KAPPA, dim=64, memory_budget=1)
    for bad in ({"strategy": "fft"}, {"memory_budget": -1}, {"n1": 3.5}, {"expected_size": True}):
        with pytest.raises(InvalidArgument):
            encmatch.choose_strategy(64, TOY, KAPPA, **bad)
    with pytest.raises(InvalidArgument, match="n1"):
        encmatch.choose_strategy(64, TOY, KAPPA, strategy="bsgs-tbe", n1=65)  # the core checks the range


def test_choose_strategy_models_the_store_and_the_kernels():
    """The estimates name the kernel set whose costs they use; a streamed seeded store costs its masks, a
    public-key one reads twice the bytes; the plain layout has twice the diagonals of the folded one."""
    res = encmatch.choose_strategy(512, strategy="bsgs-tbe", n1=32, expected_size=1 << 17, workers=2,
                                   memory_budget=4 * 10**9)
    assert res["kernels"] == encmatch.version()["kernels"]
    public = res["candidates"][0]
    seeded = encmatch.choose_strategy(512, strategy="bsgs-tbe", n1=32, expected_size=1 << 17, workers=2,
                                      memory_budget=4 * 10**9, seeded=True)["candidates"][0]
    assert public["streamed"] and seeded["streamed"] and seeded["query_seconds"] > public["query_seconds"]
    folded = encmatch.choose_strategy(512, strategy="bsgs-tbe", n1=32, expected_size=1 << 14, fold=True)
    plain = encmatch.choose_strategy(512, strategy="bsgs-tbe", n1=32, expected_size=1 << 14, fold=False)
    assert plain["candidates"][0]["query_seconds"] > folded["candidates"][0]["query_seconds"]
    with pytest.raises(InvalidArgument, match="seeded"):
        encmatch.choose_strategy(512, seeded="yes")
