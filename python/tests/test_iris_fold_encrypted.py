"""papers/004's second algorithm by role at the INSECURE toy-fold preset: every clean answer and every
pair-pass bit equals the plaintext model outside the guard band.

One key set and one database of 1,000 codes for the module (about a
minute). The query holds five eyes at open-iris's 31 rotations: a generated
enrolled eye, a generated outsider, and three crafted from gallery eyes at
FHD 0.10 (enrolled twice, a clean match), 0.30 (a match under the design's
clean yes: flagged) and t + 0.01 (a near miss: flagged or a clean no); a
sixth eye has sixteen neighbouring gallery entries that all match it (FHD
0.10 to 0.30: a clean match). The flagged eyes go through the pair pass.
A second database crowds the threshold at every rotation at once (codes
that are the same at every rotation, entries just either side of t).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from encmatch.cli import main
from encmatch.errors import InvalidArgument
from encmatch.iris import encrypted as E
from encmatch.iris import POPULATIONS, folding, generate, match, save_templates
from encmatch.iris.encoding import LAYOUT
from encmatch.iris.templates import Templates

T = 0.34


def _flip_to(code: np.ndarray, mask: np.ndarray, fhd: float, rng) -> np.ndarray:
    """A copy of ``code`` with round(fhd * usable) of its usable bits flipped."""
    code = code.copy()
    usable = np.flatnonzero(mask.reshape(-1))
    flat = code.reshape(-1)
    pick = rng.choice(usable, size=int(round(fhd * len(usable))), replace=False)
    flat[pick] = flat[pick] == 0
    return code


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Key set, gallery (code 3 enrolled twice, 16 matches of eye 5 at its end), six query eyes, the
    database at t = 0.34."""
    d = tmp_path_factory.mktemp("iris-fold")
    E.keygen(d / "keys", preset="toy-fold")
    gen = dataclasses.replace(POPULATIONS["daugman"], max_offset=3)
    gallery, queries = generate(999, n_queries=2, n_enrolled=1, seed=17, generator=gen)
    rng = np.random.default_rng(3)
    gc, gm = gallery.bits()
    xc, xm = generate(1, seed=123)[0].bits()
    neighbours = np.stack([_flip_to(xc[0], xm[0], fhd, rng) for fhd in np.linspace(0.10, 0.30, 16)])
    gallery = Templates.from_bits(np.concatenate([gc, gc[3:4], neighbours]),
                                  np.concatenate([gm, gm[3:4], np.repeat(xm, 16, axis=0)]))
    crafted = [(_flip_to(gc[k], gm[k], fhd, rng), gm[k]) for k, fhd in ((3, 0.10), (500, 0.30), (900, T + 0.01))]
    qc, qm = queries.bits()
    batch = Templates.from_bits(np.concatenate([qc, np.stack([c for c, _ in crafted]), xc]),
                                np.concatenate([qm, np.stack([m for _, m in crafted]), xm]))
    E.Client(d / "keys").enroll(gallery, d / "db", T)
    return d, gallery, batch


def test_fold_and_pair_passes_equal_the_model(setup, tmp_path):
    """Fold pass, answers, pair pass on the flagged eyes, combined bits: equal to the model."""
    d, gallery, batch = setup
    keys, db = d / "keys", d / "db"
    q, r, r2 = tmp_path / "q.bin", tmp_path / "r.bin", tmp_path / "r2.bin"
    E.Querier(keys).encrypt(batch, q)
    stats = E.Server(keys).search(db, q, r)
    assert stats["fold"]["pass"] == "fold" and stats["fold"]["refreshes"] > 0 and stats["half_bootstraps"] == 0
    fold = E.Client(keys).decrypt(r)
    assert isinstance(fold, E.FoldValues) and not fold.pairs and fold.eyes == 6
    model = match(batch, gallery, T)
    assert model.bits.tolist() == [False, True, True, True, False, True], model.best_fhd
    answers = fold.answers()
    assert answers[2] == answers[5] == E.MATCH and answers[0] == E.NO_MATCH, (fold.sure, fold.maybe)
    assert answers[3] == E.FLAGGED, (fold.sure, fold.maybe)  # FHD 0.30: under the design's clean yes
    flagged = fold.flagged()
    bits, undecided = E.combine(fold)
    assert undecided.tolist() == flagged
    pstats = E.Server(keys).search(db, q, r2, pair_eyes=flagged)
    assert pstats["fold"]["pass"] == "pairs" and pstats["fold"]["listed"] == len(flagged)
    pairs = E.Client(keys).decrypt(r2)
    assert pairs.pairs and pairs.listed.tolist() == flagged and pairs.maybe is None
    band = E.Client(keys).band(T)
    assert 0 < band < 0.05, band
    v = E.validate_fold(fold, pairs, model, E.FOLD_GUARD, band)
    assert v.ok and not v.uncertain, v.to_dict()
    bits, undecided = E.combine(fold, pairs)
    assert bits.tolist() == model.bits.tolist() and len(undecided) == 0
    with pytest.raises(InvalidArgument):
        E.combine(fold, dataclasses.replace(pairs, listed=pairs.listed[:0], sure=pairs.sure[:0]))
    with pytest.raises(InvalidArgument):
        pairs.answers()


