"""1:N operating points (issue 13 part 4): FPIR and FNIR at the gallery size, the rule-of-three support check,
and ground truth reported apart from the agreement with brute force (calibrate, demo, accuracy).

Synthetic score sets whose FPIR and FNIR are known exactly; real faces
(shared/data) only for the CLI and the demo at the toy preset.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from encmatch.evaluation.calibrate import (
    NonMated,
    ScoreDistributions,
    calibrate,
    fmr_for_fpir,
    fpir_independent,
    rate_text,
)
from encmatch.errors import InvalidArgument

from conftest import fake_validate, run_cli


def ok(proc, code=0):
    """Assert the exit code and that no traceback was printed; return the process."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def synthetic(searches: int = 1000, m: int = 100, hot: int = 10, seed: int = 0):
    """``searches`` non-mated searches of ``m`` impostor scores in [-0.5, 0.4]; ``hot`` of them also hold one 0.9."""
    rng = np.random.default_rng(seed)
    rows = rng.uniform(-0.5, 0.4, (searches, m))
    rows[:hot, 0] = 0.9
    genuine = np.array([0.3, 0.6, 0.7, 0.95])
    return ScoreDistributions.from_scores(genuine, rows.ravel(), nonmated=rows), rows


def no_bare_zero_rate(text: str) -> None:
    """No rate is printed as a bare 0: every "FMR 0"/"FPIR 0" is "0 of n (below 3/n ...)"."""
    for m in re.finditer(r"\b(FMR|FPIR):? 0(?![.\d])", text):
        assert text[m.end():m.end() + 4] == " of ", text[m.start():m.end() + 40]


def test_fpir_fnir_exact_on_synthetic_scores():
    d, rows = synthetic()
    nm = d.nonmated
    assert nm.n_searches == 1000 and d.n_impostor == 100_000
    # A gallery of all 100 candidates: exactly the 10 hot searches hit.
    assert nm.fpir(0.8, 100)[0] == pytest.approx(0.01, abs=1e-15)
    # Galleries of 50 drawn from 100: a hot search hits with probability 1 - C(99, 50) / C(100, 50) = 1/2.
    assert nm.fpir(0.8, 50)[0] == pytest.approx(10 * 0.5 / 1000, abs=1e-15)
    fp, info = nm.fpir(0.8, 50)
    assert info == {"searches": 1000, "hit": 10, "extrapolated": 0, "truncated": 0}
    # Galleries of 200 from 100 candidates: extrapolated with replacement, 1 - (1 - 1/100)^200.
    fp, info = nm.fpir(0.8, 200)
    assert fp == pytest.approx(10 * (1 - 0.99 ** 200) / 1000, rel=1e-12) and info["extrapolated"] == 1000
    # Two hits in one search, gallery 50 of 100: 1 - C(98, 50) / C(100, 50).
    two = NonMated.from_searches([[0.9, 0.85] + [0.0] * 98])
    assert two.fpir(0.8, 50)[0] == pytest.approx(1 - math.comb(98, 50) / math.comb(100, 50), rel=1e-12)
    # Below every score: all 100 candidates hit but only the top 64 are kept; the FPIR is then a lower bound, flagged.
    fp, info = nm.fpir(-0.9, 7)
    assert info["truncated"] == 1000 and fp == pytest.approx(1 - math.comb(36, 7) / math.comb(100, 7))
    # FNIR = mated searches whose mate scores below delta = genuine pairs below delta.
    assert d.fnmr(0.65) == 0.5 and d.fnmr(0.2) == 0.0 and d.fnmr(0.96) == 1.0
    # The FPIR threshold: just above the bulk for 1.05 % (one more search would make 1.1 %), above 0.9 for 0.5 %.
    bulk = rows.copy()
    bulk[:10, 0] = -1
    top_bulk = float(bulk.max())
    t = d.threshold_at_fpir(0.0105, 100)
    assert top_bulk < t <= top_bulk + 2e-5
    t = d.threshold_at_fpir(0.005, 100)
    assert 0.9 < t <= 0.9 + 2e-5


