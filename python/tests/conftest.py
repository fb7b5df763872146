"""Shared fixtures of the encmatch Python suite.

Everything that needs the core runs at the ``toy`` preset (fast, INSECURE)
unless marked ``secure``. Key sets are expensive, so they are generated
once per session and dimension and shared by symlink (the core never writes
into a key directory after keygen). Real faces come from ``shared/data``;
tests that need them are skipped when it is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import encmatch
from encmatch.evaluation.bruteforce import cosine_scores
from encmatch.data import find_data_dir, load_faces
from encmatch._util.defaults import DEFAULT_KAPPA
from encmatch.results import MODES
from encmatch.evaluation.validate import compare

#: The preset and comparator depth of the suite (the default depth, so the
#: suite tests the comparator that users get).
TOY = "toy"
KAPPA = DEFAULT_KAPPA


@pytest.fixture(scope="session")
def keysets(tmp_path_factory):
    """``keysets(dim, name="a")``: the key directory of a toy key set, generated once per (dim, name)."""
    cache: dict[tuple[int, str], Path] = {}

    def get(dim: int, name: str = "a") -> Path:
        key = (dim, name)
        if key not in cache:
            d = tmp_path_factory.mktemp(f"keys-{dim}-{name}") / "keys"
            encmatch.Client.generate(d, preset=TOY, kappa=KAPPA, dim=dim).close()
            cache[key] = d
        return cache[key]

    return get


@pytest.fixture
def new_index(tmp_path, keysets):
    """``new_index(dim, delta=0.5, keys="a")``: an empty EncryptedIndex over a shared toy key set."""
    opened: list[encmatch.EncryptedIndex] = []

    def make(dim: int, delta: float = 0.5, keys: str = "a", name: str | None = None) -> encmatch.EncryptedIndex:
        path = tmp_path / (name or f"ix{len(opened)}")
        path.mkdir()
        (path / "keys").symlink_to(keysets(dim, keys), target_is_directory=True)
        encmatch.Enroller(path / "keys" / "server").create_index(path / "index", delta)
        ix = encmatch.EncryptedIndex(path)
        opened.append(ix)
        return ix

    yield make
    for ix in opened:
        ix.close()


def check_against_bruteforce(index, gallery, queries, modes=MODES, labels=None):
    """Search ``queries`` in ``index`` in every mode and assert agreement with brute force.

    Identification must equal brute force for every pair whose score is
    outside the decision band; membership counts must lie in the value
    band. Returns ``(report, results by mode, scores, bands)``.
    """
    scores = cosine_scores(gallery, queries)
    bands = encmatch.comparator(KAPPA, index.delta, scores)
    results = {m: index.search(np.atleast_2d(queries), m) for m in modes}
    report = compare(
        scores, index.delta, bands,
        membership=results.get("membership"), identification=results.get("identification"),
        gallery_labels=labels, kappa=KAPPA,
    )
    assert report.ok, "\n" + report.table() + "\n" + report.summary()
    if "identification" in results:
        near = np.abs(scores - index.delta) <= bands["decision_band"]
        for i, res in enumerate(results["identification"]):
            exact = set(np.flatnonzero(scores[i] >= index.delta)) - set(np.flatnonzero(near[i]))
            got = set(res.positions.tolist()) - set(np.flatnonzero(near[i]))
            assert got == exact, f"query {i}: encrypted {sorted(got)} != brute force {sorted(exact)}"
    return report, results, scores, bands


@pytest.fixture
def check():
    """The :func:`check_against_bruteforce` helper."""
    return check_against_bruteforce


def planted_gallery(rng, query: np.ndarray, targets, n_random: int) -> np.ndarray:
    """Gallery with one vector at each target cosine score to ``query``, plus random unit vectors."""
    d = query.shape[0]
    q = query / np.linalg.norm(query)
    rows = []
    for t in targets:
        u = rng.standard_normal(d)
        u -= (u @ q) * q
        u /= np.linalg.norm(u)
        rows.append(t * q + np.sqrt(max(0.0, 1 - t * t)) * u)
    rand = rng.standard_normal((n_random, d))
    rand /= np.linalg.norm(rand, axis=1, keepdims=True)
    out = np.vstack([np.array(rows).reshape(-1, d), rand]).astype(np.float32)
    return out[rng.permutation(len(out))]


@pytest.fixture
def planted():
    """The :func:`planted_gallery` helper."""
    return planted_gallery


@pytest.fixture(scope="session")
def data_dir():
    """The shared face data directory (skips the test when absent)."""
    d = find_data_dir(required=False)
    if d is None or not (d / "lfw" / "embeddings_mfn.npz").is_file():
        pytest.skip("shared face data not found (set ENCMATCH_DATA)")
    return d


@pytest.fixture(scope="session")
def lfw(data_dir):
    """LFW MobileFaceNet embeddings (13,233 faces, 192-d)."""
    return load_faces("lfw", "mfn", data_dir)


@pytest.fixture(scope="session")
def orl(data_dir):
    """ORL MobileFaceNet embeddings (400 faces, 40 people, 192-d)."""
    return load_faces("orl", "mfn", data_dir)


def run_cli(*args, cwd=None, env=None, timeout=600):
    """Run ``python -m encmatch ARGS``; returns the CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "encmatch", *map(str, args)],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture
def cli():
    """The :func:`run_cli` helper."""
    return run_cli


def pytest_configure(config):
    """The suite runs at the toy preset on purpose: its InsecureParameters warnings are expected
    (test_usage.py checks that they are raised, inside pytest.warns, which sees them anyway).
    Remote-enrollment journals go to a directory of the run's own (the CLI processes inherit it)."""
    config.addinivalue_line("filterwarnings", "ignore::encmatch.errors.InsecureParameters")
    if "ENCMATCH_STATE_DIR" not in os.environ:
        import tempfile

        os.environ["ENCMATCH_STATE_DIR"] = tempfile.mkdtemp(prefix="encmatch-state-")


def fake_validate(flip: tuple[int, int] | None = None):
    """A stand-in for validate.run: the plaintext decisions as the 'encrypted' ones, ``flip`` one pair."""
    from encmatch.params import comparator
    from encmatch.results import make_result
    from encmatch.evaluation.validate import compare

    def run(gallery, queries, *, delta, **kw):
        """The comparison report of the plaintext decisions at ``delta`` (one pair flipped)."""
        s = cosine_scores(gallery, queries)
        dec = s >= delta
        if flip is not None:
            dec[flip] = ~dec[flip]
        ident = [make_result("identification", positions=np.flatnonzero(row)) for row in dec]
        return compare(s, delta, comparator(10, delta), identification=ident, query_names=kw.get("query_names"))

    return run
