"""Near the threshold: encrypted membership and identification equal brute force outside the comparator's bands.

Issue 13, part 5. Real faces (LFW and ORL, MobileFaceNet 192-d, from
shared/data) with delta at FMR 1e-3 and 1e-4 of each set's own impostor
scores, and a generated gallery of 16,384 whose scores crowd delta +- 0.05
(toy preset); the same crowding at the default (secure) preset in a test
marked ``secure``.

For every probe none of whose scores lies within the *value band* of delta,
the decrypted membership count and the enrolled bit must equal brute force
exactly; probes with scores inside the band are counted (and their count
only bounded: ``#(s >= delta + band) - 0.5 .. #(s >= delta - band) + 0.5``).
Identification must equal brute force for every entry outside the
*decision band*. The bands are the core's (``encmatch.params.comparator``)
for the index's own kappa and delta, and no test passes kappa: they follow
the default depth, whatever comparator the core has. Assertion messages
list every probe: exact and encrypted counts, the raw decrypted count, how
many scores lay inside the band.
"""

from __future__ import annotations

import numpy as np
import pytest

import encmatch
from encmatch import EncryptedIndex
from encmatch.evaluation.bruteforce import cosine_scores
from encmatch.evaluation.calibrate import ScoreDistributions
from encmatch.params import comparator

from nearthreshold import at_scores, default_kappa, filler, index_bands, judge, orthonormal, search_and_judge

TOY = "toy"

# ---------------------------------------------------------------------------
# Real faces: LFW and ORL with delta at FMR 1e-3 and 1e-4
# ---------------------------------------------------------------------------

#: How each set is split: identities enrolled, gallery images per enrolled identity,
#: faces used to measure the impostor distribution (None: all).
FACE_SETUP = {
    "lfw": {"enrolled_ids": 2048, "per_id": 1, "calibration_faces": 4000},
    "orl": {"enrolled_ids": 30, "per_id": 5, "calibration_faces": None},
}
#: Probes searched per index: near the band but outside it (asserted exact), and inside it (counted).
PER_POOL_OUTSIDE = 2
PER_POOL_INSIDE = 1


def impostor_threshold(faces, fmr: float, n_faces: int | None, seed: int = 13) -> tuple[float, int]:
    """Delta at false-match rate ``fmr``: the impostor score quantile of ``faces`` (a fixed subset of ``n_faces``)."""
    rng = np.random.default_rng(seed)
    rows = np.arange(len(faces)) if n_faces is None or n_faces >= len(faces) else np.sort(
        rng.choice(len(faces), n_faces, replace=False))
    e = faces.emb[rows].astype(np.float64)
    e = (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)
    lab = faces.label[rows]
    gen, imp = [], []
    cols = np.arange(len(rows))
    for start in range(0, len(rows), 1000):
        r = np.arange(start, min(start + 1000, len(rows)))
        s = e[r] @ e.T
        upper = cols[None, :] > r[:, None]
        same = lab[r][:, None] == lab[None, :]
        gen.append(s[upper & same])
        imp.append(s[upper & ~same])
    dist = ScoreDistributions.from_scores(np.concatenate(gen), np.concatenate(imp))
    assert dist.n_impostor * fmr >= 5, f"{dist.n_impostor} impostor pairs cannot support FMR {fmr}"
    return dist.threshold_at_fmr(fmr), dist.n_impostor