def test_cli_fold_roles(setup, tmp_path, capsys):
    """keygen/enroll/query/match/decrypt through the CLI: flagged eyes named, --pair-eyes, --pairs --validate,
    the product kept between the passes (--product); bad input exits 2."""
    d, gallery, batch = setup
    keys, db = d / "keys", d / "db"
    save_templates(tmp_path / "gallery.npz", gallery)
    save_templates(tmp_path / "queries.npz", batch.select(slice(3, 4)))  # FHD 0.30: flagged
    q, r, r2, kept = tmp_path / "q.bin", tmp_path / "r.bin", tmp_path / "r2.bin", tmp_path / "product.bin"
    assert main(["iris", "query", "--keys", str(keys), str(tmp_path / "queries.npz"), "-o", str(q)]) == 0
    assert main(["iris", "match", "--keys", str(keys), "--db", str(db), str(q), "-o", str(r), "--product", str(kept)]) == 0
    assert kept.is_file() and not json.loads(capsys.readouterr().out)["product_from_file"]
    assert main(["iris", "decrypt", "--keys", str(keys), str(r), "--pad-to", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answers"] == ["flagged"] and out["flagged"] == [0] and out["pair_eyes"] == [0], out
    eyes = ",".join(map(str, out["flagged"]))
    assert main(["iris", "match", "--keys", str(keys), "--db", str(db), str(q), "-o", str(r2), "--pair-eyes", eyes,
                 "--product", str(kept)]) == 0
    assert json.loads(capsys.readouterr().out)["product_from_file"]
    assert main(["iris", "decrypt", "--keys", str(keys), str(r), "--pairs", str(r2), "--validate", "--db", str(db),
                 "--gallery", str(tmp_path / "gallery.npz"), "--queries", str(tmp_path / "queries.npz")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bits"] == [True] and out["validation"]["ok"], out
    # Bad input: another query's kept product, an eye the query does not have, a pair result given as the
    # fold's, a design for another t.
    q2 = tmp_path / "q2.bin"
    save_templates(tmp_path / "other.npz", batch.select(slice(2, 3)))
    assert main(["iris", "query", "--keys", str(keys), str(tmp_path / "other.npz"), "-o", str(q2)]) == 0
    assert main(["iris", "match", "--keys", str(keys), "--db", str(db), str(q2), "-o", str(tmp_path / "x.bin"),
                 "--pair-eyes", "0", "--product", str(kept)]) == 2
    assert "another query" in capsys.readouterr().err
    assert main(["iris", "match", "--keys", str(keys), "--db", str(db), str(q), "-o", str(tmp_path / "x.bin"),
                 "--pair-eyes", "7"]) == 2
    assert main(["iris", "decrypt", "--keys", str(keys), str(r2)]) == 2
    (tmp_path / "design.json").write_text(json.dumps(folding.design(0.3, **E.FOLD_DESIGN).to_dict()))
    assert main(["iris", "enroll", "--keys", str(keys), "--db", str(tmp_path / "db2"), "--t", "0.34",
                 "--design", str(tmp_path / "design.json"), str(tmp_path / "gallery.npz")]) == 2
    assert not (tmp_path / "db2" / "db.json").exists()
    with pytest.raises(SystemExit) as e:
        main(["iris", "match", "--keys", str(keys), "--db", str(db), str(q), "-o", str(r2), "--pair-eyes", "a,b"])
    assert e.value.code == 2


def _ring_template(rings: np.ndarray, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A template whose 64 rings (row, filter, part) are constant along the angular axis (every rotation
    is the same template): ring values ``rings`` and mask ``usable`` (64 bools each)."""
    rows, cols, filters, parts = LAYOUT
    spread = lambda v: np.repeat(np.asarray(v, bool).reshape(rows, 1, filters, parts), cols, axis=1)  # noqa: E731
    return spread(rings), spread(usable)


def test_threshold_crowded_at_every_rotation(setup, tmp_path):
    """A hostile gallery: query eyes whose code is the same at every rotation, and gallery entries that
    sit near the threshold at all 31 rotations at once (every fold group adds sixteen equal near-threshold
    terms). 64 rings of 256 bits: flipping whole rings sets one FHD for every rotation; the eyes' codes are
    16 rings apart, so an entry crafted for one eye is far from every other.

    eye 0: 24 entries at FHD 22/64 = 0.34375 (score margin -0.0075: outside the fold's guard 0.005, inside
    the pair band); eye 1: 24 entries at 23/64 (-0.039: outside every band); eye 2: 24 entries at 23/64 and
    one at 21/64 (+0.023: a match outside every band); eye 3: 12 entries at exactly t (17 of 50 usable
    rings: FHD = t is no match, inside every band). Every bit is discretised to 0 or 1, also inside a band;
    every clean answer and every pair bit outside its band equals the model; eyes 1 and 2 get their exact
    bit. (Measured: the fold flags all four eyes, the pair pass answers 0, 0, 1, 1.)"""
    d, _, _ = setup
    keys = d / "keys"
    rng = np.random.default_rng(11)
    background, _ = generate(400, n_queries=1, n_enrolled=0, seed=5)
    # Rings: a block of 8 per eye (eye k's code is a common code with its block flipped, so two eyes'
    # codes are 16 rings apart) and 32 free rings where entries take their flips (an entry of eye j is
    # then 16 + its flips from any other eye's code: far from the threshold).
    perm = rng.permutation(64)
    blocks, free = perm[:32].reshape(4, 8), perm[32:]
    common = rng.integers(0, 2, 64).astype(bool)
    usable = np.ones((4, 64), bool)
    usable[3, free[:14]] = False  # eye 3: 50 usable rings
    base = np.repeat(common[None], 4, axis=0)
    for k in range(4):
        base[k, blocks[k]] ^= True
    plan = [(0, 22, 24), (1, 23, 24), (2, 23, 24), (2, 21, 1), (3, 17, 12)]
    bc, bm = background.bits()
    codes, masks = [bc], [bm]
    for eye, flips, n in plan:
        choices = free[14:] if eye == 3 else free
        for _ in range(n):
            rings = base[eye].copy()
            rings[rng.choice(choices, size=flips, replace=False)] ^= True
            c, m = _ring_template(rings, usable[eye])
            codes.append(c[None])
            masks.append(m[None])
    gallery = Templates.from_bits(np.concatenate(codes), np.concatenate(masks))
    eyes = [_ring_template(base[k], usable[k]) for k in range(4)]
    batch = Templates.from_bits(np.stack([c for c, _ in eyes]), np.stack([m for _, m in eyes]))
    model = match(batch, gallery, T)
    assert model.bits.tolist() == [False, False, True, False], model.best_fhd
    db, q, r, r2, kept = tmp_path / "db", tmp_path / "q.bin", tmp_path / "r.bin", tmp_path / "r2.bin", tmp_path / "p.bin"
    E.Client(keys).enroll(gallery, db, T)
    E.Querier(keys).encrypt(batch, q)
    E.Server(keys).search(db, q, r, product=kept)
    fold = E.Client(keys).decrypt(r)
    answers = fold.answers()
    decided = lambda v: np.all(np.minimum(np.abs(v), np.abs(v - 1)) <= E.DECIDED)  # noqa: E731
    assert decided(fold.sure) and decided(fold.maybe), (fold.sure, fold.maybe)  # discretised, in a band or not
    assert answers[0] != E.MATCH and answers[1] != E.MATCH and answers[2] != E.NO_MATCH, (fold.sure, fold.maybe)
    pairs = None
    if fold.flagged():  # padded with one unflagged eye where there is one: its fold answer stands
        E.Server(keys).search(db, q, r2, pair_eyes=fold.pair_eyes(min(4, len(fold.flagged()) + 1)), product=kept)
        pairs = E.Client(keys).decrypt(r2)
        assert decided(pairs.sure), pairs.sure  # eyes 0 and 3 lie inside the pair band: discretised to 0 or 1
    band = E.Client(keys).band(T)
    v = E.validate_fold(fold, pairs, model, E.FOLD_GUARD, band)
    assert v.ok, (v.to_dict(), fold.sure, fold.maybe)
    bits, undecided = E.combine(fold, pairs)
    assert bits[1:3].tolist() == [False, True] and not {1, 2} & set(undecided.tolist()), (bits, undecided)
