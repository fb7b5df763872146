"""Photos in without real faces: image modes, bad files, ids, model records, the ROC helpers.

These tests make their own images (grey, 16-bit, CMYK, RGBA, truncated,
huge, not an image) and embedding files, so they need neither the shared
data nor a face.
"""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from encmatch.evaluation.accuracy import Roc, split
from encmatch.evaluation.calibrate import ScoreDistributions, calibrate
from encmatch.data import FaceSet
from encmatch.errors import InvalidArgument, Mismatch
from encmatch.faces import (
    BadPhoto,
    check_model,
    collect,
    embed_photos,
    file_model,
    find_photos,
    index_model,
    load_image,
    record_index_model,
    save_embeddings,
)
from encmatch.faces.detect import ARCFACE_TEMPLATE, similarity_lstsq, warp_affine

from conftest import run_cli


def rgb_image(w=64, h=48):
    """A colour gradient, uint8 [h, w, 3]."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) % 256], axis=-1).astype(np.uint8)


def huge_png_header(path, w=20000, h=20000):
    """A PNG whose header claims ``w`` x ``h`` pixels (no pixel data): it must be refused unread."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                     + chunk(b"IEND", b""))


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA", "P", "CMYK", "I;16", "1", "LA"])
def test_load_image_any_mode_gives_rgb(tmp_path, mode):
    img = Image.fromarray(rgb_image())
    if mode == "I;16":
        img = Image.fromarray((np.asarray(img.convert("L"), np.uint16) * 257).astype(np.uint16))
        assert img.mode.startswith("I")
    else:
        img = img.convert(mode)
    path = tmp_path / ("x.jpg" if mode == "CMYK" else "x.png" if mode != "1" else "x.pgm")
    if mode == "1":
        img.convert("L").save(path)
    else:
        img.save(path)
    arr = load_image(path)
    assert arr.dtype == np.uint8 and arr.shape == (48, 64, 3)
    if mode in ("L", "I;16", "LA"):  # grey copied to all three channels, 16 bits divided by 257
        grey = np.asarray(Image.fromarray(rgb_image()).convert("L"))
        assert np.array_equal(arr[..., 0], grey) and np.array_equal(arr[..., 1], grey)
        assert np.array_equal(arr[..., 2], grey)
    if mode == "CMYK":  # CMYK JPEG back in RGB: close to the original colours
        assert np.abs(arr.astype(int) - rgb_image().astype(int)).mean() < 12


def test_load_image_shrinks_large_and_refuses_huge(tmp_path):
    big = tmp_path / "big.jpg"
    Image.fromarray(np.zeros((1200, 3000, 3), np.uint8)).save(big)
    assert load_image(big, max_side=1000).shape == (400, 1000, 3)
    huge = tmp_path / "huge.png"
    huge_png_header(huge, 12000, 10000)
    with pytest.raises(BadPhoto, match="too large: 12000 x 10000 = 120 megapixels"):
        load_image(huge)
    huge_png_header(huge)  # 400 megapixels: Pillow itself refuses to open it
    with pytest.raises(BadPhoto, match="too large"):
        load_image(huge)


@pytest.mark.parametrize("content, reason", [
    (b"this is not an image", "not an image"),
    (b"", "not an image"),
])
def test_load_image_bad_files(tmp_path, content, reason):
    p = tmp_path / "bad.jpg"
    p.write_bytes(content)
    with pytest.raises(BadPhoto, match=reason):
        load_image(p)


def test_load_image_truncated_and_missing(tmp_path):
    good = tmp_path / "good.jpg"
    Image.fromarray(rgb_image(300, 300)).save(good, quality=95)
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(good.read_bytes()[:600])
    with pytest.raises(BadPhoto, match="cannot read|truncated"):
        load_image(cut)
    with pytest.raises(BadPhoto, match="no such file"):
        load_image(tmp_path / "nothere.jpg")


