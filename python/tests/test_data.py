"""Locating the shared face data, loading embedding files and building demo/validation scenarios (no core needed)."""

from __future__ import annotations

import numpy as np
import pytest

from encmatch import Corrupt, InvalidArgument, NotFound
from encmatch.data import FaceSet, build_scenario, find_data_dir, load_faceset_file, load_labels, load_vectors


def test_env_var_overrides_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ENCMATCH_DATA", str(tmp_path))
    assert find_data_dir() == tmp_path
    monkeypatch.setenv("ENCMATCH_DATA", str(tmp_path / "missing"))
    with pytest.raises(NotFound):
        find_data_dir()
    assert find_data_dir(required=False) is None


def test_walks_up_to_shared_data(monkeypatch, tmp_path):
    monkeypatch.delenv("ENCMATCH_DATA", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    deep = tmp_path / "repo" / "sub"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert find_data_dir() == tmp_path / "shared" / "data"


def test_load_vectors_and_labels(tmp_path):
    emb = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "v.npy", emb)
    np.savez(tmp_path / "v.npz", emb=emb, label=np.array([1, 0, 1]), names=np.array(["ann", "bob"]), name=np.array(["x", "y", "z"]))
    np.testing.assert_array_equal(load_vectors(tmp_path / "v.npy"), emb)
    np.testing.assert_array_equal(load_vectors(tmp_path / "v.npz"), emb)
    assert load_labels(tmp_path / "v.npz", "label") == ["bob", "ann", "bob"]
    assert load_labels(tmp_path / "v.npz", "name") == ["x", "y", "z"]
    with pytest.raises(InvalidArgument, match="no array"):
        load_vectors(tmp_path / "v.npz", "nope")
    with pytest.raises(NotFound):
        load_vectors(tmp_path / "missing.npy")
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(Corrupt, match="not a .npy file"):
        load_vectors(tmp_path / "bad.npy")
    (tmp_path / "v.txt").write_text("1 2 3")
    with pytest.raises(InvalidArgument):
        load_vectors(tmp_path / "v.txt")
    faces = load_faceset_file(tmp_path / "v.npz")
    assert faces.name.tolist() == ["bob", "ann", "bob"]


def _toy_faces(n_ids=30, per_id=3, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((n_ids * per_id, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    label = np.repeat(np.arange(n_ids), per_id)
    return FaceSet(emb=emb, label=label, names=np.array([f"id{i}" for i in range(n_ids)]))


def _rows_of(faces, vectors):
    """Row index in faces.emb of each vector (-1 for synthetic ones)."""
    out = []
    for v in vectors:
        hit = np.flatnonzero((faces.emb == v).all(axis=1))
        out.append(int(hit[0]) if len(hit) else -1)
    return np.array(out)


def test_build_scenario_ground_truth():
    faces = _toy_faces()
    sc = build_scenario(faces, size=100, n_known=4, n_unknown=3, n_enrolled=10, seed=2)
    assert sc.gallery.shape == (100, 8) and len(sc.gallery_labels) == 100
    assert sc.query_enrolled == [True] * 4 + [False] * 3
    g_rows, q_rows = _rows_of(faces, sc.gallery), _rows_of(faces, sc.queries)
    assert (q_rows >= 0).all() and not set(q_rows) & set(g_rows)  # queries are other images
    g_ids = faces.label[g_rows[g_rows >= 0]]
    for known, row in zip(sc.query_enrolled, q_rows):
        n_in_gallery = int(np.sum(g_ids == faces.label[row]))
        assert n_in_gallery == (1 if known else 0)  # exactly one image of a known person, none of unknown
        assert sc.query_names[list(q_rows).index(row)] == faces.names[faces.label[row]]
    # 90 faces minus the 4 known query images, the 3 unknown identities' 9 faces...: the rest is synthetic.
    assert sc.counts["padding_synthetic"] == int(np.sum(g_rows < 0)) > 0
    synth = [lab for lab in sc.gallery_labels if lab.startswith("synthetic-")]
    assert len(synth) == sc.counts["padding_synthetic"]
    np.testing.assert_allclose(np.linalg.norm(sc.gallery, axis=1), 1.0, rtol=1e-5)
    assert "gallery 100 vectors" in sc.describe()


def test_build_scenario_is_deterministic_and_caps():
    faces = _toy_faces()
    a = build_scenario(faces, size=40, seed=9)
    b = build_scenario(faces, size=40, seed=9)
    np.testing.assert_array_equal(a.gallery, b.gallery)
    assert a.query_names == b.query_names
    assert a.counts["enrolled"] == 20  # min(3000, size // 2)
    with pytest.raises(InvalidArgument):
        build_scenario(faces, size=0)


@pytest.mark.data
def test_lfw_scenario_at_default_group(lfw):
    sc = build_scenario(lfw, size=16384, seed=1)
    assert sc.counts["enrolled"] == 3000 and len(sc.gallery) == 16384
    assert sc.counts["padding_real"] > 9000
    for name, known in zip(sc.query_names, sc.query_enrolled):
        assert sc.gallery_labels.count(name) == (1 if known else 0), name