def split_faces(faces, enrolled_ids: int, per_id: int, seed: int = 7):
    """Gallery (``per_id`` images of ``enrolled_ids`` identities) and probe pools: enrolled and not enrolled."""
    rng = np.random.default_rng(seed)
    ids, counts = np.unique(faces.label, return_counts=True)
    eligible = ids[counts >= per_id]
    enrolled = rng.choice(eligible, min(enrolled_ids, len(eligible)), replace=False)
    is_enrolled = np.isin(faces.label, enrolled)
    gallery_rows = []
    for i in enrolled:
        rows = rng.permutation(np.flatnonzero(faces.label == i))
        gallery_rows.extend(rows[:per_id].tolist())
    gallery_rows = np.array(gallery_rows)
    in_gallery = np.zeros(len(faces), dtype=bool)
    in_gallery[gallery_rows] = True
    pool_in = np.flatnonzero(is_enrolled & ~in_gallery)
    pool_out = np.flatnonzero(~is_enrolled)
    if len(pool_out) > 3000:
        pool_out = np.sort(rng.choice(pool_out, 3000, replace=False))
    return gallery_rows, pool_in, pool_out


def pick_probes(scores: np.ndarray, delta: float, vb: float, n_outside: int, n_inside: int, rng) -> tuple[list, int]:
    """Probes of one pool: the ones whose nearest score is closest to the band from outside
    (matches and non-matches alike), and a few with scores inside the band.

    Returns (row indices into the pool, number of pool probes with a score inside the band).
    """
    gap = np.min(np.abs(scores - delta), axis=1)
    best = scores.max(axis=1)
    outside = gap > vb
    above = np.flatnonzero(outside & (best >= delta))
    below = np.flatnonzero(outside & (best < delta))
    above = above[np.argsort(gap[above])]
    below = below[np.argsort(gap[below])]
    n_above = (n_outside + 1) // 2
    chosen = list(above[:n_above]) + list(below[: n_outside - min(n_above, len(above))])
    chosen += [x for x in above[n_above:] if x not in chosen][: max(0, n_outside - len(chosen))]
    inside = np.flatnonzero(~outside & (np.abs(best - delta) <= 0.1))
    if len(inside):
        chosen += list(rng.choice(inside, min(n_inside, len(inside)), replace=False))
    return [int(x) for x in chosen], int(np.sum(~outside))


@pytest.fixture(scope="module")
def face_keys(tmp_path_factory):
    """One toy key set for 192-d faces at the default kappa (no kappa passed), shared by the real-face indexes."""
    d = tmp_path_factory.mktemp("near-threshold-keys") / "keys"
    encmatch.Client.generate(d, preset=TOY, dim=192).close()
    return d


def index_on_keys(tmp_path, keys, delta: float) -> EncryptedIndex:
    """An empty index with threshold ``delta`` over the shared key set."""
    path = tmp_path / "ix"
    path.mkdir()
    (path / "keys").symlink_to(keys, target_is_directory=True)
    encmatch.Enroller(path / "keys" / "server").create_index(path / "index", delta)
    return EncryptedIndex(path)


@pytest.fixture(scope="module")
def folded_face_keys(tmp_path_factory):
    """A folded toy key set for 192-d faces (96 complex diagonals per group)."""
    d = tmp_path_factory.mktemp("near-threshold-folded-keys") / "keys"
    encmatch.Client.generate(d, preset=TOY, dim=192, fold=True).close()
    return d


@pytest.mark.data
@pytest.mark.parametrize("fmr", [1e-3, 1e-4], ids=["fmr1e-3", "fmr1e-4"])
@pytest.mark.parametrize("dataset", ["lfw", "orl"])
def test_real_faces_near_threshold(request, tmp_path, face_keys, dataset, fmr):
    real_faces_near_threshold(request, tmp_path, face_keys, dataset, fmr)


@pytest.mark.data
@pytest.mark.parametrize("dataset", ["lfw", "orl"])
def test_real_faces_near_threshold_folded(request, tmp_path, folded_face_keys, dataset):
    """The same on a folded key set (the vectors' halves in complex slots, the real part taken by the server)."""
    real_faces_near_threshold(request, tmp_path, folded_face_keys, dataset, 1e-3)


