"""Folded key sets (``Client.generate(fold=True)``): each vector's halves in complex slots.

The encrypted answers equal brute force as the unfolded ones do (the core's
Go tests run every strategy, both stores, streaming and payloads; the
real-face near-threshold test runs a folded key set too, the GPU engine's
conformance test folded strategies); here the SDK and CLI surface: half the
diagonals on disk, and a preset without complex slots refused.
"""

from __future__ import annotations

import numpy as np
import pytest

import encmatch
from encmatch.data import separated_gallery
from encmatch.errors import InvalidArgument
from encmatch.evaluation.bruteforce import expected_results, same_answer

from conftest import run_cli

DIM = 48  # padded to 64: 32 complex diagonals
DELTA = 0.5


@pytest.fixture(scope="module")
def folded(tmp_path_factory):
    """A folded toy key set and an index of 300 vectors enrolled by the key owner."""
    root = tmp_path_factory.mktemp("fold")
    rng = np.random.default_rng(5)
    gallery, _, queries = separated_gallery(rng, DIM, 300, 6)
    client = encmatch.Client.generate(root / "keys", preset="toy", dim=DIM, strategy="bsgs-tbe", fold=True)
    enroller = encmatch.Enroller(client.server_key_dir, owner_key_dir=root / "keys")
    enroller.create_index(root / "index", DELTA)
    enroller.enroll(root / "index", gallery, progress=False)
    yield client, root / "index", gallery, queries
    client.close()


def test_answers_equal_brute_force(folded):
    client, index, gallery, queries = folded
    assert client.params["fold"] and client.params["padded_dim"] == 64
    with encmatch.Server(index, client.server_key_dir) as server:
        for q in queries:
            for mode in ("membership", "identification"):
                got = client.decrypt(server.search(client.encrypt_query(q), mode))
                assert same_answer(got, expected_results(gallery, q[None, :], DELTA, mode)[0]), mode


def test_half_the_diagonals(folded, tmp_path):
    """A group file of the folded key set holds 32 diagonals where the unfolded one holds 64."""
    client, index, gallery, _ = folded
    plain = encmatch.Client.generate(tmp_path / "keys", preset="toy", dim=DIM, strategy="bsgs-tbe", fold=False)
    assert not plain.params.get("fold")
    enroller = encmatch.Enroller(plain.server_key_dir, owner_key_dir=tmp_path / "keys")
    enroller.create_index(tmp_path / "index", DELTA)
    enroller.enroll(tmp_path / "index", gallery, progress=False)
    plain.close()
    size = lambda d: sum(f.stat().st_size for f in d.glob("group-*"))  # noqa: E731
    ratio = size(index) / size(tmp_path / "index")
    assert 0.45 < ratio < 0.55, ratio


def test_what_does_not_fold_says_so(tmp_path):
    with pytest.raises(InvalidArgument, match="complex slots"):
        encmatch.Client.generate(tmp_path / "real", preset="toy-real", dim=DIM, fold=True)
    with pytest.raises(InvalidArgument, match="fold must be True, False or None"):
        encmatch.Client.generate(tmp_path / "bad", preset="toy", dim=DIM, fold="yes")


def test_fold_is_the_default_where_the_preset_can(tmp_path):
    """New key sets fold on the standard ring and stay plain on the conjugate-invariant one."""
    with encmatch.Client.generate(tmp_path / "std", preset="toy", dim=DIM) as c:
        assert c.params["fold"] is True
    with encmatch.Client.generate(tmp_path / "real", preset="toy-real", dim=DIM) as c:
        assert not c.params.get("fold")
    assert encmatch.describe("toy", dim=DIM)["fold"] is True
    assert not encmatch.describe("toy", dim=DIM, fold=False).get("fold")


def test_cli_keygen_fold(tmp_path):
    out = run_cli("keygen", "--keys", str(tmp_path / "k"), "--preset", "toy", "--dim", "192", "--fold")
    assert out.returncode == 0, out.stderr
    assert "fold: yes (128 complex diagonals per group instead of 256)" in out.stdout
    assert "folded (128 complex diagonals per group)" in out.stdout  # the parameters' summary
    plain = run_cli("keygen", "--keys", str(tmp_path / "p"), "--preset", "toy", "--dim", "192", "--no-fold")
    assert plain.returncode == 0, plain.stderr
    assert "fold: yes" not in plain.stdout and "folded" not in plain.stdout


def test_comparator_on_every_core_gives_the_same_bytes(folded):
    """After a server's first search its comparator's program is recorded
    in the background; once ready (``wait_comparators``) the comparator runs
    on every core and the result bytes do not change."""
    import os

    client, index, _, queries = folded
    q = client.encrypt_query(queries[0])
    with encmatch.Server(index, client.server_key_dir) as server:
        before = server.search(q, "identification")
        assert server.last_search["comparator_cores"] == 1
        ready = server.wait_comparators()
        after = server.search(q, "identification")
        assert after == before
        if (os.cpu_count() or 1) > 1:
            assert ready == 1 and server.last_search["comparator_cores"] > 1
