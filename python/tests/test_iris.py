"""Iris: encoding identities, open-iris's rotation convention and format, the plaintext model, the generator, the CLI."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from encmatch.cli import main
from encmatch.errors import Corrupt, InvalidArgument, NotFound
from encmatch.iris import (
    LAYOUT,
    POPULATIONS,
    IrisGenerator,
    Templates,
    fhd,
    generate,
    load_templates,
    masked_bits,
    match,
    measure,
    read_openiris,
    rotations,
    save_templates,
    score,
    shifts,
    write_openiris,
)
from encmatch.iris.calibration import binomial_fmr
from encmatch.iris.encoding import check_bits, is_match, score_threshold
from encmatch.iris.model import Normalisation, gallery_matrices, public_offsets, query_matrices

SMALL = (4, 32, 2, 2)  # a small layout for the loop-based references


def random_templates(rng, n, layout=LAYOUT, coverage=0.8):
    """``n`` uniform codes and Bernoulli(coverage) masks, bool ``(n, *layout)``."""
    return rng.random((n, *layout)) < 0.5, rng.random((n, *layout)) < coverage


# -- open-iris, followed line by line (open-iris 1.11.2) ---------------------------------------

def openiris_serialize(iris_codes: list, mask_codes: list, version: str = "v0.1") -> dict:
    """``IrisTemplate.serialize`` (iris/io/dataclasses.py 618-631): ``new_to_old_format`` (688-690:
    ``np.stack(array).transpose(1, 2, 0, 3)``) then ``base64_encode_array`` (iris/utils/base64_encoding.py
    38-49: ``base64.b64encode(np.packbits(a).tobytes())``) and ``.decode("utf-8")``."""
    def enc(arrays):
        return base64.b64encode(np.packbits(np.stack(arrays).transpose(1, 2, 0, 3)).tobytes()).decode("utf-8")
    return {"iris_codes": enc(iris_codes), "mask_codes": enc(mask_codes), "iris_code_version": version}


def openiris_deserialize(obj: dict, array_shape=(16, 256, 2, 2)) -> tuple[list, list]:
    """``IrisTemplate.deserialize`` (dataclasses.py 641-657): ``base64_decode_array`` (base64_encoding.py 52-67)
    then ``old_to_new_format`` (692-705: ``[array[:, :, i, :] for i in range(array.shape[2])]``)."""
    def dec(text):
        old = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8)).reshape(*array_shape).astype(bool)
        return [old[:, :, i, :] for i in range(old.shape[2])]
    return dec(obj["iris_codes"]), dec(obj["mask_codes"])


def openiris_simple_hamming_distance(
    probe: tuple, gallery: tuple, rotation_shift: int, normalise: bool = False, norm_mean=0.45, norm_gradient=0.00005
) -> tuple[float, int]:
    """``simple_hamming_distance`` of iris/nodes/matcher/utils.py (get_bitcounts: ``np.roll(probe_code, shift,
    axis=1)`` on each per-filter code and mask; count_nonmatchbits; skip shifts without common bits; normalized_HD
    ``max(0, nm - (nm - x / M) * (g * M + 0.5))`` when normalising; keep the first strictly smaller distance, over
    shifts ``[0] + [-x, x for x in 1..s]``)."""
    best_dist, rot_shift = 1, 0
    for current_shift in [0] + [y for x in range(1, rotation_shift + 1) for y in (-x, x)]:
        irisbits = [np.roll(p, current_shift, axis=1) != g for p, g in zip(probe[0], gallery[0])]
        maskbits = [np.roll(p, current_shift, axis=1) & g for p, g in zip(probe[1], gallery[1])]
        total_iris = np.sum([np.sum(x & y, axis=0) for x, y in zip(irisbits, maskbits)])
        total_mask = np.sum([np.sum(y, axis=0) for y in maskbits])
        if total_mask == 0:
            continue
        current_dist = total_iris / total_mask
        if normalise:
            current_dist = max(0, norm_mean - (norm_mean - current_dist) * (norm_gradient * total_mask + 0.5))
        if current_dist < best_dist:
            best_dist, rot_shift = current_dist, current_shift
    return best_dist, rot_shift


def new_format(code: np.ndarray) -> list:
    """Our old-format ``(16, 256, 2, 2)`` array as open-iris's list of per-filter ``(16, 256, 2)`` arrays."""
    return [code[:, :, i, :] for i in range(code.shape[2])]


