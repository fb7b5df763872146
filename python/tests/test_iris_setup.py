"""The threshold iris key set's setup (``encmatch iris setup``), each party a separate process with its
own directories, at the INSECURE ``toy-threshold`` preset (three parties, any two decrypt). The keys'
cryptographic checks (a publicly enrolled product half-bootstrapped under them, decrypted by two
parties' Shamir shares) are ``core/iris/irissetup``'s Go test; this one runs the roles as a deployment
would and checks what each leaves where."""

from __future__ import annotations

import json
import shutil

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
