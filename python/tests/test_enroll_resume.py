"""An interrupted enrollment (kill -9, Ctrl-C, a crash between steps) rerun adds nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import encmatch
from encmatch import _core
from encmatch._util import journal as journal_mod
from encmatch.errors import Corrupt


DIM = 16
DELTA = 0.5
BATCH = 16


def _gallery(n: int, seed: int = 5) -> tuple[np.ndarray, list[str]]:
    g = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return g, [f"person-{i:04d}" for i in range(n)]


def _owner(ix: encmatch.EncryptedIndex) -> encmatch.Enroller:
    return encmatch.Enroller(ix.key_dir / "server", owner_key_dir=ix.key_dir)


def _assert_exact(path, gallery: np.ndarray, names: list[str]) -> None:
    """Every probed gallery vector is found exactly once, at its own position, under its own name."""
    with encmatch.EncryptedIndex(path) as ix:
        assert len(ix) == len(gallery)
        for i in (0, 17, len(gallery) // 2, len(gallery) - 1):
            res = ix.search(gallery[i], "identification")
            hits = res.positions.tolist()
            assert i in hits
            assert [p for p in hits if np.array_equal(gallery[p], gallery[i])] == [i]
            assert res.labels[hits.index(i)] == names[i]


def _failing_call(fail_at: int, exc: BaseException):
    """``_core.call`` that raises ``exc`` instead of the ``fail_at``-th enroll call."""
    real = _core.call
    seen = {"n": 0}

    def call(method, *a, **kw):
        if method == "enroll":
            seen["n"] += 1
            if seen["n"] == fail_at:
                raise exc
        return real(method, *a, **kw)

    return call


def test_ctrl_c_then_rerun_adds_nothing_twice(new_index, monkeypatch):
    ix = new_index(DIM, DELTA)
    gallery, names = _gallery(100)
    monkeypatch.setattr(_core, "call", _failing_call(4, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)
    monkeypatch.undo()
    assert encmatch.manifest.Manifest.of(encmatch.manifest.index_info(ix.index_dir)).total == 3 * BATCH

    summary = _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)
    assert (summary.skipped, summary.added, summary.total) == (3 * BATCH, 100 - 3 * BATCH, 100)
    _assert_exact(ix.path, gallery, names)
    again = _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)  # a plain repeat adds nothing
    assert (again.skipped, again.added, again.total) == (100, 0, 100)


def test_crash_after_the_group_before_the_journal(new_index, monkeypatch):
    """The core committed the group but the journal still says pending (and the labels were not sealed)."""
    ix = new_index(DIM, DELTA)
    gallery, names = _gallery(40, seed=6)

    def crash(self, batch, start):
        raise OSError("simulated crash after the core call")

    monkeypatch.setattr(journal_mod.Journal, "finish", crash)
    with pytest.raises(OSError):
        _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)
    monkeypatch.undo()
    doc = json.loads((ix.index_dir / journal_mod.JOURNAL_FILE).read_text())
    assert [b["done"] for b in doc["batches"]] == [False]
    summary = _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)
    assert (summary.skipped, summary.added, summary.total) == (BATCH, 40 - BATCH, 40)
    _assert_exact(ix.path, gallery, names)  # the first batch's labels were sealed by the rerun


def test_crash_before_the_group_is_in(new_index, monkeypatch):
    """A pending batch whose group never landed is forgotten, then enrolled by the rerun."""
    ix = new_index(DIM, DELTA)
    gallery, names = _gallery(40, seed=7)
    monkeypatch.setattr(_core, "call", _failing_call(2, RuntimeError("core died")))
    with pytest.raises(RuntimeError):
        _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)
    monkeypatch.undo()
    doc = json.loads((ix.index_dir / journal_mod.JOURNAL_FILE).read_text())
    assert [b["done"] for b in doc["batches"]] == [True, False]
    summary = _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)
    assert (summary.skipped, summary.added, summary.total) == (BATCH, 40 - BATCH, 40)
    _assert_exact(ix.path, gallery, names)


def test_journal_that_disagrees_with_the_index_is_refused(new_index):
    ix = new_index(DIM, DELTA)
    gallery, names = _gallery(20, seed=8)
    _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)
    path = ix.index_dir / journal_mod.JOURNAL_FILE
    doc = json.loads(path.read_text())
    doc["batches"].append({"digest": "00" * 32, "start": 10, "count": 16, "done": False})
    path.write_text(json.dumps(doc))
    with pytest.raises(Corrupt, match="interrupted batch"):
        _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)
    path.write_text("{not json")
    with pytest.raises(Corrupt, match="journal"):
        _owner(ix).enroll(ix.index_dir, gallery, names, batch_size=BATCH)


def test_kill_9_mid_enroll_cli_then_rerun(tmp_path, keysets):
    """The reported case through the CLI: kill -9 during ``encmatch enroll``, rerun the same command."""
    n = 12 * BATCH
    gallery, names = _gallery(n, seed=9)
    np.savez(tmp_path / "gallery.npz", emb=gallery, name=np.array(names))
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / "keys").symlink_to(keysets(DIM), target_is_directory=True)
    cmd = [sys.executable, "-m", "encmatch", "enroll", "--keys", tmp_path / "ix" / "keys", "--index",
           tmp_path / "ix" / "index", "--delta", DELTA, "--labels-from", "name", "--batch-size", BATCH,
           tmp_path / "gallery.npz"]
    cmd = list(map(str, cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    journal = tmp_path / "ix" / "index" / journal_mod.JOURNAL_FILE
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if len(json.loads(journal.read_text())["batches"]) >= 3:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.fail(f"enroll finished before it could be killed: {proc.communicate()}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = encmatch.manifest.Manifest.of(encmatch.manifest.index_info(tmp_path / "ix" / "index")).total
    assert 0 < kept < n

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert f"index holds {n:,}" in rerun.stdout
    assert f"kept {kept:,} vectors" in rerun.stdout
    _assert_exact(tmp_path / "ix", gallery, names)


def test_batch_digest_sees_labels_and_values():
    g, names = _gallery(4)
    d = journal_mod.batch_digest(g, names)
    assert d == journal_mod.batch_digest(g.astype(np.float64), list(names))
    assert d != journal_mod.batch_digest(g, names[::-1])
    assert d != journal_mod.batch_digest(g, None)
    h = g.copy()
    h[2, 3] = np.nextafter(h[2, 3], np.float32(np.inf))
    assert d != journal_mod.batch_digest(h, names)


def test_rerun_after_a_crash_that_filled_the_last_group(new_index, monkeypatch):
    """The first batch fills the room left in the last group (8 of 2,048 here), so the cuts depend on the index
    when the run starts; the rerun, which finds the group full, recognises that batch by the journal's sizes."""
    ix = new_index(DIM, DELTA)
    size = ix.params["group_size"]
    base, base_names = _gallery(size - 8, seed=10)
    _owner(ix).enroll(ix.index_dir, base, base_names)
    more, more_names = _gallery(40, seed=11)
    monkeypatch.setattr(_core, "call", _failing_call(2, RuntimeError("core died")))
    with pytest.raises(RuntimeError):
        _owner(ix).enroll(ix.index_dir, more, more_names, batch_size=BATCH)
    monkeypatch.undo()
    manifest = encmatch.manifest.index_info(ix.index_dir)
    assert manifest["count"] == size and len(manifest["groups"]) == 1  # the first batch filled the group
    summary = _owner(ix).enroll(ix.index_dir, more, more_names, batch_size=BATCH)
    assert (summary.skipped, summary.added, summary.total) == (8, 32, size + 32)
    assert summary.report == [f"new group 1 (32 entries of {size:,})"]
    gallery = np.vstack([base, more])
    _assert_exact(ix.path, gallery, base_names + more_names)