def test_find_photos_ids(tmp_path):
    for rel in ("people/alice/1.jpg", "people/alice/2.JPG", "people/bob/a.png", "people/carol.jpg",
                "people/notes.txt", "people/.hidden/x.jpg"):
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")
    photos, missing = find_photos([tmp_path / "people", tmp_path / "people" / "bob" / "a.png", tmp_path / "nope"])
    got = [(p.name, p.id) for p in photos]
    assert got == [("alice/1.jpg", "alice"), ("alice/2.JPG", "alice"), ("bob/a.png", "bob"),
                   ("carol.jpg", "carol"), (str(tmp_path / "people" / "bob" / "a.png"), "a")]
    assert [str(m[0]) for m in missing] == [str(tmp_path / "nope")]
    photos, _ = find_photos([tmp_path / "people"], rule="folder")
    assert {p.id for p in photos} == {"alice", "bob", "people"}
    photos, _ = find_photos([tmp_path / "people"], rule="file")
    assert [p.id for p in photos] == ["1", "2", "a", "carol"]


def test_embed_reports_bad_photos_and_faceless_images(tmp_path):
    pytest.importorskip("dlib")
    (tmp_path / "in").mkdir()
    Image.fromarray(rgb_image(160, 120)).save(tmp_path / "in" / "gradient.png")  # an image without a face
    (tmp_path / "in" / "text.jpg").write_text("no image here")
    huge_png_header(tmp_path / "in" / "huge.png")
    out = embed_photos([tmp_path / "in", tmp_path / "missing.jpg"], "dlib", progress=False)
    assert len(out) == 0 and out.photos == 3
    reasons = {p.path.rsplit("/", 1)[-1]: p.reason for p in out.problems}
    assert reasons["gradient.png"] == "no face found"
    assert reasons["text.jpg"].startswith("not an image")
    assert reasons["huge.png"].startswith("image too large")
    assert reasons["missing.jpg"] == "no such file or folder"
    assert all(p.skipped for p in out.problems)
    assert "skipped 4" in out.summary()
    with pytest.raises(InvalidArgument, match="nothing to write"):
        out.save(tmp_path / "x.npz")


def test_embeddings_file_records_the_model(tmp_path):
    rng = np.random.default_rng(0)
    path = save_embeddings(tmp_path / "g.npz", rng.standard_normal((3, 192)), ["b", "a", "b"], "mobilefacenet",
                           file=np.array(["1.jpg", "2.jpg", "3.jpg"]))
    assert path == tmp_path / "g.npz" and file_model(path) == "mobilefacenet"
    with np.load(path) as z:
        assert list(z["names"]) == ["a", "b"] and list(z["label"]) == [1, 0, 1] and list(z["name"]) == ["b", "a", "b"]
        assert list(z["file"]) == ["1.jpg", "2.jpg", "3.jpg"]
    with pytest.raises(InvalidArgument, match="192-d"):
        save_embeddings(tmp_path / "bad.npz", np.ones((2, 128)), ["a", "b"], "mobilefacenet")
    np.savez(tmp_path / "plain.npz", emb=np.ones((2, 4)))
    assert file_model(tmp_path / "plain.npz") is None and file_model(tmp_path / "x.npy") is None
    check_model("dlib", None, "x")  # unknown on one side: only the dimension can be checked
    with pytest.raises(Mismatch, match="different models"):
        check_model("mobilefacenet", "dlib", "query.npz")


def test_index_model_record(tmp_path):
    assert index_model(tmp_path) is None
    record_index_model(tmp_path, None)
    assert index_model(tmp_path) is None
    record_index_model(tmp_path, "mfn")
    assert index_model(tmp_path) == "mobilefacenet"
    assert json.loads((tmp_path / "face-model.json").read_text())["dim"] == 192
    record_index_model(tmp_path, "mobilefacenet")
    with pytest.raises(Mismatch):
        record_index_model(tmp_path, "dlib")


def test_collect_skips_wrong_dimension_and_model_keeps_the_rest(tmp_path):
    rng = np.random.default_rng(1)
    save_embeddings(tmp_path / "mfn.npz", rng.standard_normal((4, 192)), list("abcd"), "mobilefacenet")
    save_embeddings(tmp_path / "dlib.npz", rng.standard_normal((2, 128)), list("xy"), "dlib")
    np.save(tmp_path / "plain.npy", rng.standard_normal((3, 192)))
    np.save(tmp_path / "short.npy", rng.standard_normal((3, 100)))
    (tmp_path / "notes.txt").write_text("x")
    got = collect([tmp_path / f for f in ("mfn.npz", "dlib.npz", "plain.npy", "short.npy", "notes.txt", "gone.npz")],
                  dim=192)
    assert got.vectors.shape == (7, 192) and got.model == "mobilefacenet"
    assert got.labels == list("abcd") + ["", "", ""]
    why = {p.path.rsplit("/", 1)[-1]: p.reason for p in got.problems}
    assert set(why) == {"dlib.npz", "short.npy", "notes.txt", "gone.npz"}
    assert "different models" in why["dlib.npz"] and "dimension 100" in why["short.npy"]
    assert "neither a photo" in why["notes.txt"] and "no such file" in why["gone.npz"]


