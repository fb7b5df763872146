"""The threshold iris key set's roles (``encmatch iris setup``, ``enroll`` by the enroller,
``contribute``, ``complete``, then ``query`` and ``match``), each party a separate process with its own
directories, at the INSECURE ``toy-threshold`` preset (three parties, any two decrypt). The results'
correctness (the match's bits, decrypted by two parties' Shamir shares, equal the plaintext model) is
``core/iris/irisquery``'s Go test ``TestThresholdFilesEndToEnd``: decryption shares are not built yet
(issue 34); this test runs the roles as a deployment would and checks what each leaves where."""

from __future__ import annotations

import json
import shutil

from encmatch.iris import generate, save_templates

from conftest import run_cli


def ok(p, code=0):
    """The finished command ``p``, checked to have exited with ``code`` and printed no traceback."""
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == code, (p.stdout, p.stderr)
    return p


def test_cli_setup_by_party(tmp_path):
    setup, board = tmp_path / "setup.json", tmp_path / "board"
    refused = ok(run_cli("iris", "setup", "init", "--setup", setup, "--preset", "toy-threshold", "--threshold", 4), code=2)
    assert "threshold" in refused.stderr and not setup.exists()
    ok(run_cli("iris", "setup", "init", "--setup", setup, "--preset", "toy-threshold", "--threshold", 2))
    cfg = json.loads(setup.read_text())
    assert (cfg["parties"], cfg["threshold"], cfg["blocks"]) == (3, 2, 1)
    for i in (1, 2, 3):
        out = ok(run_cli("iris", "setup", "round1", "--setup", setup, "--party", i, "--private", tmp_path / f"p{i}",
                         "--bulletin", board)).stdout
        assert f"shamir-{i}-to-3.share" in out
    for i in (1, 2, 3):  # each Shamir share delivered privately to its recipient
        for j in (1, 2, 3):
            (tmp_path / f"in{j}").mkdir(exist_ok=True)
            shutil.move(tmp_path / f"p{i}" / f"shamir-{i}-to-{j}.share", tmp_path / f"in{j}" / f"shamir-{i}-to-{j}.share")
    early = ok(run_cli("iris", "setup", "finalize", "--setup", setup, "--bulletin", board, "--keys", tmp_path / "early"),
               code=2)  # before any second round
    assert "round2-1.msg" in early.stderr
    assert not (tmp_path / "early").exists() and not list(tmp_path.glob("*.partial-*"))  # nothing left behind
    for i in (1, 2, 3):
        ok(run_cli("iris", "setup", "round2", "--setup", setup, "--party", i, "--private", tmp_path / f"p{i}",
                   "--bulletin", board, "--shares", tmp_path / f"in{i}"))
        kept = sorted(f.name for f in (tmp_path / f"p{i}").iterdir())
        assert kept == [f"party-{i}.key"], kept  # the round-one state is gone; no secret but the party's own
        assert (tmp_path / f"p{i}" / f"party-{i}.key").stat().st_mode & 0o077 == 0
    out = ok(run_cli("iris", "setup", "finalize", "--setup", setup, "--bulletin", board, "--keys", tmp_path / "keys")).stdout
    assert cfg["key_id"] in out
    for role, files in (("server", {"relin.key", "encapsulation.key"}), ("querier", {"query-public.key"}),
                        ("enroller", {"db-public.key", "blocks.keys"})):
        meta = json.loads((tmp_path / "keys" / role / "iris.json").read_text())
        assert (meta["role"], meta["key_id"], meta["preset"]) == (role, cfg["key_id"], "toy-threshold")
        assert files <= {f.name for f in (tmp_path / "keys" / role).iterdir()}
    assert not (tmp_path / "keys" / "holder").exists()  # no key holder anywhere
    again = ok(run_cli("iris", "setup", "finalize", "--setup", setup, "--bulletin", board, "--keys", tmp_path / "keys"),
               code=2)
    assert "already holds" in again.stderr

    # Enrollment without a key holder: the enroller's public keys, each party's contribution, completion.
    gallery, queries = generate(40, n_queries=2, n_enrolled=1, seed=3)
    save_templates(tmp_path / "gallery.npz", gallery)
    save_templates(tmp_path / "queries.npz", queries)
    db = tmp_path / "db"
    out = ok(run_cli("iris", "enroll", "--keys", tmp_path / "keys", "--db", db, "--t", 0.34, tmp_path / "gallery.npz"))
    assert "pending" in out.stderr and (db / "pending.json").is_file() and not (db / "db.json").exists()
    q, r = tmp_path / "q.bin", tmp_path / "r.bin"
    ok(run_cli("iris", "query", "--keys", tmp_path / "keys", tmp_path / "queries.npz", "-o", q))
    early = ok(run_cli("iris", "match", "--keys", tmp_path / "keys", "--db", db, q, "-o", r), code=2)
    assert "db.json" in early.stderr  # a pending database does not load
    for i in (1, 2, 3):
        ok(run_cli("iris", "contribute", "--setup", setup, "--party", i, "--private", tmp_path / f"p{i}",
                   "--keys", tmp_path / "keys", "--db", db, "-o", tmp_path / f"c{i}.bin"))
    twice = ok(run_cli("iris", "complete", "--keys", tmp_path / "keys", "--db", db, tmp_path / "c1.bin",
                       tmp_path / "c1.bin", tmp_path / "c2.bin"), code=2)
    assert "each once" in twice.stderr
    out = ok(run_cli("iris", "complete", "--keys", tmp_path / "keys", "--db", db,
                     *(tmp_path / f"c{i}.bin" for i in (1, 2, 3)))).stdout
    assert "complete" in out and (db / "db.json").is_file() and not (db / "pending.json").exists()
    ok(run_cli("iris", "match", "--keys", tmp_path / "keys", "--db", db, q, "-o", r, "--stats", tmp_path / "stats.json"))
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["eyes"] == 2 and stats["codes"] == 40 and stats["discretised"] and r.stat().st_size > 0