# -- encoding ----------------------------------------------------------------------------------

def test_score_is_one_minus_twice_fhd_and_masked_bits():
    rng = np.random.default_rng(1)
    (c1, c2), (m1, m2) = random_templates(rng, 2)
    assert score(c1, m1, c2, m2) == pytest.approx(1 - 2 * fhd(c1, m1, c2, m2), abs=1e-12)
    v = masked_bits(c1, m1)
    assert v.shape == (16384,) and set(np.unique(v)) <= {-1, 0, 1}
    assert np.array_equal(v == 0, ~m1.ravel()) and np.array_equal(v == -1, (c1 & m1).ravel())
    assert score(c1, m1, c1, m1) == 1.0 and fhd(c1, m1, ~c1, m1) == 1.0
    assert score_threshold(0.34) == pytest.approx(0.32)
    assert is_match(0.33, 0.34) and not is_match(0.31, 0.34) and not is_match(0.0, 0.5)  # strict, like FHD < t


def test_bad_bits_are_refused_clearly():
    rng = np.random.default_rng(2)
    c, m = random_templates(rng, 1, SMALL)
    with pytest.raises(InvalidArgument, match="shape"):
        check_bits(np.zeros((16, 256, 2)), "code")
    with pytest.raises(InvalidArgument, match="NaN"):
        check_bits(np.full(LAYOUT, np.nan), "code")
    with pytest.raises(InvalidArgument, match="0 or 1"):
        check_bits(np.full(LAYOUT, 2), "mask")
    with pytest.raises(InvalidArgument, match="empty"):
        Templates.from_bits(c, np.zeros_like(m), layout=SMALL)
    with pytest.raises(InvalidArgument, match="no usable bit in common"):
        score(c[0], m[0], c[0], ~m[0])
    with pytest.raises(InvalidArgument, match="rotation_shift"):
        shifts(-1)


def test_rotations_follow_openiris_order_and_axis():
    rng = np.random.default_rng(3)
    c, m = random_templates(rng, 1)
    rc, rm = rotations(c[0], m[0], 2)
    assert rc.shape == (5, *LAYOUT) and list(shifts(2)) == [0, -1, 1, -2, 2]
    for r, s in enumerate(shifts(2)):
        assert all(np.array_equal(a, np.roll(b, s, axis=1)) for a, b in zip(new_format(rc[r]), new_format(c[0])))
        assert np.array_equal(rm[r], np.roll(m[0], s, axis=1))


def test_model_equals_openiris_matcher_on_a_rotated_capture():
    rng = np.random.default_rng(4)
    (gc, pc_other), (gm, pm) = random_templates(rng, 2)
    flips = rng.random(LAYOUT) < 0.2
    probe = np.roll(gc ^ flips, 7, axis=1)  # the same eye, turned by 7 columns
    for pc in (probe, pc_other):
        expected = openiris_simple_hamming_distance((new_format(pc), new_format(pm)), (new_format(gc), new_format(gm)), 15)
        res = match(Templates.from_bits(pc, pm), Templates.from_bits(gc, gm), t=0.34, pairs=True)
        assert res.best_fhd[0] == pytest.approx(expected[0], abs=1e-6)
        assert res.min_fhd[0, 0] == pytest.approx(expected[0], abs=1e-6)
        assert res.best_shift[0] == expected[1]
    assert expected[0] > 0.4  # the other eye
    assert match(Templates.from_bits(probe, pm), Templates.from_bits(gc, gm), t=0.34).best_shift[0] == -7


def test_normalised_decisions_equal_openiris():
    rng = np.random.default_rng(15)
    gc, gm = random_templates(rng, 1)
    n = 40
    flips = rng.random((n, *LAYOUT)) < rng.uniform(0.3, 0.38, (n, 1, 1, 1, 1))
    pc = np.roll(gc ^ flips, 3, axis=2)
    pm = rng.random((n, *LAYOUT)) < rng.uniform(0.55, 0.95, (n, 1, 1, 1, 1))
    res = match(Templates.from_bits(pc, pm), Templates.from_bits(gc, gm), 0.34, normalise=Normalisation())
    plain = match(Templates.from_bits(pc, pm), Templates.from_bits(gc, gm), 0.34)
    expected = [openiris_simple_hamming_distance((new_format(c), new_format(m)), (new_format(gc[0]), new_format(gm[0])),
                                                 15, normalise=True)[0] < 0.34 for c, m in zip(pc, pm)]
    assert list(res.bits) == expected
    assert 0 < sum(expected) < n and not np.array_equal(res.bits, plain.bits)  # the normalisation changed decisions
    with pytest.raises(InvalidArgument, match="margin"):
        res.guard_band(0.01, unit="score")


