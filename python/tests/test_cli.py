"""The command line through subprocess: output, exit codes, no tracebacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from encmatch import cli, comparator
from encmatch.cli import evaluation as cli_evaluation
from encmatch.evaluation import validate as validate_mod
from encmatch.evaluation.bruteforce import cosine_scores
from encmatch.results import make_result
from encmatch.evaluation.validate import compare

from conftest import KAPPA, TOY, run_cli

DIM = 16
DELTA = 0.5


def ok(proc, code=0):
    """Assert the exit code and that no traceback was printed; return the process."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A workspace with toy keys and an index enrolled through the CLI, plus the plaintext data."""
    root = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(21)
    gallery = rng.standard_normal((60, DIM)).astype(np.float32)
    names = np.array([f"person-{i:02d}" for i in range(60)])
    np.savez(root / "gallery.npz", emb=gallery, name=names)
    np.save(root / "query.npy", gallery[7] + 0.05 * rng.standard_normal(DIM).astype(np.float32))
    np.save(root / "queries.npy", gallery[:3])
    np.save(root / "wrongdim.npy", np.ones(DIM + 1, dtype=np.float32))
    whole = (root / "gallery.npz").read_bytes()
    (root / "truncated.npz").write_bytes(whole[: len(whole) // 2])
    (root / "random.npz").write_bytes(rng.bytes(4096))
    (root / "random.npy").write_bytes(rng.bytes(4096))
    np.save(root / "pickled.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)

    p = ok(run_cli("keygen", "--keys", root / "keys", "--preset", TOY, "--kappa", KAPPA, "--dim", DIM,
                   "--strategy", "bsgs-tbe"))
    assert "INSECURE" in p.stderr and "key id" in p.stdout and "strategy: bsgs-tbe, n1 4" in p.stdout
    p = ok(run_cli("enroll", "--keys", root / "keys", "--index", root / "index", "--delta", DELTA,
                   "--labels-from", "name", root / "gallery.npz"))
    assert "enrolled 60" in p.stdout
    return {"root": root, "gallery": gallery, "names": names}


def test_keygen_refuses_existing_keys(ws):
    p = ok(run_cli("keygen", "--keys", ws["root"] / "keys", "--preset", TOY, "--dim", DIM), 2)
    assert p.stderr.strip().splitlines()[-1].startswith("error: ")


def test_info(ws):
    p = ok(run_cli("info", "--index", ws["root"] / "index", "--keys", ws["root"] / "keys"))
    assert p.stdout.count("size on disk: ") == 2 and "face model: not recorded" in p.stdout
    assert "entries: 60" in p.stdout and "labels: sealed, 1 file(s)" in p.stdout and "INSECURE" in p.stderr
    assert p.stdout.count("strategy: bsgs-tbe, n1 4") == 2  # keys and index
    p = ok(run_cli("info"))
    assert "presets" in p.stdout and "toy" in p.stdout and "preset real, N = 2^15, 32,768 real slots" in p.stdout
    m = json.loads(ok(run_cli("info", "--index", ws["root"] / "index", "--json")).stdout)
    assert m["count"] == 60 and "labels" not in m  # names are sealed beside the index, not in its manifest


@pytest.mark.parametrize("mode", ["identification", "membership"])
def test_query_then_decrypt(ws, tmp_path, mode):
    root = ws["root"]
    out = tmp_path / "result.bin"
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--mode", mode,
                   "--out", out, root / "query.npy"))
    assert out.is_file() and out.stat().st_size > 0
    assert "loaded index" in p.stdout and "1 probe(s): encrypted in" in p.stdout and str(out) in p.stdout
    assert "person-" not in p.stdout  # the server side prints sizes and timings only

    answer = json.loads(ok(run_cli("decrypt", "--keys", root / "keys", "--index", root / "index", "--json", out)).stdout)
    scores = cosine_scores(ws["gallery"], np.load(root / "query.npy"))
    bands = comparator(KAPPA, DELTA, scores)
    if mode == "identification":
        res = make_result(mode, positions=answer["positions"])
        report = compare(scores, DELTA, bands, identification=[res])
        assert 7 in answer["positions"]
        assert answer["labels"][answer["positions"].index(7)] == "person-07"
    else:
        res = make_result(mode, count=answer["count"])
        report = compare(scores, DELTA, bands, membership=[res])
        assert answer["enrolled"] is True
    assert report.ok, report.table()

    text = ok(run_cli("decrypt", "--keys", root / "keys", "--index", root / "index", out)).stdout
    assert ("person-07" in text) if mode == "identification" else ("ENROLLED" in text)


def test_query_streamed_under_a_memory_budget(ws, tmp_path):
    root = ws["root"]
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--memory-budget", "1e-9",
                   "--out", tmp_path / "r.bin", root / "query.npy"))
    assert "streamed from disk" in p.stdout
    # A budget that cannot hold even the keys: said once, as the command line's own warnings are.
    assert p.stderr.count("warning: the memory budget of 0.00 GB is below what streaming this index needs") == 1
    answer = json.loads(ok(run_cli("decrypt", "--keys", root / "keys", "--json", tmp_path / "r.bin")).stdout)
    assert 7 in answer["positions"]
    # Several probes: handed to the streamed server as one batch, each answered as alone.
    q = np.load(root / "query.npy").reshape(-1)
    other = np.random.default_rng(3).standard_normal(q.shape[0]).astype(np.float32)
    np.save(tmp_path / "probes.npy", np.vstack([q, other, q]).astype(np.float32))
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--memory-budget", "1e-9",
                   "--decrypt", "--json", tmp_path / "probes.npy"))
    answers = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == 3 and answers[0]["positions"] == answers[2]["positions"]
    assert 7 in answers[0]["positions"] and 7 not in answers[1]["positions"]


