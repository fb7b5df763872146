"""The fold polynomial of papers/004's Algorithm 2, made sound for any gallery (encmatch.iris.folding).

One design for the module (a linear program, about 10 s): its measured
bounds hold on a dense grid, simulated slots of every kind are never wrong,
and on templates with duplicates, sixteen matching neighbours, a crowd of
near misses and a complement code every folded answer equals the plaintext
model or is flagged. A design with its sure threshold moved below the bound
is refused, and the crowd of near misses makes it answer wrongly.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from encmatch.cli import main
from encmatch.errors import InvalidArgument
from encmatch.iris import POPULATIONS, folding, generate, match, save_templates
from encmatch.iris.templates import Templates

T = 0.34


@pytest.fixture(scope="module")
def fold():
    """The default design at t = 0.34 (degree 15, k = 16)."""
    return folding.design(T)


def test_measured_bounds_hold_on_a_dense_grid(fold):
    """The exact extrema agree with a grid of 200,001 points, and the soundness inequalities hold."""
    d = fold
    x = np.linspace(d.poly.lo, d.poly.hi, 200_001)
    f = d.poly(x)
    eps = 1e-9
    assert f.min() >= d.floor - eps and f.max() <= d.top + eps
    assert f[x <= -d.guard].max() <= d.near + eps
    assert f[x >= d.guard].min() >= d.low - eps
    assert f[x <= d.clear].max() <= d.quiet + eps
    assert (f[x >= d.sure_from] + (d.k - 1) * min(d.floor, 0)).min() >= d.sure_at + d.tolerance - eps
    assert d.sure_at - d.tolerance > d.k * d.near
    assert d.maybe_at + d.tolerance < d.low + (d.k - 1) * d.floor
    assert d.k * d.quiet + d.tolerance < d.maybe_at
    # The monomial form evaluates to the same polynomial.
    mono = np.polynomial.Polynomial(d.poly.power_coefficients())
    assert np.allclose(mono(x[::1000]), f[::1000], atol=1e-6 * d.top)
    out = d.to_dict()
    assert out["degree"] == 15 and out["sum_range"][1] == pytest.approx(16 * d.top)


def test_simulated_slots_are_never_wrong(fold):
    """Impostor slots are clean no's, slots with duplicates clean yes's, near misses flagged at worst."""
    stats = folding.check_sums(fold, 200_000, seed=3, chunk=50_000)
    assert sum(s["slots"] for s in stats.values()) == 200_000
    assert all(s["wrong"] == 0 for s in stats.values()), stats
    assert stats["impostor"]["maybe"] == 0
    assert stats["near misses"]["sure"] == 0
    assert stats["duplicates"]["sure"] > 0.99 * stats["duplicates"]["slots"]


def test_a_design_that_breaks_the_bound_is_refused(fold):
    bad = dataclasses.replace(fold, sure_at=fold.k * fold.near - 1.0)
    with pytest.raises(InvalidArgument, match="k \\* near"):
        bad.check()
    bad = dataclasses.replace(fold, maybe_at=fold.low + fold.k)
    with pytest.raises(InvalidArgument, match="maybe_at"):
        bad.check()


def test_infeasible_design_says_what_to_change():
    with pytest.raises(InvalidArgument, match="raise the degree"):
        folding.design(T, degree=5)
    with pytest.raises(InvalidArgument):
        folding.design(T, guard=0.0)


def _flip_to(code: np.ndarray, mask: np.ndarray, fhd: float, rng) -> np.ndarray:
    """A copy of ``code`` with round(fhd * usable) usable bits flipped."""
    out = code.copy().reshape(-1)
    usable = np.flatnonzero(mask.reshape(-1))
    pick = rng.choice(usable, size=int(round(fhd * len(usable))), replace=False)
    out[pick] = ~out[pick]
    return out.reshape(code.shape)


@pytest.fixture(scope="module")
def crafted():
    """300 generated eyes (papers004) plus crafted entries for six query eyes:

    - dup: enrolled twice (FHD 0.25 and 0.26);
    - sixteen: 16 neighbouring entries, all matches (FHD 0.20 to 0.30);
    - crowd: 40 near misses at FHD t + 0.006 to t + 0.03, no match;
    - complement: its complement enrolled (score -1), no match;
    - weak: one match just outside the guard band (FHD t - 0.01);
    - outsider: not enrolled at all.
    """
    rng = np.random.default_rng(5)
    gallery, queries = generate(300, n_queries=6, n_enrolled=0, seed=9, generator=POPULATIONS["papers004"])
    qc, qm = queries.bits()
    qc, qm = qc.astype(bool), qm.astype(bool)
    entries = []
    entries += [(_flip_to(qc[0], qm[0], f, rng), qm[0]) for f in (0.25, 0.26)]
    entries += [(_flip_to(qc[1], qm[1], f, rng), qm[1]) for f in np.linspace(0.20, 0.30, 16)]
    entries += [(_flip_to(qc[2], qm[2], f, rng), qm[2]) for f in np.linspace(T + 0.006, T + 0.03, 40)]
    entries += [(~qc[3], qm[3])]
    entries += [(_flip_to(qc[4], qm[4], T - 0.01, rng), qm[4])]
    gc, gm = gallery.bits()
    codes = np.concatenate([gc.astype(bool), np.stack([c for c, _ in entries])])
    masks = np.concatenate([gm.astype(bool), np.stack([m for _, m in entries])])
    full = Templates.from_bits(codes, masks, [f"g{i}" for i in range(len(codes))], gallery.layout)
    named = Templates.from_bits(qc, qm, ["dup", "sixteen", "crowd", "complement", "weak", "outsider"], queries.layout)
    return full, named


def test_crafted_galleries_are_right_or_flagged(fold, crafted):
    gallery, queries = crafted
    model = match(queries, gallery, T)
    assert model.bits.tolist() == [True, True, False, False, True, False]
    res = folding.fold_match(queries, gallery, fold)
    assert res.wrong(model, fold.guard).size == 0
    answer = dict(zip(queries.ids.tolist(), res.answer.tolist()))
    assert answer["dup"] == folding.MATCH and answer["sixteen"] == folding.MATCH
    assert answer["crowd"] == folding.FLAGGED         # forty near misses cannot make a match
    assert answer["complement"] == folding.NO_MATCH   # a score of -1 adds almost nothing
    assert answer["weak"] != folding.NO_MATCH         # a match is never a clean no
    assert answer["outsider"] == folding.NO_MATCH
    assert res.slots == 6 * 2 * len(gallery)
    # The same crowd against a design whose sure threshold ignores the bound: a clean wrong match.
    unsound = dataclasses.replace(fold, sure_at=fold.maybe_at)
    bad = folding.fold_match(queries, gallery, unsound)
    assert "crowd" in queries.ids[bad.wrong(model, fold.guard)].tolist()


def test_generated_populations_match_the_model(fold):
    """Both populations, 16 of 24 eyes enrolled: no wrong answer; papers004's statistics leave none flagged."""
    for name in ("daugman", "papers004"):
        gallery, queries = generate(1000, n_queries=24, n_enrolled=16, seed=2, generator=POPULATIONS[name])
        model = match(queries, gallery, T)
        res = folding.fold_match(queries, gallery, fold)
        assert res.wrong(model, fold.guard).size == 0, name
        if name == "papers004":
            assert (res.answer == folding.FLAGGED).sum() == 0
            assert res.answer.tolist() == model.bits.astype(int).tolist()


