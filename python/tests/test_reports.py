"""Honest reports and well-kept commands (issue 17): ``accuracy``, ``embed`` and ``calibrate``.

- the accuracy report gives every rate with its sample size, no encrypted
  "EER" (the encrypted side sees match bits at one threshold), a verdict
  consistent with the counts shown, and a ROC/DET plot whose encrypted
  operating points are markers (not a curve) and whose zero counts are
  drawn as labelled upper bounds, not at a silent 0.5/n floor;
- skipped photos are listed and counted, and do not turn a complete report
  into exit 2 (bad input); exit 2 is for unusable arguments, checked
  before any work (missing inputs, an output folder that does not exist);
- the defaults (preset, kappa) are consistent and shown in each ``--help``.

Photos are replaced by made-up embeddings (``embed_photos`` monkeypatched)
and the encrypted pipeline by the plaintext decisions (``validate.run``
monkeypatched), so these tests run in seconds without face models or keys.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from encmatch.evaluation import accuracy
from encmatch import cli
from encmatch.evaluation.accuracy import Split
from encmatch._util.defaults import DEFAULT_KAPPA
from encmatch.errors import InvalidArgument
from encmatch.cli import faces as face_commands
from encmatch.faces import save_embeddings
from encmatch.faces.embed import Embedded, Problem
from encmatch.faces.store import check_output_file

from conftest import fake_validate, run_cli


def well_split(seed: int = 0, noise: float = 0.35) -> Split:
    """10 enrolled identities, 40 mated probes (their faces plus ``noise``), 60 non-mated probes."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((10, 16))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    mated = g[np.arange(40) % 10] + noise * rng.standard_normal((40, 16))
    probes = np.vstack([mated, rng.standard_normal((60, 16))])
    probes /= np.linalg.norm(probes, axis=1, keepdims=True)
    return Split(gallery=g, gallery_ids=[f"p{i}" for i in range(10)], probes=probes,
                 probe_ids=[f"p{i % 10}" for i in range(40)] + [f"q{i}" for i in range(60)],
                 mated=np.array([True] * 40 + [False] * 60))


def every_percentage_has_its_count(text: str) -> None:
    """Every ``(p %)`` printed follows its ``k/n``: no rate without its sample size."""
    for m in re.finditer(r"\((< )?[\d.]+ %\)", text):
        before = text[max(0, m.start() - 20):m.start()]
        assert re.search(r"\d[\d,]*/[\d,]+ $", before), f"a rate without its count: ...{before}{m.group()}"


# ---- accuracy: numbers that are what they claim ----------------------------------------------------------


def test_accuracy_reports_counts_and_no_encrypted_eer(monkeypatch):
    monkeypatch.setattr(accuracy.validate_mod, "run", fake_validate())
    rep = accuracy.run(well_split(), target_fpir=0.05)
    text = rep.table() + "\n" + rep.summary()
    every_percentage_has_its_count(text)
    ep = rep.roc.eer_point()
    eer_line = next(ln for ln in text.splitlines() if ln.startswith("EER (plaintext ROC)"))
    assert f"FAR {ep['false_accepts']}/{ep['n_impostor']}" in eer_line
    assert f"FRR {ep['false_rejects']}/{ep['n_genuine']}" in eer_line
    # the encrypted side: an operating point at the EER threshold, said to be one, with its counts
    enc_line = text.splitlines()[text.splitlines().index(eer_line) + 1]
    assert "not an EER" in enc_line and "FAR " in enc_line and "/960" in enc_line
    assert "every one of the 1,000 pair decisions equals the plaintext one" in enc_line
    d = json.loads(json.dumps(rep.to_dict()))
    assert "eer" not in d["encrypted"]
    at = d["encrypted"]["at_eer_threshold"]
    assert at["impostor_pairs"] == 960 and at["genuine_pairs"] == 40 and at["pairs_differ"] == 0
    assert d["plaintext"]["eer_point"]["n_genuine"] == 40
    for pt in d["points"]:
        assert pt["encrypted"]["impostor_pairs"] == 960 and pt["plaintext"]["genuine_pairs"] == 40
    assert "verdict: encrypted decisions EQUAL" in text and "no pair decision differs" in text


def test_accuracy_verdict_counts_each_encrypted_run_once(monkeypatch):
    sp = well_split()
    monkeypatch.setattr(accuracy.validate_mod, "run", fake_validate(flip=(45, 3)))
    rep = accuracy.run(sp, target_fpir=0.05)
    distinct = len({p.delta for p in rep.points})
    assert len(rep.points) == distinct + 1  # the delta point shares the FPIR point's run
    assert rep.errors == distinct  # one flipped pair per encrypted run, not per named point
    summary = rep.summary()
    assert f"{distinct} encrypted pair decision(s) DIFFER" in summary and f"at {distinct} of {distinct} thresholds" in summary
    assert "1 of 1,000 pair decisions differ from the plaintext ones, 1 of them OUTSIDE the decision band" in summary