def test_independence_model_and_support():
    assert fpir_independent(fmr_for_fpir(0.01, 16384), 16384) == pytest.approx(0.01, rel=1e-9)
    assert fmr_for_fpir(0.01, 16384) == pytest.approx(0.01 / 16384, rel=1e-2)
    genuine = np.array([0.3, 0.6, 0.7, 0.95])
    imp = np.random.default_rng(1).uniform(-0.5, 0.5, 100_000)
    d = ScoreDistributions.from_scores(genuine, imp)  # no non-mated searches: FPIR from the model
    assert d.fpir(0.45, 10)[1] == "model"
    assert d.fpir(0.45, 10)[0] == pytest.approx(1 - (1 - d.fmr(0.45)) ** 10)
    cal = calibrate(d, target_fpir=0.1, gallery_size=10)
    assert cal.support.ok and cal.support.pairs_needed == math.ceil(3 / fmr_for_fpir(0.1, 10))
    assert cal.checks["fpir"] <= 0.1 and cal.checks["fpir"] == pytest.approx(0.1, abs=0.01)


def test_calibrate_reports_fpir_and_fnir_at_the_gallery_size():
    d, _ = synthetic()
    cal = calibrate(d, target_fpir=0.0105, gallery_size=100)
    assert cal.ok and cal.target_fpir == 0.0105 and cal.gallery_size == 100
    # Delta lies just above the bulk: only the 10 hot searches hit (FPIR 1 %); the mate scores decide FNIR.
    assert cal.checks["fpir"] == pytest.approx(0.01) and cal.checks["fpir_method"] == "empirical"
    assert cal.checks["fnir"] == pytest.approx(0.25)  # 0.3 is below delta, 0.6 / 0.7 / 0.95 above
    rep = cal.report()
    assert "FPIR" in rep and "FNIR" in rep and "N = 100" in rep and "empirical" in rep and "verdict: OK" in rep
    no_bare_zero_rate(rep)
    js = cal.to_dict()
    assert js["gallery_size"] == 100 and js["fpir"] == pytest.approx(0.01) and js["support"]["ok"]
    json.dumps(js)
    # The same scores at a larger gallery: the hot searches are extrapolated, and the FPIR grows.
    big = calibrate(d, target_fpir=0.05, gallery_size=1000, delta=cal.delta)
    assert big.suggested is False and big.delta == cal.delta
    assert big.checks["fpir"] == pytest.approx(10 * (1 - 0.99 ** 1000) / 1000)
    assert "extrapolated" in big.report()


def test_calibrate_refuses_targets_the_data_cannot_support():
    # 28,320 impostor pairs (the case): a 1e-6 target needs 3,000,000.
    rng = np.random.default_rng(2)
    d = ScoreDistributions.from_scores(rng.uniform(0.5, 1, 50), rng.uniform(-0.5, 0.5, 28_320))
    with pytest.raises(InvalidArgument, match=r"needs at least 3,000,000 impostor pairs.*this set has 28,320"):
        calibrate(d, target_fmr=1e-6)
    with pytest.raises(InvalidArgument, match=r"needs at least 30,000 impostor pairs"):
        calibrate(d, target_fmr=1e-4)
    cal = calibrate(d, target_fmr=1.5e-4)  # 20,000 needed
    assert cal.support.ok and cal.support.pairs_needed == 20_000
    no_bare_zero_rate(cal.report())
    # 1:N: FPIR 1 % at 16,384 entries needs a per-comparison FMR of about 6e-7: about 4.9 million pairs.
    with pytest.raises(InvalidArgument, match=r"target FPIR 0.01 at gallery size N = 16,384 .* NOT supported"):
        calibrate(d, target_fpir=0.01, gallery_size=16384)
    # Enough pairs but too few non-mated searches: 3 / 0.01 = 300 searches needed, 100 given.
    rows = rng.uniform(-0.5, 0.5, (100, 1000))
    few = ScoreDistributions.from_scores([0.9], rows.ravel(), nonmated=rows)
    with pytest.raises(InvalidArgument, match=r"300 non-mated searches.*this set has 100,000 and 100"):
        calibrate(few, target_fpir=0.01, gallery_size=10)
    assert calibrate(few, target_fpir=0.05, gallery_size=10).support.ok
    with pytest.raises(InvalidArgument, match="not both"):
        calibrate(few, target_fmr=1e-3, target_fpir=0.05)
    with pytest.raises(InvalidArgument, match="gallery size"):
        calibrate(few, target_fpir=0.05, gallery_size=0)


