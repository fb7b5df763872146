"""Small appends fill the index's last partial group instead of adding a whole group (issue 17, item 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

import encmatch
from encmatch import cli
from encmatch.service import remote

DIM = 16
DELTA = 0.5


def _gallery(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def _found_once(ix: encmatch.EncryptedIndex, gallery: np.ndarray, rows) -> None:
    """Each probed row is found at its own (global) position and nowhere else among its copies."""
    for i in rows:
        hits = ix.search(gallery[i], "identification").positions.tolist()
        assert i in hits, (i, hits)


def test_add_of_3_fills_the_partial_group(new_index, check):
    """``EncryptedIndex.add`` of 3 vectors to a partial index keeps one group, reports the fill, answers exactly."""
    ix = new_index(DIM, DELTA)
    g = _gallery(243, seed=1)
    first = ix.add(g[:240])
    assert first.report == ["new group 0 (240 entries of 2,048)"] and first.groups_new == 1
    one_group = ix.info()["groups"][0]["bytes"]
    summary = ix.add(g[240:])
    groups = ix.info()["groups"]
    assert len(groups) == 1 and groups[0]["count"] == 243 and groups[0]["fills"] == 1
    assert summary.report == ["filled group 0 (3 entries, now 243 of 2,048)"]
    assert (summary.groups_filled, summary.groups_new, summary.added, summary.total) == (1, 0, 3, 243)
    assert summary.group_writes == (encmatch.GroupWrite(group=0, filled=True, added=3, count=243,
                                                        bytes=groups[0]["bytes"], seeded=True),)
    # the group was rewritten, not a second one added: the index is one group's size
    files = sorted(p.name for p in ix.index_dir.glob("group-*"))
    assert files == ["group-000000.fill-1.ct"]
    assert abs(summary.growth) < 256 and abs(groups[0]["bytes"] - one_group) < 256
    check(ix, g, np.vstack([g[1], g[241], g[242], _gallery(1, seed=9)[0]]))
    _found_once(ix, g, (0, 240, 241, 242))


def test_appends_by_both_enrollers_and_overflow(new_index, check):
    """A public-key enroller fills the owner's seeded group (stored whole); an append larger than the room
    fills the group and starts a new one; labels, sealed per batch, stay on their global positions."""
    ix = new_index(DIM, DELTA)
    size = ix.params["group_size"]
    g = _gallery(size + 12, seed=2)
    names = [f"p{i}" for i in range(len(g))]
    ix.add(g[:size - 10], labels=names[:size - 10])
    public = encmatch.Enroller(ix.client.server_key_dir).enroll(ix.index_dir, g[size - 10:size - 8],
                                                               names[size - 10:size - 8], progress=False)
    assert public.report == [f"filled group 0 (2 entries, now {size - 8:,} of {size:,})"]
    ix.manifest = encmatch.index_info(ix.index_dir)
    assert [(grp["count"], grp.get("seeded", False)) for grp in ix.manifest["groups"]] == [(size - 8, False)]
    summary = ix.add(g[size - 8:], labels=names[size - 8:])
    assert summary.report == [f"filled group 0 (8 entries, now {size:,} of {size:,})",
                                 f"new group 1 (12 entries of {size:,})"]
    groups = ix.info()["groups"]
    assert [(grp["count"], grp.get("seeded", False), grp.get("fills", 0)) for grp in groups] == \
        [(size, True, 2), (12, True, 0)]
    _, results, _, _ = check(ix, g, np.vstack([g[size - 9], g[size - 1], g[size + 5]]))
    res = ix.search(g[size - 9], "identification")
    assert size - 9 in res.positions.tolist() and res.labels[res.positions.tolist().index(size - 9)] == f"p{size - 9}"


def test_small_batches_fill_one_group(new_index, check):
    """Batches smaller than a group fill the same group call after call; one record per group is reported."""
    ix = new_index(DIM, DELTA)
    g = _gallery(150, seed=3)
    ix.add(g[:5])
    summary = encmatch.Enroller(ix.client.server_key_dir, owner_key_dir=ix.key_dir).enroll(
        ix.index_dir, g[5:], batch_size=64, progress=False)
    assert summary.groups_filled == 3 and summary.report == ["filled group 0 (145 entries, now 150 of 2,048)"]
    ix.manifest = encmatch.index_info(ix.index_dir)
    assert len(ix.manifest["groups"]) == 1 and ix.manifest["groups"][0]["fills"] == 3
    check(ix, g, np.vstack([g[4], g[70], g[149]]))


def test_cli_enroll_prints_the_fill(tmp_path, keysets, capsys):
    """``encmatch enroll`` says whether it filled a group or added one, and what it wrote."""
    (tmp_path / "ix").mkdir()
    keys = tmp_path / "ix" / "keys"
    keys.symlink_to(keysets(DIM), target_is_directory=True)
    index = tmp_path / "ix" / "index"
    g = _gallery(243, seed=4)
    np.save(tmp_path / "a.npy", g[:240])
    np.save(tmp_path / "b.npy", g[240:])
    base = ["enroll", "--keys", str(keys), "--index", str(index), "--delta", str(DELTA)]
    assert cli.main(base + [str(tmp_path / "a.npy")]) == 0
    out = capsys.readouterr().out
    assert "new group 0 (240 entries of 2,048): " in out and " MB added" in out
    assert cli.main(base + [str(tmp_path / "b.npy")]) == 0
    out = capsys.readouterr().out
    assert "filled group 0 (3 entries, now 243 of 2,048): " in out and " MB rewritten" in out
    assert len(encmatch.index_info(index)["groups"]) == 1


class _FakeService:
    """The calls :func:`encmatch.service.remote.enroll` makes, over a local directory standing for the service."""

    url = "fake://local"

    def __init__(self, index_dir: Path):
        self.dir = index_dir
        self.committed = None
        self.uploaded: list[str] = []
        self.downloaded: list[str] = []

    def manifest(self, index_id):
        return encmatch.index_info(self.dir)

    def download_group(self, index_id, name, dest):
        self.downloaded.append(name)
        shutil.copy(self.dir / name, dest)
        return Path(dest).stat().st_size

    def upload_file(self, index_id, path, name=None, on_bytes=None):
        self.uploaded.append(Path(path).name)
        shutil.copy(path, self.dir / Path(path).name)
        if on_bytes is not None:
            on_bytes(Path(path).stat().st_size)
        return {}

    def commit(self, index_id, manifest, sealed=()):
        self.committed = manifest
        (self.dir / "manifest.json").write_text(__import__("json").dumps(manifest))
        return {}


def test_service_path_fills_the_last_group(new_index):
    """Enrolling through the service fills its last group (issue 31): the group file is downloaded into
    the staging directory, filled there, uploaded under its next name, and the commit replaces it; an
    empty index has nothing to fill and downloads nothing."""
    ix = new_index(DIM, DELTA)
    g = _gallery(8, seed=5)
    ix.add(g[:5])
    fake = _FakeService(ix.index_dir)
    owner = encmatch.Enroller(ix.client.server_key_dir, owner_key_dir=ix.key_dir)
    summary = remote.enroll(fake, "id", owner, g[5:], progress=False)
    assert summary.report == ["filled group 0 (3 entries, now 8 of 2,048)"] and summary.warnings == ()
    assert fake.downloaded == ["group-000000.ct"] and fake.uploaded == ["group-000000.fill-1.ct"]
    assert summary.downloaded_bytes > 0
    assert [(grp["count"], grp.get("fills")) for grp in fake.committed["groups"]] == [(8, 1)]
    ix2 = new_index(DIM, DELTA)
    fake2 = _FakeService(ix2.index_dir)
    remote.enroll(fake2, "id", owner_for(ix2), g[:2], progress=False)
    assert fake2.downloaded == [] and fake2.uploaded == ["group-000000.ct"]


def owner_for(ix: encmatch.EncryptedIndex) -> encmatch.Enroller:
    return encmatch.Enroller(ix.client.server_key_dir, owner_key_dir=ix.key_dir)