def real_faces_near_threshold(request, tmp_path, face_keys, dataset: str, fmr: float) -> None:
    """Real faces of ``dataset`` with delta at ``fmr``, searched under ``face_keys``: every probe outside the band exact."""
    faces = request.getfixturevalue(dataset)
    setup = FACE_SETUP[dataset]
    delta, n_imp = impostor_threshold(faces, fmr, setup["calibration_faces"])
    gallery_rows, pool_in, pool_out = split_faces(faces, setup["enrolled_ids"], setup["per_id"])
    gallery = faces.emb[gallery_rows]
    labels = [str(x) for x in faces.name[gallery_rows]]
    with index_on_keys(tmp_path, face_keys, delta) as ix:
        bands = index_bands(ix)
        vb = bands["value_band"]
        rng = np.random.default_rng(11)
        probes, names, in_band_pool = [], [], {}
        for pool_name, pool in (("enrolled", pool_in), ("not enrolled", pool_out)):
            sc = cosine_scores(gallery, faces.emb[pool])
            rows, in_band_pool[pool_name] = pick_probes(sc, delta, vb, PER_POOL_OUTSIDE, PER_POOL_INSIDE, rng)
            probes.extend(pool[rows].tolist())
            names.extend(f"{pool_name} #{int(pool[r])}" for r in rows)
        ix.add(gallery, labels=labels, progress=False)
        assert len(ix) == len(gallery)
        j = search_and_judge(f"{dataset.upper()} at FMR {fmr:g} (gallery {len(gallery)}, {n_imp:,} impostor pairs)",
                             ix, gallery, faces.emb[probes], names)
    pools = ", ".join(f"{k} {v} of {len(pool_in) if k == 'enrolled' else len(pool_out)}"
                      for k, v in in_band_pool.items())
    msg = "\n" + j.report() + f"\n  candidate probes with a score inside the value band: {pools}"
    print(msg)
    assert not j.failures, msg
    assert j.n_exact >= 1, "no probe had every score outside the value band: nothing was asserted exact" + msg


# ---------------------------------------------------------------------------
# A generated gallery of 16,384 whose scores crowd delta
# ---------------------------------------------------------------------------

#: The synthetic threshold (LFW MobileFaceNet at FMR 1e-3, shared/data/README.md).
SYNTH_DELTA = 0.457


def crowded_gallery(rng, dim: int, n: int, delta: float, vb: float, scale: float = 1.0):
    """A gallery of ``n`` unit vectors and four orthonormal probes whose scores crowd ``delta``.

    W = max(0.05, band + 0.02) is the crowd's half-width (delta +- 0.05 once
    the band is below 0.03). Probe scores, by probe (``scale`` shrinks the
    crowds for a smaller gallery):

    0. crowd outside the band: uniform over [delta - W, delta - band) and
       (delta + band, delta + W], plus a dense set within 1e-4..1e-3 of
       both band edges; exact count required.
    1. 1,000 scores at delta - band - 1e-3 and 3 at delta + band + 1e-3:
       count exactly 3.
    2. everything below the band, half of it within 1e-4..2e-3 of its
       lower edge: count 0, not enrolled.
    3. uniform over delta +- W, inside the band included: count bounded.

    Every other gallery score of a probe is 0 (vectors planted for another
    probe) or uniform in [-0.3, 0.3] (filler).
    """
    probes = orthonormal(rng, dim, 4)
    W = max(0.05, vb + 0.02)
    k = lambda m: max(1, int(round(m * scale)))  # noqa: E731
    crowds = [
        np.concatenate([rng.uniform(delta - W, delta - vb - 1e-4, k(2400)),
                        rng.uniform(delta + vb + 1e-4, delta + W, k(2400)),
                        delta - vb - rng.uniform(1e-4, 1e-3, k(300)),
                        delta + vb + rng.uniform(1e-4, 1e-3, k(300))]),
        np.concatenate([np.full(1000, delta - vb - 1e-3), np.full(3, delta + vb + 1e-3)]),
        np.concatenate([delta - vb - rng.uniform(1e-4, 2e-3, k(1500)),
                        rng.uniform(delta - W, delta - vb - 1e-4, k(1500))]),
        rng.uniform(delta - W, delta + W, k(2000)),
    ]
    parts = [at_scores(rng, probes, j, s) for j, s in enumerate(crowds)]
    planted = sum(len(p) for p in parts)
    assert planted < n and delta - W > 0.3
    parts.append(filler(rng, probes, n - planted, 0.3))
    gallery = np.vstack(parts)[rng.permutation(n)].astype(np.float32)
    names = ["crowd outside the band", "1000 just below, 3 just above", "all below the band", "crowd through the band"]
    return gallery, probes, names