def test_rate_text_never_prints_a_bare_zero():
    assert rate_text(0, 28_320, "impostor pairs") == "0 of 28,320 impostor pairs (below 0.00011 at 95 % confidence)"
    assert rate_text(3, 1000) == "0.003 (3 of 1,000)"


def test_separable_set_reports_zero_with_its_bound():
    emb = np.eye(6)[[0, 0, 1, 1, 2, 2]] + 0.01 * np.arange(6)[:, None]
    d = ScoreDistributions.from_labelled(emb, [0, 0, 1, 1, 2, 2], block=2)
    assert d.n_impostor == 12 and d.n_searches == 6 and d.nonmated.candidates.tolist() == [4] * 6
    with pytest.raises(InvalidArgument, match="needs at least 30 impostor pairs"):
        calibrate(d, target_fmr=0.1)
    cal = calibrate(d, target_fmr=0.25, gallery_size=4, delta=0.9)
    rep = cal.report()
    assert cal.checks["fmr_count"] == 0 and "FMR 0 of 12 impostor pairs (below 0.25" in rep
    no_bare_zero_rate(rep)


@pytest.mark.data
def test_cli_calibrate_1n(data_dir, tmp_path):
    npz = data_dir / "orl" / "embeddings_mfn.npz"  # 400 faces, 78,000 impostor pairs
    res = json.loads(ok(run_cli("calibrate", npz, "--target-fpir", "0.05", "--json")).stdout)
    assert res["ok"] and res["gallery_size"] == 400 and res["target_fpir"] == 0.05  # default N: the faces given
    assert res["non_mated_searches"] == 400 and res["fpir"] <= 0.05 and 0 < res["fnir"] < 0.05
    assert res["support"]["ok"] and res["support"]["pairs_needed"] == math.ceil(3 / fmr_for_fpir(0.05, 400))
    assert res["fpir_independent"] > res["fpir"]  # false matches cluster on a few searches
    # The default target (FPIR 1 % at N = 400) needs 119,401 impostor pairs: refused, exit 2, nothing promised.
    p = ok(run_cli("calibrate", npz), 2)
    assert "error: " in p.stderr and "119,401 impostor pairs" in p.stderr and "NOT supported" in p.stderr
    assert "FPIR >= 0.015 at N = 400" in p.stderr and p.stdout == ""
    p = ok(run_cli("calibrate", npz, "--target-fmr", "1e-6"), 2)
    assert "3,000,000 impostor pairs" in p.stderr and "78,000" in p.stderr and "FMR 0" not in p.stdout + p.stderr
    p = ok(run_cli("calibrate", npz, "--target-fpir", "0.1", "--gallery-size", "16384"), 2)
    assert "N = 16,384" in p.stderr
    p = ok(run_cli("calibrate", npz, "--target-fpir", "0.05", "--target-fmr", "1e-3"), 2)  # one target only
    # Text report: 1:1 and 1:N tables, the support line, FPIR/FNIR at delta, the method.
    p = ok(run_cli("calibrate", npz, "--target-fpir", "0.05", "--gallery-size", "100"))
    out = p.stdout
    for text in ("1:1 (per comparison)", "1:N at gallery size N = 100", "FNIR", "rule of three", "supported",
                 "1:N at delta, N = 100: FPIR", "hypergeometric" if False else "drawn at random", "verdict: OK"):
        assert text in out, text
    no_bare_zero_rate(out)


# ---- demo: ground truth beside the agreement with brute force ------------------------------------------------------


def _fake_report(encrypted_positions=None):
    """Four queries against six labelled entries at delta 0.6; encrypted answers = brute force unless given."""
    from encmatch.params import comparator
    from encmatch.results import make_result
    from encmatch.evaluation.validate import compare

    labels = ["A", "B", "x1", "x2", "x3", "x4"]
    scores = np.array([
        [0.80, 0.10, 0.20, 0.10, 0.00, 0.30],  # A, enrolled: its own entry matches
        [0.10, 0.50, 0.20, 0.10, 0.00, 0.30],  # B, enrolled: its own entry scores below delta (a miss)
        [0.10, 0.10, 0.70, 0.10, 0.00, 0.30],  # C, not enrolled: resembles x1 (a false accept)
        [0.10, 0.10, 0.20, 0.10, 0.00, 0.30],  # D, not enrolled, nothing near
    ])
    exact = [np.flatnonzero(s >= 0.6) for s in scores]
    enc = encrypted_positions or exact
    ident = [make_result("identification", positions=p) for p in enc]
    member = [make_result("membership", count=len(p)) for p in enc]
    rep = compare(scores, 0.6, comparator(10, 0.6), membership=member, identification=ident,
                  query_names=["A", "B", "C", "D"], query_enrolled=[True, True, False, False], gallery_labels=labels)
    return rep, labels


