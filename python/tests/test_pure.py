"""Pure-Python parts that need no core library: input checks, errors, results, brute force, validation logic."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from encmatch import _core, errors
from encmatch._util.ui import gigabytes
from encmatch.params import memory_budget_bytes
from encmatch.evaluation.bruteforce import BruteForceIndex, cosine_scores, normalize, search
from encmatch.results import IdentificationResult, MembershipResult, make_result
from encmatch.evaluation.validate import compare, format_table


# ---- input validation at the boundary ---------------------------------------


def test_as_matrix_converts_to_c_contiguous_float32():
    x = np.asfortranarray(np.arange(1, 13, dtype=np.float64).reshape(3, 4))
    out = _core.as_matrix(x, 4)
    assert out.dtype == np.dtype("<f4") and out.flags.c_contiguous and out.shape == (3, 4)
    np.testing.assert_allclose(out, x)


def test_as_matrix_accepts_1d_and_lists():
    assert _core.as_matrix([1, 2, 3]).shape == (1, 3)
    assert _core.as_matrix([[1, 2], [3, 4]], 2).shape == (2, 2)
    assert _core.as_vector(np.ones((1, 5)), 5).shape == (5,)


@pytest.mark.parametrize(
    "value, message",
    [
        (np.ones((2, 3)), "dimension 3"),
        (np.ones((2, 2, 4)), "2-D"),
        (np.zeros((0, 4)), "empty"),
        (np.array([[1.0, np.nan, 0, 0]]), "NaN"),
        (np.array([[1.0, np.inf, 0, 0]]), "infinite"),
        (np.array([[1e39, 0, 0, 0]]), "float32"),
        (np.array([[1.0, 0, 0, 0], [0, 0, 0, 0]]), "zero vector"),
        (np.array([["a", "b", "c", "d"]]), "numbers"),
        (np.array([[1 + 1j, 0, 0, 0]]), "complex"),
    ],
)
def test_as_matrix_rejects_bad_input(value, message):
    with pytest.raises(errors.InvalidArgument, match=message):
        _core.as_matrix(value, 4)


def test_as_vector_rejects_several_rows():
    with pytest.raises(errors.InvalidArgument, match="one vector"):
        _core.as_vector(np.ones((2, 4)), 4)


def test_as_matrix_names_the_bad_rows():
    x = np.ones((10, 4))
    x[[3, 7]] = 0
    with pytest.raises(errors.InvalidArgument, match=r"row\(s\) 3, 7"):
        _core.as_matrix(x, 4)


# ---- errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, cls",
    [
        ("invalid_argument", errors.InvalidArgument),
        ("mismatch", errors.Mismatch),
        ("corrupt", errors.Corrupt),
        ("not_found", errors.NotFound),
        ("exists", errors.Exists),
        ("io", errors.IOError),
        ("internal", errors.Internal),
        ("something_new", errors.Internal),
        (None, errors.Internal),
    ],
)
def test_error_for_maps_kinds(kind, cls):
    exc = errors.error_for(kind, "boom")
    assert type(exc) is cls and str(exc) == "boom" and isinstance(exc, errors.EncmatchError)


def test_invalid_argument_is_a_value_error():
    assert issubclass(errors.InvalidArgument, ValueError)


# ---- results ----------------------------------------------------------------


def test_make_result_shapes():
    m = make_result("membership", count=2, raw_count=1.97)
    assert m == MembershipResult(count=2, enrolled=True, raw_count=1.97)
    assert make_result("membership", count=0).enrolled is False
    i = make_result("identification", positions=[5, 1, 5], gallery_labels=["a", "b", "c", "d", "e", "f"])
    assert isinstance(i, IdentificationResult)
    assert i.positions.tolist() == [1, 5] and i.positions.dtype == np.int64
    assert i.labels == ["b", "f"] and i.count == 2 and i.enrolled
    assert make_result("identification", positions=[]).labels is None
    with pytest.raises(errors.InvalidArgument):
        make_result("nearest")


# ---- brute force ------------------------------------------------------------


def test_bruteforce_threshold_is_inclusive_and_normalises():
    g = np.array([[1.0, 0.0], [0.0, 3.0], [1.0, 1.0], [-1.0, 0.0]])
    q = np.array([2.0, 0.0])
    s = cosine_scores(g, q)
    np.testing.assert_allclose(s[0], [1.0, 0.0, np.sqrt(0.5), -1.0])
    ident = search(g, q, delta=float(s[0, 2]), mode="identification", labels=list("abcd"))
    assert ident.positions.tolist() == [0, 2] and ident.labels == ["a", "c"]
    memb = search(g, np.vstack([q, [0.0, -1.0]]), delta=0.5, mode="membership")
    assert [m.count for m in memb] == [2, 0] and [m.enrolled for m in memb] == [True, False]
    np.testing.assert_allclose(np.linalg.norm(normalize(g), axis=1), 1.0)


def test_bruteforce_index_matches_functions():
    rng = np.random.default_rng(3)
    g = rng.standard_normal((50, 8))
    q = rng.standard_normal((4, 8))
    ix = BruteForceIndex(8, delta=0.3)
    ix.add(g[:20], labels=[f"x{i}" for i in range(20)])
    ix.add(g[20:], labels=[f"x{i}" for i in range(20, 50)])
    assert len(ix) == 50
    assert ix.search(q, "identification") == search(g, q, 0.3, "identification", [f"x{i}" for i in range(50)])
    assert ix.search(q[0], "membership") == search(g, q[0], 0.3, "membership")
    with pytest.raises(errors.InvalidArgument):
        ix.add(g[:2], labels=["only one"])


# ---- validation logic -------------------------------------------------------

BANDS = {"decision_band": 0.01, "value_band": 0.05}


def _scores():
    # query 0: 0.70 (match), 0.505 (inside the decision band), 0.46 (outside, no match)
    # query 1: 0.52 (match, inside the value band), rest far below
    return np.array([[0.70, 0.505, 0.46, 0.1], [0.52, 0.0, -0.2, 0.3]])


def test_compare_agreement_and_confusion():
    s = _scores()
    ident = [make_result("identification", positions=[0, 1]), make_result("identification", positions=[0])]
    memb = [make_result("membership", count=2), make_result("membership", count=1)]
    r = compare(s, 0.5, BANDS, membership=memb, identification=ident)
    assert r.ok and r.errors == 0
    c = r.identification
    assert (c.tp, c.fp, c.tn, c.fn, c.disagreements) == (3, 0, 5, 0, 0)
    assert c.recall == 1.0 and c.precision == 1.0
    assert (r.membership.tp, r.membership.tn) == (2, 0)
    assert "verdict: AGREE" in r.summary()
    assert "yes" in r.table()


def test_compare_disagreement_inside_band_is_not_an_error():
    s = _scores()
    ident = [make_result("identification", positions=[0]), make_result("identification", positions=[0])]
    r = compare(s, 0.5, BANDS, identification=ident)
    assert r.ok and r.identification.disagreements == 1 and r.identification.fn == 1
    assert r.queries[0].band_disagreements.tolist() == [1]
    assert "band" in r.table()


def test_compare_disagreement_outside_band_is_an_error():
    s = _scores()
    ident = [make_result("identification", positions=[0, 1, 2]), make_result("identification", positions=[])]
    r = compare(s, 0.5, BANDS, identification=ident)
    assert not r.ok and r.identification.errors == 2
    assert r.queries[0].errors.tolist() == [2] and r.queries[1].errors.tolist() == [0]
    assert r.identification.fp == 1 and r.identification.fn == 1
    assert "NO" in r.table() and "DISAGREE" in r.summary()


def test_compare_membership_band():
    s = _scores()
    # query 0: exact 2; scores >= 0.55: 1, >= 0.45: 3, so counts 1..3 are allowed.
    for count, ok in [(0, False), (1, True), (2, True), (3, True), (4, False)]:
        r = compare(s[:1], 0.5, BANDS, membership=[make_result("membership", count=count)])
        assert r.ok is ok, count
        assert (r.queries[0].count_low, r.queries[0].count_high) == (1, 3)


def test_compare_out_of_range_positions_are_errors():
    r = compare(_scores()[:1], 0.5, BANDS, identification=[make_result("identification", positions=[0, 1, 99])])
    assert not r.ok


def test_format_table_aligns():
    t = format_table(["a", "bb"], [["xxx", "y"], ["z", "wwww"]]).splitlines()
    assert t[0].startswith("a    bb") and len(t) == 4


def test_memory_budgets_gb_on_the_command_line_bytes_in_python():
    assert gigabytes("4") == 4_000_000_000 and gigabytes("0.5") == 500_000_000 and gigabytes("0") == 0
    for bad in ("-1", "nan", "inf", "four"):
        with pytest.raises(argparse.ArgumentTypeError):
            gigabytes(bad)
    assert memory_budget_bytes(None) == 0 and memory_budget_bytes(np.int64(7)) == 7
    assert memory_budget_bytes(2e9) == 2_000_000_000
    for bad in (-1, 1.5, float("nan"), True, "1"):
        with pytest.raises(errors.InvalidArgument):
            memory_budget_bytes(bad)