def test_similarity_and_warp():
    rng = np.random.default_rng(2)
    ang, scale, shift = 0.3, 1.7, np.array([5.0, -3.0])
    rot = scale * np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
    dst = ARCFACE_TEMPLATE @ rot.T + shift
    m = similarity_lstsq(ARCFACE_TEMPLATE, dst + rng.normal(0, 1e-9, dst.shape))
    assert np.allclose(m[:, :2], rot, atol=1e-6) and np.allclose(m[:, 2], shift, atol=1e-6)
    img = rng.integers(0, 256, (20, 30, 3)).astype(np.uint8)
    same = warp_affine(img, np.array([[1.0, 0, 0], [0, 1.0, 0]]), 20)
    assert np.array_equal(same[:, :20], img[:, :20].astype(float))
    half = warp_affine(img, np.array([[1.0, 0, 0.5], [0, 1.0, 0]]), 10)  # half a pixel right: the mean of two
    assert np.allclose(half[:, :9], (img[:10, :9].astype(float) + img[:10, 1:10]) / 2)
    outside = warp_affine(img, np.array([[1.0, 0, 100], [0, 1.0, 0]]), 5)
    assert not outside.any()


def test_roc_thresholds_sit_between_scores():
    genuine = np.array([0.9, 0.8, 0.7, 0.45])
    impostor = np.concatenate([np.linspace(-0.5, 0.4, 997), [0.5, 0.6, 0.75]])
    top = np.sort(impostor)[::-1]
    roc = Roc.from_scores(genuine, impostor)
    tar, t = roc.at_far(0.01)  # 10 impostors may pass: midway between the 11th and the 10th highest
    assert t == pytest.approx((top[10] + top[9]) / 2) and tar == 1.0
    tar, t = roc.at_far(0.001)  # one impostor (0.75) may pass
    assert t == pytest.approx((0.6 + 0.7) / 2) and tar == 0.75
    eer, t = roc.eer()  # between 0.4 and 0.45: FAR 3/1000, FRR 0 - the closest the two rates get
    assert t == pytest.approx(0.425) and eer == pytest.approx(0.0015)


def test_calibrate_on_separable_scores():
    emb = np.eye(6)[[0, 0, 1, 1, 2, 2]] + 0.01 * np.arange(6)[:, None]  # pairs of near-identical vectors
    d = ScoreDistributions.from_labelled(emb, [0, 0, 1, 1, 2, 2], block=2)
    assert d.n_genuine == 3 and d.n_impostor == 12
    cal = calibrate(d, target_fmr=0.25, kappa=10, gallery_size=100)  # 12 pairs support FMR >= 3/12 (rule of three)
    assert cal.ok and cal.delta > cal.threshold and cal.checks["fnmr"] == 0.0 and cal.checks["fmr"] <= 0.25
    assert "verdict: OK" in cal.report()
    bad = calibrate(d, target_fmr=0.25, kappa=10, delta=-0.5)
    assert not bad.ok and "FAIL" in bad.report()


def test_split_protocol():
    label = np.repeat(np.arange(10), [3, 3, 3, 3, 2, 2, 1, 1, 1, 1])
    faces = FaceSet(emb=np.random.default_rng(3).standard_normal((len(label), 8)), label=label,
                    names=np.array([f"p{i}" for i in range(10)]))
    sp = split(faces, probes=8, seed=1)
    assert len(sp.gallery) == 3 and len(set(sp.gallery_ids)) == 3
    assert len(sp.probes) == 8 and sp.mated.sum() == 4
    truth = sp.truth
    assert truth[sp.mated].sum(axis=1).tolist() == [1] * 4 and truth[~sp.mated].sum() == 0


def test_cli_embed_without_faces_exits_2(tmp_path):
    (tmp_path / "x.jpg").write_text("not a photo")
    p = run_cli("embed", tmp_path / "x.jpg", "-o", tmp_path / "out.npz")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "skipped: " in p.stderr and "error: no face was embedded" in p.stderr
    assert not (tmp_path / "out.npz").exists()