def test_demo_ground_truth_is_not_the_agreement():
    from encmatch.evaluation.demo import ground_truth

    rep, labels = _fake_report()
    # Against brute force everything agrees: precision and recall 100 %.
    assert rep.ok and rep.identification.precision == 1.0 and rep.membership.recall == 1.0
    gt = ground_truth(rep, labels)
    assert gt.known == 2 and gt.unknown == 2
    want = {"membership": {"missed": 1, "accepted": 1},
            "identification": {"missed": 1, "accepted": 1, "wrong": 0}}
    assert gt.encrypted == want and gt.brute_force == want
    text = gt.table() + "\n" + gt.summary()
    assert "MISSED" in text and "FALSE ACCEPT" in text
    assert "enrolled people missed (false negatives) 1 of 2" in text
    assert "unknown people accepted (false positives) 1 of 2" in text and "(brute force: the same)" in text
    # An encrypted answer unlike brute force shows on both sides: A's entry not returned, D given x4.
    rep, labels = _fake_report([np.array([], np.int64), np.array([], np.int64), np.array([2]), np.array([5])])
    gt = ground_truth(rep, labels)
    assert gt.encrypted["identification"] == {"missed": 2, "accepted": 2, "wrong": 0}
    assert gt.brute_force["identification"] == {"missed": 1, "accepted": 1, "wrong": 0}
    assert "(brute force: missed 1, accepted 1)" in gt.summary()


@pytest.mark.data
def test_demo_toy_calibrates_for_its_gallery_and_reports_ground_truth(data_dir, tmp_path):
    import argparse
    import io

    from encmatch.cli.evaluation import add_demo_arguments
    from encmatch.evaluation import demo

    p = argparse.ArgumentParser()
    add_demo_arguments(p)
    args = p.parse_args(["--preset", "toy", "--size", "512", "--enrolled", "200", "--known", "2", "--unknown", "2",
                         "--work", str(tmp_path / "w"), "--data", str(data_dir)])
    out = io.StringIO()
    assert demo.run(args, out) == 0
    text = out.getvalue()
    m = re.search(r"match threshold delta = (0\.\d+): calibrated for 1:N, FPIR 1 % at this gallery size "
                  r"\(512 entries\), on ([\d,]+) LFW faces", text)
    assert m, text
    assert int(m.group(2).replace(",", "")) < 13_233  # the queried people are left out
    delta = float(m.group(1))
    assert delta > 0.541  # above the 1:1 FMR 1e-4 threshold: 512 comparisons per search
    gt_at, agree_at = text.index("ground truth:"), text.index("agreement with exact brute force")
    assert gt_at < agree_at and "precision" not in text[gt_at:agree_at]
    assert "unknown people accepted (false positives)" in text[gt_at:agree_at]
    assert "enrolled people missed (false negatives)" in text[gt_at:agree_at]
    assert "precision" in text[agree_at:] and "verdict: AGREE" in text
    # The calibration is reused for the same inputs.
    cal = demo.calibrate_delta(demo.data_mod.load_faces("lfw", "mfn", data_dir),
                               _query_names(text), 512, 0.01, args.kappa,
                               cache=tmp_path / "w" / "calibration.json")
    assert cal["cached"] and cal["delta"] == pytest.approx(delta, abs=1e-4)


def _query_names(text: str) -> list[str]:
    """The query names in the demo's ground-truth table."""
    block = text[text.index("ground truth:"):text.index("agreement with exact brute force")]
    return [ln.split()[1] for ln in block.splitlines() if re.match(r"^\d+\s", ln)]


# ---- accuracy: FPIR/FNIR at the gallery size, ground truth apart from agreement ----------------------------------