# -- the plaintext model -----------------------------------------------------------------------

def naive(qc, qm, gc, gm, t, s):
    """Per eye: any (rotation, entry) with FHD < t; per pair the min FHD (loops, open-iris's skip rule)."""
    bits = np.zeros(len(qc), bool)
    min_fhd = np.ones((len(qc), len(gc)))
    for e in range(len(qc)):
        for i in range(len(gc)):
            for sh in shifts(s):
                c, m = np.roll(qc[e], sh, axis=1), np.roll(qm[e], sh, axis=1)
                if not (m & gm[i]).any():
                    continue
                d = fhd(c, m, gc[i], gm[i])
                min_fhd[e, i] = min(min_fhd[e, i], d)
                bits[e] |= d < t  # open-iris's comparison
    return bits, min_fhd


def test_exact_ties_are_decided_like_openiris():
    c = np.zeros((1, *SMALL), bool)
    m = np.zeros((1, *SMALL), bool)
    probe = c.copy()
    m.reshape(-1)[:100] = True
    probe.reshape(-1)[:34] = True  # 34 differing bits of M = 100: FHD = 0.34 exactly, score = 0.32
    assert fhd(probe[0], m[0], c[0], m[0]) == 0.34
    res = match(Templates.from_bits(probe, m, layout=SMALL), Templates.from_bits(c, m, layout=SMALL), 0.34,
                rotation_shift=0)
    assert not res.bits[0] and abs(res.best_margin[0]) < 1e-12  # FHD < t is false; on the guard band's edge
    assert res.guard_band(1e-9).tolist() == [0]


def test_model_bits_equal_a_naive_loop():
    rng = np.random.default_rng(5)
    gc, gm = random_templates(rng, 23, SMALL, coverage=0.7)
    qc, qm = random_templates(rng, 5, SMALL, coverage=0.7)
    qc[:3] = np.roll(gc[[4, 9, 17]] ^ (rng.random((3, *SMALL)) < 0.15), 2, axis=2)
    qm[4] = False
    qm[4, 0, 0] = True  # one usable bit: most pairs share none
    queries, gallery = Templates.from_bits(qc, qm, layout=SMALL), Templates.from_bits(gc, gm, layout=SMALL)
    for t in (0.3, 0.4, 0.45):
        res = match(queries, gallery, t, rotation_shift=3, pairs=True, chunk=7)
        bits, min_fhd = naive(qc, qm, gc, gm, t, 3)
        assert np.array_equal(res.bits, bits)
        np.testing.assert_allclose(res.min_fhd, min_fhd, atol=1e-6)
        np.testing.assert_allclose(res.best_fhd, min_fhd.min(axis=1), atol=1e-6)
    assert list(res.best_index[:3]) == [4, 9, 17]
    assert set(res.guard_band(10.0)) == set(range(5)) and len(res.guard_band(0.0)) == 0


def test_server_side_pieces_give_the_same_bits():
    gallery, queries = generate(200, 6, 3, seed=14)
    qv, qm = query_matrices(queries)
    gv, gm = gallery_matrices(gallery)
    assert qv.shape == (6 * 31, 16384) and gv.shape == (200, 16384)
    offsets = public_offsets(qm, gm, 0.34)
    decide = np.nan_to_num(qv @ gv.T - offsets, nan=-1.0) > 0  # pairs without common bits left out
    assert np.array_equal(decide.reshape(6, -1).any(axis=1), match(queries, gallery, 0.34).bits)


def test_guard_band_selects_eyes_near_the_threshold():
    rng = np.random.default_rng(6)
    gc, gm = random_templates(rng, 10, SMALL)
    res = match(Templates.from_bits(gc[:4], gm[:4], layout=SMALL), Templates.from_bits(gc, gm, layout=SMALL), 0.3)
    near = np.abs(res.best_score - score_threshold(0.3)) <= 0.65
    assert np.array_equal(np.isin(np.arange(4), res.guard_band(0.65, unit="score")), near)
    with pytest.raises(InvalidArgument):
        res.guard_band(0.1, unit="bits")