def test_cli_fold(tmp_path, crafted, capsys):
    gallery, queries = crafted
    save_templates(tmp_path / "g.npz", gallery)
    save_templates(tmp_path / "q.npz", queries)
    out = tmp_path / "fold.json"
    assert main(["iris", "fold", "--t", "0.34", "--sums", "20000", str(tmp_path / "g.npz"),
                 "--queries", str(tmp_path / "q.npz"), "-o", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["design"]["degree"] == 15 and res["eyes"]["wrong"] == []
    assert sum(s["wrong"] for s in res["sums"]["scenarios"].values()) == 0
    assert {e["eye"]: e["answer"] for e in res["eyes"]["per_eye"]}["complement"] == "no match"
    capsys.readouterr()
    assert main(["iris", "fold", str(tmp_path / "g.npz")]) == 2
    assert main(["iris", "fold", "--degree", "5"]) == 2
    assert "error:" in capsys.readouterr().err


@pytest.fixture(scope="module")
def fold_two():
    """The design with a second polynomial for *maybe* (degree 15, bounded by 4) and a sure tolerance of 1."""
    return folding.design(T, maybe_degree=15, sure_tolerance=1.0)


def test_two_polynomials_widen_both_classifiers(fold, fold_two):
    """h's measured bounds hold on a grid, both soundness inequalities hold, and each classifier's gap
    is at least ten times the single design's (h's sums span [k floor, k top_h], not [k floor, k top])."""
    d = fold_two
    x = np.linspace(d.poly.lo, d.poly.hi, 200_001)
    h = d.maybe_poly(x)
    eps = 1e-9
    assert h.min() >= d.maybe_floor - eps and h.max() <= d.maybe_top + eps
    assert d.maybe_top <= 4.0 + 1e-4  # the program's grid may let h pass its bound by a hair: the measured top is used
    assert h[x >= d.guard].min() >= d.maybe_low - eps
    assert h[x <= d.clear].max() <= d.maybe_quiet + eps
    assert d.maybe_at + d.maybe_tolerance < d.maybe_low + (d.k - 1) * d.maybe_floor
    assert d.sure_at - d.tolerance > d.k * d.near and d.tolerance == 1.0
    assert d.sure_precision > 10 * fold.sure_precision and d.maybe_precision > 10 * fold.maybe_precision
    out = d.to_dict()
    assert out["maybe_degree"] == 15 and len(out["maybe_chebyshev"]) == 16
    with pytest.raises(InvalidArgument, match="maybe_degree"):
        folding.design(T, sure_tolerance=1.0)
    with pytest.raises(InvalidArgument, match="maybe_clear"):
        folding.design(T, maybe_degree=15, maybe_clear=0.0)
    # Held down to score 0.26 (degree 31): h is quiet there, and its window stays open.
    far = folding.design(T, maybe_degree=31, maybe_clear=-0.06, sure_tolerance=2.0)
    x = np.linspace(far.poly.lo, far.poly.hi, 200_001)
    assert far.maybe_clear == -0.06
    assert far.maybe_poly(x[x <= -0.06]).max() <= far.maybe_quiet + eps
    assert far.k * far.maybe_quiet + far.maybe_tolerance < far.maybe_at
    assert far.maybe_precision > 2e-3


def test_two_polynomials_are_never_wrong(fold_two, crafted):
    """Simulated slots of every kind and the crafted gallery: right or flagged, as with one polynomial."""
    stats = folding.check_sums(fold_two, 100_000, seed=4, chunk=50_000)
    assert all(s["wrong"] == 0 for s in stats.values()), stats
    assert stats["impostor"]["maybe"] == 0 and stats["near misses"]["sure"] == 0
    gallery, queries = crafted
    model = match(queries, gallery, T)
    res = folding.fold_match(queries, gallery, fold_two)
    assert res.wrong(model, fold_two.guard).size == 0
    answer = dict(zip(queries.ids.tolist(), res.answer.tolist()))
    assert answer["crowd"] == folding.FLAGGED and answer["complement"] == folding.NO_MATCH
    assert answer["dup"] == folding.MATCH and answer["weak"] != folding.NO_MATCH
    # h's maybe threshold moved above its matches' sums: a clean wrong no for the weak match.
    unsound = dataclasses.replace(fold_two, maybe_at=fold_two.k * fold_two.maybe_top)
    bad = folding.fold_match(queries, gallery, unsound)
    assert "weak" in queries.ids[bad.wrong(model, fold_two.guard)].tolist()
