"""Real photos (shared/data: LFW, ORL) through the face pipeline, the CLI, calibration and the accuracy report.

Re-embedding a stored photo must give (nearly) its stored embedding: the
pipeline is the one in shared/data/lfw/SOURCE.txt. Encrypted runs use the
toy preset.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from encmatch.faces import embed_photos, load_model
from encmatch.faces.images import Photo
from encmatch.faces.models import MFN_PATH

from conftest import KAPPA, TOY, run_cli

pytestmark = [pytest.mark.data, pytest.mark.faces]

LFW = ["Al_Gore/Al_Gore_0001.jpg", "Aaron_Peirsol/Aaron_Peirsol_0002.jpg", "Abdullah_Gul/Abdullah_Gul_0003.jpg",
       "Ai_Sugiyama/Ai_Sugiyama_0001.jpg", "Alan_Greenspan/Alan_Greenspan_0004.jpg"]
ORL = ["s1/1.pgm", "s5/3.pgm", "s10/5.pgm", "s20/2.pgm", "s33/5.pgm", "s40/10.pgm"]


@pytest.fixture(scope="module")
def mfn():
    """The MobileFaceNet model (skips when `make models` has not run)."""
    if not MFN_PATH.is_file():
        pytest.skip("MobileFaceNet weights not built (run `make models`)")
    return load_model("mobilefacenet")


def stored(data_dir, dataset, model, files):
    """Stored embeddings (and norms, for dlib) of ``files`` and the Photo objects to re-embed them."""
    with np.load(data_dir / dataset / f"embeddings_{model}.npz") as z:
        row = {f: i for i, f in enumerate(z["file"])}
        idx = [row[f] for f in files]
        emb = z["emb"][idx]
        norm = z["norm"][idx] if "norm" in z.files else None
    photos = [Photo(data_dir / dataset / "images" / f, f.split("/")[0], f) for f in files]
    return emb, norm, photos


@pytest.mark.parametrize("dataset, files", [("lfw", LFW), ("orl", ORL)])
def test_mobilefacenet_reproduces_stored_embeddings(data_dir, mfn, dataset, files):
    ref, _, photos = stored(data_dir, dataset, "mfn", files)
    out = embed_photos(photos, mfn, progress=False)
    assert out.files == files and out.emb.shape == (len(files), 192)
    assert np.allclose(np.linalg.norm(out.emb, axis=1), 1, atol=1e-5)
    cos = np.sum(out.emb * ref, axis=1)
    assert cos.min() > 0.99 and np.median(cos) > 0.995, cos
    # and it is the right person: far closer to its own stored embedding than to any other in the set
    with np.load(data_dir / dataset / "embeddings_mfn.npz") as z:
        best = np.argmax(out.emb @ z["emb"].T, axis=1)
        assert [str(f) for f in z["file"][best]] == files


@pytest.mark.parametrize("dataset, files", [("lfw", LFW[:3]), ("orl", ORL[:3])])
def test_dlib_reproduces_stored_embeddings(data_dir, dataset, files):
    ref, norm, photos = stored(data_dir, dataset, "dlib", files)
    out = embed_photos(photos, "dlib", progress=False)
    assert out.emb.shape == (len(files), 128)
    assert np.sum(out.emb * ref, axis=1).min() > 0.9999
    assert np.allclose(out.norm, norm, rtol=1e-4)


def test_grey_cmyk_and_group_photos(data_dir, mfn, tmp_path):
    src = data_dir / "lfw" / "images" / LFW[0]
    im = Image.open(src)
    im.convert("L").save(tmp_path / "grey.jpg", quality=95)
    im.convert("CMYK").save(tmp_path / "cmyk.jpg", quality=95)
    other = np.asarray(Image.open(data_dir / "lfw" / "images" / LFW[1]))
    canvas = np.full((250, 750, 3), 128, np.uint8)
    canvas[:, 250:500] = np.asarray(im)  # the centre face
    canvas[:, :250] = other
    Image.fromarray(canvas).save(tmp_path / "two.png")
    out = embed_photos([src, tmp_path / "grey.jpg", tmp_path / "cmyk.jpg", tmp_path / "two.png"], mfn, progress=False)
    assert len(out) == 4 and out.faces == [1, 1, 1, 2]
    cos = out.emb @ out.emb[0]
    assert cos[2] > 0.999 and cos[3] > 0.99  # CMYK, and the centre face of the group photo
    assert 0.9 < cos[1] < 0.99  # grey: the colour is gone, the person is not
    assert [str(p) for p in out.problems] == [f"note: {tmp_path / 'two.png'}: 2 faces: used the one nearest the centre"]
    skip = embed_photos([tmp_path / "two.png"], mfn, multiple="skip", progress=False)
    assert len(skip) == 0 and skip.problems[0].skipped and "several faces (2" in skip.problems[0].reason


def ok(proc, code=0):
    """Assert the exit code and that no traceback was printed; return the process."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_cli_photos_to_encrypted_search(data_dir, mfn, keysets, tmp_path):
    orl = data_dir / "orl" / "images"
    people = tmp_path / "people"
    for k in range(1, 7):
        (people / f"s{k}").mkdir(parents=True)
        (people / f"s{k}" / "1.pgm").write_bytes((orl / f"s{k}" / "1.pgm").read_bytes())
    (people / "s6" / "broken.jpg").write_text("not a photo")
    gallery = tmp_path / "gallery.npz"
    p = ok(run_cli("embed", people, "-o", gallery))  # a skipped photo is listed and counted, not exit 2
    assert "skipped: " in p.stderr and "broken.jpg: not an image" in p.stderr
    assert "embedded 6 of 7 photo(s) with mobilefacenet" in p.stderr and "1 input(s) skipped" in p.stdout
    with np.load(gallery) as z:
        assert str(z["model"]) == "mobilefacenet" and list(z["name"]) == [f"s{k}" for k in range(1, 7)]

    keys = keysets(192)
    index = tmp_path / "index"
    more = tmp_path / "more" / "s7"
    more.mkdir(parents=True)
    (more / "1.pgm").write_bytes((orl / "s7" / "1.pgm").read_bytes())
    (more / "broken.jpg").write_text("not a photo")  # a photo that cannot be used: listed, left out, exit 0
    p = ok(run_cli("enroll", "--keys", keys, "--index", index, "--delta", 0.5, gallery, more.parent))
    assert "enrolled 7 vectors" in p.stdout and "face model: mobilefacenet" in p.stdout
    assert "broken.jpg: not an image" in p.stderr and "note: 1 photo(s) skipped" in p.stderr
    assert json.loads((index / "face-model.json").read_text())["model"] == "mobilefacenet"

    out = tmp_path / "r.bin"
    ok(run_cli("query", "--keys", keys, "--index", index, "--out", out, orl / "s3" / "5.pgm"))
    answer = json.loads(ok(run_cli("decrypt", "--keys", keys, "--index", index, "--json", out)).stdout)
    assert answer["labels"] == ["s3"]
    ok(run_cli("query", "--keys", keys, "--index", index, "--out", out, orl / "s7" / "4.pgm"))
    answer = json.loads(ok(run_cli("decrypt", "--keys", keys, "--index", index, "--json", out)).stdout)
    assert answer["labels"] == ["s7"]

    # another model's query or gallery is refused
    p = ok(run_cli("query", "--keys", keys, "--index", index, "--model", "dlib", "--out", out, orl / "s3" / "5.pgm"), 2)
    assert "mobilefacenet" in p.stderr and "dlib" in p.stderr
    dlib_npz = tmp_path / "dlib.npz"
    ok(run_cli("embed", "--model", "dlib", people / "s1", "-o", dlib_npz))
    p = ok(run_cli("enroll", "--keys", keys, "--index", index, dlib_npz), 2)
    assert "different models" in p.stderr and "nothing to enroll" in p.stderr
    p = ok(run_cli("query", "--keys", keys, "--index", index, "--out", out, dlib_npz), 2)
    assert "different models" in p.stderr
    # a photo without a face as the query
    p = ok(run_cli("query", "--keys", keys, "--index", index, "--out", out, people / "s6" / "broken.jpg"), 2)
    assert "error: " in p.stderr and "not an image" in p.stderr