# -- generator ---------------------------------------------------------------------------------

def test_generator_statistics():
    gallery, queries = generate(768, 48, 24, seed=7)
    stats = measure(queries, gallery, thresholds=(0.34, 0.375), progress=False)
    one = stats["impostor_one_rotation"]
    assert abs(one["mean"] - 0.5) < 0.02
    assert 150 < one["dof"] < 400
    assert 0.2 <= stats["genuine_min_over_rotations"]["mean"] <= 0.3
    assert stats["impostor_min_over_rotations"]["mean"] < one["mean"]
    assert abs(stats["mask_coverage"]["mean"] - 0.8) < 0.03
    assert stats["thresholds"]["0.375"]["fnmr"] <= stats["thresholds"]["0.34"]["fnmr"]


def test_papers004_population_has_more_degrees_of_freedom():
    gallery, queries = generate(512, 32, 0, seed=13, generator=POPULATIONS["papers004"])
    x = match(queries, gallery, 0.34, rotation_shift=0, pairs=True).min_fhd.astype(np.float64)
    assert abs(x.mean() - 0.5) < 0.01
    assert 600 < x.mean() * (1 - x.mean()) / x.var() < 1200  # papers/004: score std 0.034, FHD std 0.017 (~865)


def test_generator_is_seeded_and_keeps_ground_truth():
    g1, q1 = generate(300, 10, 6, seed=3, chunk=128)
    g2, q2 = generate(300, 10, 6, seed=3, chunk=128)
    g3, _ = generate(300, 10, 6, seed=4, chunk=128)
    assert np.array_equal(g1.codes, g2.codes) and np.array_equal(q1.masks, q2.masks)
    assert not np.array_equal(g1.codes, g3.codes)
    enrolled = q1.truth != ""
    assert enrolled.sum() == 6 and set(q1.truth[enrolled]) <= set(g1.ids)
    res = match(q1, g1, 0.34)
    assert np.array_equal(res.bits, enrolled)
    assert list(np.array(res.best_ids())[enrolled]) == list(q1.truth[enrolled])
    assert np.all(np.abs(res.best_shift[enrolled]) <= IrisGenerator().max_offset)
    with pytest.raises(InvalidArgument, match="enrolled"):
        generate(5, 3, 4)


def test_binomial_model():
    assert binomial_fmr(0.5, 2) == pytest.approx(0.25)
    assert binomial_fmr(0.34, 250) == pytest.approx(2.0e-7, rel=0.5)


# -- files -------------------------------------------------------------------------------------

def test_openiris_round_trip(tmp_path):
    rng = np.random.default_rng(8)
    c, m = random_templates(rng, 3)
    items = [openiris_serialize(new_format(c[i]), new_format(m[i])) for i in range(3)]
    items[1]["image_id"] = "alice-left"
    (tmp_path / "t.json").write_text(json.dumps(items))
    one = tmp_path / "one.json"
    one.write_text(json.dumps(items[0]))
    t = read_openiris(tmp_path / "t.json")
    codes, masks = t.bits()
    assert np.array_equal(codes, c) and np.array_equal(masks, m)
    assert list(t.ids) == ["t:0", "alice-left", "t:2"] and t.version == "v0.1"
    assert np.array_equal(read_openiris(one).bits()[0][0], c[0])
    write_openiris(tmp_path / "w.json", t)
    back = json.loads((tmp_path / "w.json").read_text())
    assert back[1]["image_id"] == "alice-left"
    assert back[0]["iris_codes"] == items[0]["iris_codes"]
    got_c, got_m = openiris_deserialize(back[2])
    assert all(np.array_equal(a, b) for a, b in zip(got_c, new_format(c[2])))
    assert all(np.array_equal(a, b) for a, b in zip(got_m, new_format(m[2])))


def test_npz_round_trip_and_atomic_write(tmp_path):
    gallery, queries = generate(40, 6, 3, seed=9)
    save_templates(tmp_path / "q.npz", queries)
    back = load_templates(tmp_path / "q.npz")
    assert np.array_equal(back.codes, queries.codes) and np.array_equal(back.masks, queries.masks)
    assert list(back.ids) == list(queries.ids) and list(back.truth) == list(queries.truth)
    assert back.layout == LAYOUT
    assert np.allclose(back.mask_coverage(), queries.bits()[1].reshape(6, -1).mean(axis=1))
    assert [p.name for p in tmp_path.iterdir()] == ["q.npz"]  # no temporary left behind


