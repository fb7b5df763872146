"""The benchmark harness (encmatch.evaluation.bench, ``encmatch bench``) at the toy preset."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from encmatch.evaluation import bench, bench_report
from encmatch import comparator
from encmatch.evaluation.bruteforce import cosine_scores

from conftest import TOY, run_cli

DIM = 32
KAPPA = 8


def test_synthetic_generator_separates_planted_from_others():
    margin = comparator(KAPPA, bench.SYNTHETIC_DELTA)["value_band"]
    wl = bench.synthetic_workload(3000, 5, DIM, margin=margin, seed=3)
    s = cosine_scores(wl.gallery, wl.query)[0]
    assert len(wl.planted) == 5 and np.all(s[wl.planted] >= wl.delta + margin)
    others = np.delete(s, wl.planted)
    assert np.all(others < wl.delta - margin)
    assert wl.info["min_planted_score"] == pytest.approx(s[wl.planted].min())
    # integer components in [-99, 99]; matches are the query plus noise in [-2, 2]
    assert np.all(np.abs(wl.gallery) <= 99) and np.all(wl.gallery == np.round(wl.gallery))
    assert np.all(np.abs(wl.gallery[wl.planted] - wl.query) <= 2)
    assert len(bench.synthetic_workload(100, 0, DIM, seed=1).planted) == 0


def test_faces_workload(lfw):
    margin = comparator(KAPPA, bench.FACES_DELTA)["value_band"]
    wl = bench.faces_workload(500, 2, margin=margin, faces=lfw, seed=1)
    s = cosine_scores(wl.gallery, wl.query)[0]
    assert wl.dim == bench.FACES_DIM and len(wl.planted) == 2
    assert np.all(s[wl.planted] >= wl.delta + margin) and np.all(np.delete(s, wl.planted) < wl.delta - margin)


def test_check_trial():
    from encmatch.results import make_result

    m1, m0 = make_result("membership", count=1), make_result("membership", count=0)
    ident = make_result("identification", positions=[3, 7])
    assert bench.check_trial(m1, ident, np.array([3, 7])) == []
    assert bench.check_trial(m0, ident, np.array([3, 7]))  # membership wrong
    assert bench.check_trial(m1, make_result("identification", positions=[3]), np.array([3, 7]))
    assert bench.check_trial(m1, make_result("identification", positions=[]), np.array([], np.int64))


def test_reference_loads():
    ref = bench_report.load_reference()
    cpu = [r for r in ref["rows"] if r["device"] == "CPU" and r["kappa"] == 8]
    for approach in ("HyDia-CPU-DG", "BSGS-CPU-DG"):
        assert sorted(r["K"] for r in cpu if r["approach"] == approach) == [2 ** k for k in range(10, 21)]
    top = next(r for r in cpu if r["K"] == 2 ** 20 and r["approach"] == "BSGS-CPU-DG")
    assert top["membership_s"] == 88.99 and top["Km"] == 512 and top["threads"] == 40
    assert "40 threads" in ref["hardware"]["CPU"]


def test_failed_trial_is_excluded(tmp_path):
    wl = bench.make_workload("synthetic", 200, 1, DIM, kappa=KAPPA)
    calls = []

    def flaky(client, server, workload):
        """The real query trial, with trial 2 made wrong (and slow)."""
        res = bench._query(client, server, workload)
        calls.append(res)
        if len(calls) == 2:  # trial 2: a wrong identification answer, and an outlier time
            from encmatch.results import make_result

            wrong = make_result("identification", positions=[])
            res["failures"] = bench.check_trial(make_result("membership", count=1), wrong, workload.planted)
            res["ok"] = not res["failures"]
            res["membership_s"] = 1e6
        return res

    rec = bench.bench_config(wl, "bsgs-tbe", tmp_path / "w", preset=TOY, kappa=KAPPA, trials=4, query_fn=flaky)
    assert [t["ok"] for t in rec["trials"]] == [False, True, True]
    assert rec["passed"] == 2 and rec["failed"] == 1
    assert rec["membership_s"] < 1e3  # the failing trial's time is not averaged
    assert rec["setup"]["trial"]["ok"] and rec["index_disk_bytes"] > 0 and rec["key_disk_bytes"] > 0


def test_cli_end_to_end(tmp_path):
    out = tmp_path / "out"
    p = run_cli("bench", "--preset", TOY, "--dim", DIM, "--kappa", "8", "--sizes", "256,2048", "--strategies", "bsgs-tbe,dg",
                "--encryption", "public-key,secret-key", "--trials", "3", "--matches", "2", "--out", out,
                "--work", tmp_path / "new" / "work")  # a work directory that does not exist yet is made
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "new" / "work").is_dir()
    assert "Traceback" not in p.stderr and "INSECURE" in p.stderr
    for name in ("results.json", "results.csv", "time.png", "ram.png", "disk.png", "results.md"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["configs"]) == 8 and all(c["passed"] == 2 and c["failed"] == 0 for c in doc["configs"])
    per_entry = {(c["K"], c["strategy"], c["encryption"]): c["index_bytes_per_entry"] for c in doc["configs"]}
    for (k, strategy, enc), b in per_entry.items():
        if enc == "secret-key":  # seeded: half the bytes of public-key enrollment
            assert 0.45 < b / per_entry[(k, strategy, "public-key")] < 0.55
    c = doc["configs"][0]
    for key in ("membership_s", "identification_s", "rtt_s", "peak_rss_bytes", "key_disk_bytes", "index_disk_bytes",
                "key_bytes_sent", "query_bytes", "membership_result_bytes", "identification_result_bytes"):
        assert c[key] > 0, key
    assert c["setup"]["keygen_s"] > 0 and c["setup"]["enroll_s"] > 0
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert len(rows) == 8 and rows[0]["preset"] == TOY and {r["encryption"] for r in rows} == {"public-key", "secret-key"} and rows[0]["cpu"] and rows[0]["kappa"] == "8"
    md = (out / "results.md").read_text()
    assert "papers/000 Table 7" in md and "HyDia-CPU-DG" in md  # K = 2048 has published rows
    assert "bsgs-tbe seeded" in md
    assert not list(tmp_path.glob("encmatch-bench-*"))  # keys and indexes removed


def test_cli_rejects_bad_lists(tmp_path):
    p = run_cli("bench", "--strategies", "dg,nope", "--out", tmp_path)
    assert p.returncode == 2 and "unknown strategy" in p.stderr
    p = run_cli("bench", "--sizes", "0", "--out", tmp_path)
    assert p.returncode == 2
    p = run_cli("bench", "--encryption", "secret-key,rot13", "--out", tmp_path)
    assert p.returncode == 2 and "unknown encryption" in p.stderr


# ---- honest reports (issue 17): no INSECURE row beside the papers' secure ones, no ± of one sample, readable plots


def fake_doc(sizes=(2048,), passed=1, preset="toy", insecure=True, strategies=("bsgs-tbe", "dg"), kappa=8):
    """A results document with made-up figures (no core run): ``passed`` timed trials per configuration."""
    configs = []
    for k in sizes:
        for st in strategies:
            spread = 0.0 if passed == 1 else 0.01
            configs.append({
                "K": k, "Km": 1, "strategy": st, "encryption": "public-key", "n1": 16, "workload": "synthetic",
                "delta": 0.6, "trials": [], "passed": passed, "failed": 0,
                "membership_s": 0.255 * k / 2048, "membership_std_s": spread,
                "identification_s": 0.31 * k / 2048, "identification_std_s": spread,
                "rtt_s": 0.4, "rtt_std_s": spread, "peak_rss_bytes": 2.1e8, "peak_rss_bytes_std": 0.0,
                "key_disk_bytes": 5e7, "index_disk_bytes": 3e6 * k / 2048, "index_bytes_per_entry": 1500,
                "setup": {"keygen_s": 1.0, "enroll_s": 0.5, "total_s": 2.0, "rotation_keys": 10,
                          "trial": {"peak_rss_bytes": 2e8, "ok": True}},
            })
    return {
        "created": "now", "hardware": {"cpu": "test cpu", "cores": 2, "ram_bytes": 8e9, "os": "linux", "python": "3"},
        "parameters": {"preset": preset, "log_n": 12 if insecure else 15, "log_qp": 840, "kappa": kappa, "dim": DIM,
                       "n1": 0, "trials": passed + 1, "matches": 1, "workload": "synthetic",
                       "memory_budget_bytes": 0, "insecure": insecure, "seed": 0, "delta": 0.6},
        "workloads": {str(k): {"delta": 0.6, "margin": 0.19, "min_planted_score": 0.999, "max_other_score": 0.2}
                      for k in sizes},
        "configs": configs,
    }


def test_insecure_rows_are_marked_and_kept_apart_from_the_papers():
    md = bench_report.markdown_table(fake_doc(sizes=(1024, 2048), passed=3))
    ours = [ln for ln in md.splitlines() if ln.startswith("| ") and "encmatch," in ln]
    papers = [ln for ln in md.splitlines() if "papers/000 Table" in ln]
    assert len(ours) == 4 and all("INSECURE toy" in ln for ln in ours) and papers
    lines = md.splitlines()
    apart = next(i for i, ln in enumerate(lines) if "NOT comparable" in ln and ln.startswith("## papers/000"))
    assert max(lines.index(ln) for ln in ours) < apart < min(lines.index(ln) for ln in papers)
    # at a secure preset the published rows stay beside ours, K by K, and nothing says INSECURE
    md = bench_report.markdown_table(fake_doc(sizes=(1024, 2048), passed=3, preset="default", insecure=False))
    assert "INSECURE" not in md and "NOT comparable" not in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| 1,024") or ln.startswith("| 2,048")]
    assert [("papers/000" in ln) for ln in rows] == [False, False, True, True] * 2


def test_single_sample_has_no_spread():
    md = bench_report.markdown_table(fake_doc(passed=1))
    ours = [ln for ln in md.splitlines() if "encmatch," in ln and ln.startswith("| ")]
    assert ours and all("±" not in ln and "(n=1)" in ln for ln in ours)
    assert "0.26 (n=1)" in ours[0]
    assert "± 0.00" not in bench._summary_line(fake_doc(passed=1)["configs"][0])
    many = bench_report.markdown_table(fake_doc(passed=3))
    assert "0.26 ± 0.01" in many and "(n=1)" not in "".join(ln for ln in many.splitlines() if "encmatch," in ln)


def _tick_texts(fig):
    """Every tick label of the figure, drawn."""
    fig.canvas.draw()
    ax = fig.axes[0]
    return [t.get_text() for axis in (ax.xaxis, ax.yaxis) for minor in (False, True)
            for t in axis.get_ticklabels(minor=minor) if t.get_text()]


@pytest.mark.parametrize("sizes", [(2048,), (1024, 2048, 16384)])
def test_plots_are_readable(sizes, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: drawn.append(self))  # keep what write_outputs draws
    monkeypatch.setattr(plt, "close", lambda *a: None)
    doc = fake_doc(sizes=sizes, passed=1 if len(sizes) == 1 else 3)
    bench_report.write_outputs(doc, tmp_path)
    fig = drawn[0]  # time.png: membership and identification per strategy
    ax = fig.axes[0]
    texts = _tick_texts(fig)
    assert texts and not any("times" in t or "^" in t or "\\cdot" in t for t in texts), texts
    if len(sizes) == 1:  # one size: bars, not a line of single dots
        assert len(ax.patches) == 4 and not [ln for ln in ax.get_lines() if ln.get_marker() not in ("None", "", None)
                                               and len(ln.get_xdata()) == 1 and ln.get_linestyle() != "None"]
        assert "bsgs-tbe membership" in texts and any("(n=1)" in t.get_text() for t in ax.texts)
    else:
        assert {"1,024", "2,048", "16,384"} <= set(texts)
    assert "INSECURE" in ax.get_title()
    for f in drawn:
        assert not any("times" in t or "^" in t for t in _tick_texts(f))
        plt.close(f)


def test_check_out_dir(tmp_path):
    assert bench_report.check_out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"  # made by write_outputs
    (tmp_path / "file").write_text("x")
    from encmatch.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="is a file"):
        bench_report.check_out_dir(tmp_path / "file")
    with pytest.raises(InvalidArgument, match="not a folder"):
        bench_report.check_out_dir(tmp_path / "file" / "sub")