def test_accuracy_plot_draws_operating_points_as_markers_and_zero_counts_as_bounds(monkeypatch, tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    monkeypatch.setattr(accuracy.validate_mod, "run", fake_validate())
    rep = accuracy.run(well_split(noise=0.05), target_fpir=None)  # mated probes all far above every impostor
    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: drawn.append(self))  # keep what plot() draws
    monkeypatch.setattr(plt, "close", lambda *a: None)
    accuracy.plot(rep, tmp_path / "roc.png")
    fig = drawn[0]
    roc, det = fig.axes
    enc = [ln for ln in roc.get_lines() if ln.get_label().startswith("encrypted")]
    assert len(enc) == len({p.delta for p in rep.points})
    for ln in enc:
        assert ln.get_linestyle() == "None" and len(ln.get_xdata()) == 1  # a marker, never joined to another
    by_delta = {f"{p.delta:.3f}": p for p in rep.points}
    for ln in enc:
        p = by_delta[re.search(r"at delta ([\d.]+)", ln.get_label()).group(1)]
        c = p.counts(1)
        # TAR as measured (100 % is drawn at 1.0, not at 1 - 0.5/n)
        assert ln.get_ydata()[0] == pytest.approx(1 - c["false_rejects"] / c["genuine_pairs"])
        if c["false_accepts"] == 0:  # FAR 0 of n: at its upper bound 3/n, labelled so, marker pointing left
            assert ln.get_xdata()[0] == pytest.approx(3 / c["impostor_pairs"])
            assert ln.get_marker() == "<" and "upper bound" in ln.get_label()
        else:
            assert ln.get_xdata()[0] == pytest.approx(c["false_accepts"] / c["impostor_pairs"])
    assert any(ln.get_ydata()[0] == 1.0 for ln in enc)  # this split has a point with every mate found
    floor_far, floor_frr = 0.5 / rep.roc.n_impostor, 0.5 / rep.roc.n_genuine  # the old silent floors
    for ax, y_floor in ((roc, 1 - floor_frr), (det, floor_frr)):
        for ln in ax.get_lines():
            assert not np.isclose(np.asarray(ln.get_xdata(), float), floor_far, rtol=1e-9).any(), ln.get_label()
            assert not np.isclose(np.asarray(ln.get_ydata(), float), y_floor, rtol=1e-9).any(), ln.get_label()
    det_bounds = [ln for ln in det.get_lines() if "upper bound" in ln.get_label()]
    assert det_bounds and all(ln.get_marker() != "o" for ln in det_bounds)
    monkeypatch.undo()
    plt.close(fig)


# ---- exit codes: skipped photos are not bad arguments ------------------------------------------------------


def fake_embedded(emb: np.ndarray, ids: list[str], skipped: int = 2) -> Embedded:
    """What embed_photos returns for ``len(emb)`` photos with faces and ``skipped`` without."""
    n = len(emb)
    return Embedded(model="mobilefacenet", emb=np.asarray(emb, np.float32), ids=list(ids),
                    files=[f"{i}/{k}.jpg" for k, i in enumerate(ids)], det=["hog"] * n, faces=[1] * n,
                    box=[(0, 0, 10, 10)] * n, norm=np.ones(n, np.float32),
                    problems=[Problem(f"people/x/blank{k}.jpg", "no face found") for k in range(skipped)],
                    photos=n + skipped)


def unit_rows(n: int, dim: int = 192, seed: int = 0) -> np.ndarray:
    """``n`` random unit vectors."""
    v = np.random.default_rng(seed).standard_normal((n, dim))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_accuracy_with_skipped_photos_exits_0_and_counts_them(monkeypatch, tmp_path, capsys):
    sp = well_split()
    ids = sp.gallery_ids + sp.probe_ids
    emb = np.vstack([sp.gallery, sp.probes])
    emb = np.hstack([emb, np.zeros((len(emb), 192 - emb.shape[1]))])
    monkeypatch.setattr(face_commands, "embed_photos", lambda *a, **k: fake_embedded(emb, ids))
    monkeypatch.setattr(accuracy.validate_mod, "run", fake_validate())
    (tmp_path / "people").mkdir()
    args = ["accuracy", str(tmp_path / "people"), "--preset", "toy", "--probes", "100"]
    assert cli.main(args + ["--json"]) == 0
    out, err = capsys.readouterr()
    res = json.loads(out)
    assert res["ok"] and res["inputs"]["photos"] == len(emb) + 2 and res["inputs"]["embedded"] == len(emb)
    assert [s["reason"] for s in res["inputs"]["skipped"]] == ["no face found"] * 2
    assert "skipped: people/x/blank0.jpg: no face found" in err and "error:" not in err
    assert cli.main(args) == 0
    out, err = capsys.readouterr()
    assert f"inputs: {len(emb)} of {len(emb) + 2} photo(s) embedded; 2 skipped (no face found: 2)" in out
    # nothing usable: exit 2
    monkeypatch.setattr(face_commands, "embed_photos", lambda *a, **k: fake_embedded(emb[:0], [], 3))
    assert cli.main(args) == 2
    assert "error: no face was embedded" in capsys.readouterr().err