def test_bad_files_give_clear_errors(tmp_path):
    rng = np.random.default_rng(10)
    c, m = random_templates(rng, 1)
    good = openiris_serialize(new_format(c[0]), new_format(m[0]))
    cases = {
        "truncated": {**good, "iris_codes": base64.b64encode(base64.b64decode(good["iris_codes"])[:-10]).decode()},
        "not valid base64": {**good, "mask_codes": "%%%not base64%%%"},
        "lacks": {k: v for k, v in good.items() if k != "mask_codes"},
        "iris_code_version": {**good, "iris_code_version": "1.0"},
    }
    for expected, obj in cases.items():
        (tmp_path / "bad.json").write_text(json.dumps(obj))
        with pytest.raises(Corrupt, match=expected):
            read_openiris(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text('{"iris_codes": ')
    with pytest.raises(Corrupt, match="not valid JSON"):
        read_openiris(tmp_path / "bad.json")
    empty_mask = openiris_serialize(new_format(c[0]), new_format(np.zeros_like(m[0])))
    (tmp_path / "bad.json").write_text(json.dumps(empty_mask))
    with pytest.raises(InvalidArgument, match="empty"):
        read_openiris(tmp_path / "bad.json")
    with pytest.raises(NotFound):
        read_openiris(tmp_path / "missing.json")

    gallery, _ = generate(20, seed=11)
    save_templates(tmp_path / "g.npz", gallery)
    raw = (tmp_path / "g.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(Corrupt, match="cut.npz"):
        load_templates(tmp_path / "cut.npz")
    np.savez(tmp_path / "other.npz", codes=np.zeros(3))
    with pytest.raises(Corrupt, match="not an encmatch iris template file"):
        load_templates(tmp_path / "other.npz")
    with pytest.raises(InvalidArgument, match="packed uint8"):
        Templates(gallery.codes[:, :-1], gallery.masks[:, :-1], gallery.ids)


# -- CLI ---------------------------------------------------------------------------------------

def test_cli_generate_match_convert(tmp_path, capsys):
    assert main(["iris", "generate", str(tmp_path), "--gallery", "300", "--queries", "8", "--enrolled", "5",
                 "--seed", "12"]) == 0
    out = tmp_path / "m.json"
    assert main(["iris", "model", str(tmp_path / "gallery.npz"), "--queries", str(tmp_path / "queries.npz"),
                 "--t", "0.34", "-o", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["rotations"] == 31 and report["gallery_size"] == 300 and len(report["eyes"]) == 8
    assert report["confusion"]["tp"] == 5 and report["confusion"]["fp"] == 0
    assert report["confusion"]["tp_right_id"] == 5
    assert all(0 <= e["min_fhd"] <= 1 for e in report["eyes"]) and "guard_band" in report

    assert main(["iris", "calibrate", str(tmp_path / "gallery.npz"), "--queries", str(tmp_path / "queries.npz"),
                 "-o", str(tmp_path / "cal.json")]) == 0
    cal = json.loads((tmp_path / "cal.json").read_text())
    assert cal["genuine_pairs"] == 5 and cal["impostor_pairs"] == 8 * 300 - 5 and set(cal["thresholds"]) == {"0.34", "0.375"}

    assert main(["iris", "convert", str(tmp_path / "queries.npz"), "-o", str(tmp_path / "q.json")]) == 0
    assert main(["iris", "model", str(tmp_path / "gallery.npz"), "--queries", str(tmp_path / "q.json"),
                 "-o", str(tmp_path / "m2.json")]) == 0
    bits = [e["bit"] for e in json.loads((tmp_path / "m2.json").read_text())["eyes"]]
    assert bits == [e["bit"] for e in report["eyes"]]

    (tmp_path / "broken.npz").write_bytes(b"PK\x03\x04 not really")
    capsys.readouterr()
    assert main(["iris", "model", str(tmp_path / "broken.npz"), "--queries", str(tmp_path / "queries.npz")]) == 2
    assert "broken.npz" in capsys.readouterr().err