def _rotation_keys(stdout: str) -> int:
    """The ``rotation keys: N`` line of ``encmatch keygen``."""
    return int(next(line for line in stdout.splitlines() if line.startswith("rotation keys:")).split(":")[1])


def test_keygen_strategy_bsgs_tbe_needs_fewer_keys_than_dg(tmp_path):
    keys = {}
    for strategy in ("dg", "bsgs-tbe"):
        # New key sets fold: 64 dimensions make 32 complex diagonals (dg's n1 is the block).
        p = ok(run_cli("keygen", "--keys", tmp_path / strategy, "--preset", TOY, "--dim", 64, "--strategy", strategy))
        assert f"strategy: {strategy}, n1 {32 if strategy == 'dg' else 8}" in p.stdout and "server keys" in p.stdout
        keys[strategy] = _rotation_keys(p.stdout)
    assert keys["bsgs-tbe"] < keys["dg"]
    assert keys["dg"] >= 31


def test_strategies_subcommand(tmp_path):
    p = ok(run_cli("strategies", "--dim", 192))
    lines = p.stdout.splitlines()
    header = next(line for line in lines if line.startswith("rank"))
    for column in ("strategy", "n1", "keys", "key GB", "query s", "load s", "memory GB", "streamed"):
        assert column in header
    for strategy in ("dg", "bsgs-diagonal", "bsgs-tbs", "bsgs-tbe"):
        assert any(f" {strategy} " in line for line in lines)
    assert "chosen" in p.stdout
    res = json.loads(ok(run_cli("strategies", "--dim", 192, "--memory-budget", 4, "--json")).stdout)
    best = res["candidates"][0]
    assert (res["strategy"], res["n1"]) == (best["strategy"], best["n1"])
    assert best["memory_bytes"] <= 4e9


def test_query_row_selection(ws, tmp_path):
    root = ws["root"]
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--out", tmp_path / "r.bin",
                   "--row", "1", root / "queries.npy", root / "query.npy"), 2)
    assert "--row" in p.stderr
    ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--out", tmp_path / "r.bin",
               "--row", "2", root / "queries.npy"))
    text = ok(run_cli("decrypt", "--keys", root / "keys", tmp_path / "r.bin")).stdout
    assert "match" in text and "\n  2" in text