def test_calibrate_with_skipped_photos_exits_0(monkeypatch, tmp_path, capsys):
    emb = np.eye(192)[[0, 0, 1, 1, 2, 2]] + 0.01 * np.arange(6)[:, None]  # pairs of near-identical vectors
    monkeypatch.setattr(face_commands, "embed_photos", lambda *a, **k: fake_embedded(emb, list("aabbcc"), 1))
    (tmp_path / "people").mkdir()
    assert cli.main(["calibrate", str(tmp_path / "people"), "--target-fmr", "0.25", "--gallery-size", "10"]) == 0
    out, err = capsys.readouterr()
    assert "verdict: OK" in out and "inputs: 6 of 7 photo(s) embedded; 1 skipped (no face found: 1)" in out
    assert "note: 1 input(s) skipped" in err and "error:" not in err


def test_embed_with_skipped_photos_exits_0(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(face_commands, "embed_photos", lambda *a, **k: fake_embedded(unit_rows(3), list("abc"), 2))
    (tmp_path / "people").mkdir()
    assert cli.main(["embed", str(tmp_path / "people"), "-o", str(tmp_path / "g.npz")]) == 0
    out, err = capsys.readouterr()
    assert (tmp_path / "g.npz").is_file() and "wrote 3 embeddings" in out and "2 input(s) skipped" in out
    assert "skipped 2 input(s) (no face found: 2)" in err and "error:" not in err


# ---- arguments checked before any work ---------------------------------------------------------------------


def no_work(*_a, **_k):
    """An embed_photos that must not be reached."""
    raise AssertionError("photos were embedded before the arguments were checked")


@pytest.mark.parametrize("command", [
    ["embed", "{people}", "-o", "{tmp}/nodir/x.npz"],
    ["embed", "{people}", "-o", "{people}"],
    ["accuracy", "{people}", "--plot", "{tmp}/nodir/roc.png"],
    ["calibrate", "{people}", "--plot", "{tmp}/nodir/hist.png"],
    ["embed", "{tmp}/nonexistent/", "-o", "{tmp}/x.npz"],
    ["accuracy", "{people}", "{tmp}/gone.jpg"],
])
def test_bad_paths_fail_before_any_work(monkeypatch, tmp_path, capsys, command):
    monkeypatch.setattr(face_commands, "embed_photos", no_work)
    (tmp_path / "people").mkdir()
    args = [a.format(people=tmp_path / "people", tmp=tmp_path) for a in command]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Errno" not in err and "Traceback" not in err
    assert "does not exist" in err or "is a folder" in err or "no such file or folder: " in err


def test_missing_input_is_named_once(tmp_path):
    p = run_cli("embed", tmp_path / "nonexistent/", "-o", tmp_path / "x.npz")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == f"error: no such file or folder: {tmp_path / 'nonexistent'}"


def test_skipped_summary_reads_as_counts():
    out = fake_embedded(unit_rows(1), ["a"], 2)
    out.problems.append(Problem("gone.jpg", "no such file or folder"))
    line = out.summary().splitlines()[-1]
    assert line == "skipped 3 input(s) (no face found: 2, no such file or folder: 1)"


def test_output_file_checks(tmp_path):
    assert check_output_file(tmp_path / "a.npz") == tmp_path / "a.npz"
    with pytest.raises(InvalidArgument, match="does not exist"):
        check_output_file(tmp_path / "no" / "a.npz")
    with pytest.raises(InvalidArgument, match="is a folder"):
        check_output_file(tmp_path)
    with pytest.raises(InvalidArgument, match="does not exist"):  # not a raw FileNotFoundError
        save_embeddings(tmp_path / "no" / "a.npz", unit_rows(2), ["a", "b"], "mobilefacenet")


# ---- consistent defaults, shown in --help ----------------------------------------------------------------


def test_defaults_are_consistent_and_shown():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    acc = sub["accuracy"]
    assert acc.get_default("preset") == "default" and acc.get_default("kappa") == DEFAULT_KAPPA
    assert sub["calibrate"].get_default("kappa") == DEFAULT_KAPPA
    assert accuracy.run.__kwdefaults__["preset"] == "default"
    assert accuracy.run.__kwdefaults__["kappa"] == DEFAULT_KAPPA
    helps = {name: " ".join(sub[name].format_help().split()) for name in ("accuracy", "calibrate", "embed")}
    assert "{default,real,toy,toy-real}" in helps["accuracy"] and "(default: default," in helps["accuracy"]
    assert f"(default: {DEFAULT_KAPPA}," in helps["accuracy"] and f"(default: {DEFAULT_KAPPA}," in helps["calibrate"]
    for name, text in helps.items():
        assert "do not change the exit code" in text and "Exit 2 when an argument cannot be used" in text, name
        for action in sub[name]._actions:
            if action.option_strings and action.help and action.dest not in ("help",):
                assert "default" in action.help or action.required, (name, action.dest)