def test_cli_calibrate_orl(data_dir, tmp_path):
    npz = data_dir / "orl" / "embeddings_mfn.npz"
    res = json.loads(ok(run_cli("calibrate", npz, "--target-fmr", "1e-3", "--json")).stdout)
    assert res["ok"] and res["stats"]["genuine"]["n"] == 1800 and res["stats"]["impostor"]["n"] == 78000
    assert res["threshold"] == pytest.approx(0.4855, abs=2e-4)  # shared/data/orl/SOURCE.txt: thr@FMR1e-3=0.4855
    fnmr = {t["fmr"]: t["fnmr"] for t in res["thresholds"]}
    assert fnmr[1e-3] == pytest.approx(0.0183, abs=6e-4)
    assert 0 < res["delta"] - res["threshold"] <= 2 * res["bands"]["decision_band"]  # threshold + the band
    assert res["worst_fmr"] <= 1e-3
    plot = tmp_path / "hist.png"
    p = ok(run_cli("calibrate", npz, "--target-fmr", "1e-3", "--delta", 0.3, "--plot", plot), 1)
    assert "verdict: FAIL" in p.stdout and plot.stat().st_size > 10_000
    ok(run_cli("calibrate", npz, "--model", "dlib"), 2)  # 192-d vectors are not dlib's


def test_cli_accuracy_orl(data_dir, tmp_path):
    npz = data_dir / "orl" / "embeddings_mfn.npz"
    plot = tmp_path / "roc.png"
    p = ok(run_cli("accuracy", npz, "--preset", TOY, "--kappa", KAPPA, "--probes", 10, "--seed", 3,
                   "--json", "--plot", plot))
    res = json.loads(p.stdout.splitlines()[0])
    assert res["ok"] and res["errors"] == 0 and "INSECURE" in p.stderr
    names = [pt["name"] for pt in res["points"]]
    assert names == ["EER", "FAR 1%", "FAR 0.1%", "delta"]
    for pt in res["points"]:
        plain, enc = pt["plaintext"], pt["encrypted"]
        assert plain["tp"] + plain["fp"] + plain["tn"] + plain["fn"] == 20 * 10
        assert enc["tp"] + enc["fp"] + enc["tn"] + enc["fn"] == 20 * 10
        # outside the decision band the encrypted decisions are the plaintext ones
        assert pt["errors"] == 0 and abs(enc["tp"] - plain["tp"]) + abs(enc["fp"] - plain["fp"]) <= pt["disagreements"]
    assert set(res["encrypted"]["tar_at_far"]) == {"0.01", "0.001"}
    assert 0 <= res["plaintext"]["eer"] <= 0.5 and "eer" not in res["encrypted"]  # no ROC, no EER: match bits
    at = res["encrypted"]["at_eer_threshold"]
    assert at["genuine_pairs"] == 5 and at["impostor_pairs"] == 20 * 10 - 5 and at["outside_band"] == 0
    assert plot.stat().st_size > 10_000