@pytest.mark.parametrize(
    "args_fn, needle",
    [
        (lambda r, t: ["query", "--keys", r / "keys", "--index", r / "index", "--out", t / "x", r / "wrongdim.npy"], "dimension"),
        (lambda r, t: ["query", "--keys", t / "missing", "--index", r / "index", "--out", t / "x", r / "query.npy"], "does not exist"),
        (lambda r, t: ["query", "--keys", r / "keys", "--index", r / "index", "--out", t / "x", t / "nope.npy"], "no such file"),
        (lambda r, t: ["decrypt", "--keys", r / "keys", t / "nope.bin"], "no such file"),
        (lambda r, t: ["decrypt", "--keys", r / "keys", r / "gallery.npz"], ""),
        (lambda r, t: ["enroll", "--keys", r / "keys", "--index", t / "new-index", r / "gallery.npz"], "--delta"),
        (lambda r, t: ["enroll", "--keys", r / "keys", "--index", r / "index", "--field", "nope", r / "gallery.npz"], "nope"),
        (lambda r, t: ["enroll", "--keys", r / "keys", "--index", r / "index", r / "wrongdim.npy"], "dimension"),
        (lambda r, t: ["keygen", "--keys", t / "k", "--preset", "nope", "--dim", "8"], "preset"),
        (lambda r, t: ["keygen", "--keys", t / "k", "--dim", "8", "--strategy", "fft"], "invalid choice"),
        (lambda r, t: ["keygen", "--keys", t / "k", "--dim", "8", "--strategy", "bsgs-tbe", "--n1", "99"], "n1"),
        (lambda r, t: ["strategies", "--dim", "64", "--memory-budget", "-1"], "memory budget"),
        (lambda r, t: ["strategies", "--dim", "64", "--memory-budget", "1e-9"], "budget"),
        (lambda r, t: ["query", "--keys", r / "keys", "--index", r / "index", "--mode", "nope", "--out", t / "x", r / "query.npy"], "invalid choice"),
        (lambda r, t: ["enroll", "--keys", r / "keys", "--index", r / "index", r / "truncated.npz"], "truncated or corrupt"),
        (lambda r, t: ["enroll", "--keys", r / "keys", "--index", r / "index", r / "random.npz"], "not a .npz file"),
        (lambda r, t: ["query", "--keys", r / "keys", "--index", r / "index", "--out", t / "x", r / "random.npy"], "not a .npy file"),
        (lambda r, t: ["query", "--keys", r / "keys", "--index", r / "index", "--out", t / "x", r / "pickled.npy"], "pickled"),
        (lambda r, t: ["validate", "--preset", "toy", "--gallery", r / "truncated.npz"], "truncated or corrupt"),
        (lambda r, t: [], ""),
        (lambda r, t: ["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_exits_2_without_traceback(ws, tmp_path, args_fn, needle):
    p = ok(run_cli(*args_fn(ws["root"], tmp_path)), 2)
    assert "error:" in p.stderr and needle in p.stderr


def test_corrupt_result_and_foreign_keys(ws, tmp_path):
    root = ws["root"]
    ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--out", tmp_path / "r.bin", root / "query.npy"))
    blob = bytearray((tmp_path / "r.bin").read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (tmp_path / "bad.bin").write_bytes(bytes(blob))
    p = ok(run_cli("decrypt", "--keys", root / "keys", tmp_path / "bad.bin"), 2)
    assert "error:" in p.stderr
    (tmp_path / "short.bin").write_bytes(bytes(blob[:100]))
    ok(run_cli("decrypt", "--keys", root / "keys", tmp_path / "short.bin"), 2)
    # Another key set of the same parameters cannot decrypt it.
    ok(run_cli("keygen", "--keys", tmp_path / "other", "--preset", TOY, "--kappa", KAPPA, "--dim", DIM))
    p = ok(run_cli("decrypt", "--keys", tmp_path / "other", tmp_path / "r.bin"), 2)
    assert "error:" in p.stderr


def test_missing_library_is_a_clear_error(tmp_path):
    p = run_cli("info", env={"ENCMATCH_LIB": str(tmp_path / "nope.so")})
    assert p.returncode == 1 and "make core" in p.stderr and "Traceback" not in p.stderr


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "encmatch"
    if not script.exists() and shutil.which("encmatch") is None:
        pytest.skip("encmatch console script not installed (pip install -e python)")
    p = subprocess.run([str(script) if script.exists() else "encmatch", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "keygen" in p.stdout


@pytest.mark.data
def test_validate_passes_on_orl(data_dir, tmp_path):
    p = ok(run_cli("validate", "--preset", TOY, "--kappa", KAPPA, "--delta", "0.486",
                   "--gallery", data_dir / "orl" / "embeddings_mfn.npz", "--size", "256", "--queries", "4",
                   "--strategy", "bsgs-tbe", "--n1", "32", "--memory-budget", "1e-9",
                   "--work", tmp_path / "work", "--json"))
    report = json.loads(p.stdout)
    assert report["ok"] is True and report["insecure"] is True and len(report["queries"]) == 4
    assert (report["strategy"], report["n1"], report["streamed"]) == ("bsgs-tbe", 32, True)
    assert "INSECURE" in p.stderr


def test_validate_exit_code_follows_the_report(monkeypatch, tmp_path, capsys):
    """validate exits 1 when an answer is wrong outside the guard band, 0 otherwise (core run mocked)."""
    np.savez(tmp_path / "g.npz", emb=np.eye(8, dtype=np.float32), label=np.arange(8), names=np.array(list("abcdefgh")))
    scores = np.array([[0.9, 0.1]])
    bands = {"decision_band": 0.01, "value_band": 0.05}

    def fake_run(*args, bad=False, **kwargs):
        pos = [1] if bad else [0]
        return compare(scores, 0.5, bands, identification=[make_result("identification", positions=pos)])

    monkeypatch.setattr(cli_evaluation, "describe", lambda *a: {"group_size": 8, "preset": "toy", "insecure": True})
    monkeypatch.setattr(validate_mod, "run", lambda *a, **k: fake_run(bad=False))
    assert cli.main(["validate", "--gallery", str(tmp_path / "g.npz"), "--queries", "2", "--quiet"]) == 0
    monkeypatch.setattr(validate_mod, "run", lambda *a, **k: fake_run(bad=True))
    assert cli.main(["validate", "--gallery", str(tmp_path / "g.npz"), "--queries", "2", "--quiet"]) == 1
    assert "DISAGREE" in capsys.readouterr().out


@pytest.mark.data
def test_demo_toy_small(tmp_path, data_dir):
    """The demo at the toy preset on a reduced gallery: exit 0, every step timed, INSECURE shown."""
    work = tmp_path / "demo-work"
    args = ["demo", "--preset", TOY, "--size", "512", "--enrolled", "200", "--known", "2", "--unknown", "2",
            "--work", work]
    p = ok(run_cli(*args, cwd=tmp_path))
    out = p.stdout
    for step in ("keygen", "enroll", "encrypt queries", "membership search", "identification search", "decrypt"):
        assert step in out
    assert "INSECURE" in out and "verdict: AGREE" in out and "strategy " in out
    # Second run reuses the keys.
    p = ok(run_cli(*args, cwd=tmp_path))
    assert "reused existing keys" in p.stdout


def test_many_probes_against_one_loaded_index(ws, tmp_path):
    """Files with several rows and single vectors in one call: one load, one result per probe, exact answers."""
    root = ws["root"]
    out = tmp_path / "results"
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--out", out,
                   root / "queries.npy", root / "query.npy"))
    assert p.stdout.count("loaded index") == 1 and "4 probe(s)" in p.stdout and "median" in p.stdout
    listing = json.loads((out / "results.json").read_text())
    assert [e["name"] for e in listing["probes"]] == ["queries.npy[0]", "queries.npy[1]", "queries.npy[2]", "query.npy"]
    assert sorted(f.name for f in out.glob("*.bin")) == ["0000.bin", "0001.bin", "0002.bin", "0003.bin"]

    lines = ok(run_cli("decrypt", "--keys", root / "keys", "--json", out)).stdout.splitlines()
    answers = [json.loads(line) for line in lines]
    probes = np.vstack([np.load(root / "queries.npy"), np.load(root / "query.npy")[None, :]])
    for answer, probe in zip(answers, probes):
        scores = cosine_scores(ws["gallery"], probe)
        res = make_result("identification", positions=answer["positions"])
        assert compare(scores, DELTA, comparator(KAPPA, DELTA, scores), identification=[res]).ok
    assert [a["probe"] for a in answers] == [e["name"] for e in listing["probes"]]
    assert all(i in a["positions"] for i, a in enumerate(answers[:3]))

    # a second run into the same folder would mix two runs' results: refused
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--out", out, root / "queries.npy"), 2)
    assert "already holds results" in p.stderr


def test_decrypt_here_without_an_output(ws):
    root = ws["root"]
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--decrypt", "--json",
                   root / "queries.npy"))
    answers = [json.loads(line) for line in p.stdout.splitlines()]
    assert [a["probe"] for a in answers] == ["queries.npy[0]", "queries.npy[1]", "queries.npy[2]"]
    assert all(i in a["positions"] for i, a in enumerate(answers))
    assert "3 probe(s)" in p.stderr  # timings off stdout, which stays JSON lines
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", root / "query.npy"), 2)
    assert "--out is required" in p.stderr


def test_output_path_checked_before_any_work(ws, tmp_path):
    root = ws["root"]
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--out", tmp_path / "nodir" / "r.bin",
                   root / "query.npy"), 2)
    assert "does not exist" in p.stderr and "loaded index" not in p.stdout
    (tmp_path / "afile").write_text("x")
    p = ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--out", tmp_path / "afile",
                   root / "queries.npy"), 2)
    assert "need a folder" in p.stderr and "loaded index" not in p.stdout