def test_search_rates_and_fpir_threshold():
    from encmatch.evaluation.accuracy import search_rates, threshold_at_fpir

    truth = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0]], bool)
    mated = np.array([True, True, False, False])
    dec = np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0], [1, 0, 0]], bool)
    r = search_rates(dec, truth, mated)
    # probe 1 got a wrong candidate but not its own entry: missed; probe 3 (non-mated) got a candidate: accepted
    assert r == {"fpir": 0.5, "fnir": 0.5, "accepted": 1, "non_mated": 2, "missed": 1, "mated": 2}
    scores = np.array([[0.9, 0.2], [0.1, 0.8], [0.3, 0.7], [0.5, 0.1], [0.2, 0.4], [0.6, 0.0]])
    mated = np.array([True, True, False, False, False, False])  # non-mated maxima 0.7, 0.5, 0.4, 0.6
    grid = np.linspace(0, 1, 1001)
    assert threshold_at_fpir(scores, mated, 0.25, grid) == pytest.approx(0.601)  # only 0.7 passes
    assert threshold_at_fpir(scores, mated, 0.5, grid) == pytest.approx(0.501)


def _fake_split(seed: int = 0):
    from encmatch.evaluation.accuracy import Split

    rng = np.random.default_rng(seed)
    g = rng.standard_normal((10, 16))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    mated = g[np.arange(40) % 10] + 0.35 * rng.standard_normal((40, 16))
    other = rng.standard_normal((60, 16))
    probes = np.vstack([mated, other])
    probes /= np.linalg.norm(probes, axis=1, keepdims=True)
    return Split(gallery=g, gallery_ids=[f"p{i}" for i in range(10)], probes=probes,
                 probe_ids=[f"p{i % 10}" for i in range(40)] + [f"q{i}" for i in range(60)],
                 mated=np.array([True] * 40 + [False] * 60))


def test_accuracy_reports_1n_rates_and_ground_truth_apart(monkeypatch):
    from encmatch.evaluation import accuracy

    sp = _fake_split()
    scores = sp.probes @ sp.gallery.T
    monkeypatch.setattr(accuracy.validate_mod, "run", fake_validate(flip=(45, 3)))  # a non-mated probe given entry 3
    rep = accuracy.run(sp, target_fpir=0.05)
    assert rep.gallery_size == 10 and [p.name for p in rep.points] == ["EER", "FAR 1%", "FAR 0.1%", "FPIR 5%", "delta"]
    fp = rep.point("FPIR 5%")
    assert rep.point("delta").delta == fp.delta  # the default delta is the 1:N point's
    # plaintext FPIR/FNIR at that threshold, computed here directly
    best_non = scores[~sp.mated].max(axis=1)
    assert fp.searches[0]["accepted"] == int((best_non >= fp.delta).sum()) <= 0.05 * 60
    own = scores[np.arange(40), np.arange(40) % 10]
    assert fp.searches[0]["missed"] == int((own < fp.delta).sum())
    # the one flipped pair: agreement counts it; ground truth shows it as the encrypted side's FPIR
    plain_hit = bool((scores[45] >= fp.delta).any())
    if not plain_hit:
        assert fp.searches[1]["accepted"] == fp.searches[0]["accepted"] + 1
    assert fp.searches_differ == 1 and fp.agreement.disagreements == 1
    text = rep.table() + "\n" + rep.summary()
    gt_at, agree_at = text.index("ground truth"), text.index("agreement:")
    assert "FPIR (N = 10)" in text[gt_at:agree_at] and "FNIR" in text[gt_at:agree_at]
    tbl = rep.table()
    assert "searches differ" in tbl[tbl.index("agreement:"):] and "precision" not in tbl[tbl.index("agreement:"):]
    assert "1:N at FPIR 5% (" in text and "1:N point: FPIR 5 % at N = 10" in text
    d = rep.to_dict()
    assert d["gallery_size"] == 10 and d["points"][3]["plaintext"]["fpir"] == fp.searches[0]["fpir"]
    assert d["points"][3]["searches_differ"] == 1
    json.dumps(d)
    # Too few non-mated probes for the target: no FPIR point, a warning, delta back at FAR 0.1 %.
    rep = accuracy.run(sp, target_fpir=0.01)  # needs 300
    assert [p.name for p in rep.points] == ["EER", "FAR 1%", "FAR 0.1%", "delta"]
    assert "needs at least 300 non-mated probes" in rep.summary()
    assert rep.point("delta").delta == rep.point("FAR 0.1%").delta