def check_crowded(title: str, ix: EncryptedIndex, gallery, probes, names, ident=(0, 3)):
    """Membership for every probe, identification for ``ident``; assert the promise and return the report."""
    bands = index_bands(ix)
    scores = cosine_scores(gallery, probes)
    member = ix.search(probes, "membership", progress=False)
    jm = judge(title + ", membership", bands, scores, names, membership=member)
    ident = list(ident)
    identified = ix.search(probes[ident], "identification", progress=False) if ident else []
    ji = judge(title + ", identification", bands, scores[ident], [names[i] for i in ident],
               identification=identified)
    msg = "\n" + jm.report() + "\n" + ji.report()
    print(msg)
    assert not jm.failures and not ji.failures, msg
    by_name = {p.name: p for p in jm.probes}
    # The constructed cases are what they claim to be, so the exact ones were asserted exact.
    for name in names[:3]:
        assert by_name[name].exact_case, f"{name}: a score fell inside the band" + msg
    assert by_name[names[1]].count == 3 and by_name[names[2]].count == 0 and not by_name[names[2]].enrolled, msg
    return msg


def test_crowded_gallery_toy(tmp_path):
    n, dim = 16384, 16
    with EncryptedIndex.create(tmp_path / "ix", dim=dim, preset=TOY, delta=SYNTH_DELTA, expected_size=n) as ix:
        vb = index_bands(ix)["value_band"]
        gallery, probes, names = crowded_gallery(np.random.default_rng(2024), dim, n, SYNTH_DELTA, vb)
        ix.add(gallery, progress=False)
        assert len(ix) == n and len(ix.info()["groups"]) == n // ix.params["group_size"] == 8
        check_crowded(f"generated gallery of {n:,} (toy)", ix, gallery, probes, names)


@pytest.mark.secure
def test_crowded_gallery_default_preset(tmp_path):
    """The same crowding at the default preset (N = 2^15): one group of 16,384, dimension 8."""
    n, dim = 16384, 8
    with EncryptedIndex.create(tmp_path / "ix", dim=dim, preset="default", delta=SYNTH_DELTA, expected_size=n) as ix:
        p = ix.params
        assert p["insecure"] is False and p["security_bits"] >= 128 and p["log_n"] == 15 and p["group_size"] == n
        vb = index_bands(ix)["value_band"]
        gallery, probes, names = crowded_gallery(np.random.default_rng(77), dim, n, SYNTH_DELTA, vb)
        ix.add(gallery, progress=False)
        check_crowded(f"generated gallery of {n:,} (default preset)", ix, gallery, probes, names, ident=(0, 3))


# ---------------------------------------------------------------------------
# The default depth
# ---------------------------------------------------------------------------


def test_default_value_band_at_most_001():
    """Issue 13, part 1: at the default depth the value band is at most 0.01 for every delta."""
    kappa = default_kappa(TOY, 64)
    bands = {d: comparator(kappa, d)["value_band"] for d in (-0.5, 0.0, 0.3, SYNTH_DELTA, 0.541, 0.6, 0.8, 0.95)}
    wide = {d: round(b, 4) for d, b in bands.items() if b > 0.01}
    assert not wide, f"default kappa {kappa}: value band above 0.01 at delta (band): {wide}"