def test_query_on_an_empty_index_says_so(ws, tmp_path):
    (tmp_path / "empty").mkdir()
    p = ok(run_cli("query", "--keys", ws["root"] / "keys", "--index", tmp_path / "empty", "--out", tmp_path / "r.bin",
                   ws["root"] / "query.npy"), 2)
    assert "holds no index" in p.stderr and "manifest.json" not in p.stderr


def test_version_and_exit_codes_in_help():
    p = ok(run_cli("--version"))
    from encmatch import __version__

    assert p.stdout.strip() == f"encmatch {__version__}"
    for command in ([], ["query"], ["enroll"], ["decrypt"]):
        text = ok(run_cli(*command, "--help")).stdout
        assert "exit codes: 0 success" in " ".join(text.split()) and "3 service unavailable" in " ".join(text.split())


def test_an_unusable_embedding_file_among_good_ones_is_bad_input(ws, tmp_path):
    """The good inputs are enrolled; the file that could not be used makes the exit code 2 (photos would not)."""
    root = ws["root"]
    p = ok(run_cli("enroll", "--keys", root / "keys", "--index", tmp_path / "ix", "--delta", DELTA,
                   root / "query.npy", root / "wrongdim.npy"), 2)
    assert "enrolled 1 vectors" in p.stdout
    assert "wrongdim.npy" in p.stderr and "error: 1 embedding file(s) could not be used" in p.stderr
    p = ok(run_cli("enroll", "--keys", root / "keys", "--index", tmp_path / "ix", root / "nothere.npy",
                   root / "query.npy"), 2)
    assert "no such file or folder: " in p.stderr and "enrolled" not in p.stdout  # checked before any work


def test_a_closed_output_pipe_is_quiet(ws, tmp_path):
    """``encmatch decrypt results/ | head -1``: no error line, no traceback when the reader stops."""
    root = ws["root"]
    ok(run_cli("query", "--keys", root / "keys", "--index", root / "index", "--out", tmp_path / "res",
               root / "queries.npy"))
    cmd = [sys.executable, "-m", "encmatch", "decrypt", "--keys", str(root / "keys"), "--index", str(root / "index"),
           str(tmp_path / "res")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader goes away before the answers are written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141)  # 141: as a tool killed by SIGPIPE
    assert "Traceback" not in err and "Broken pipe" not in err, err
