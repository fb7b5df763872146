"""papers/004's second algorithm by role at the INSECURE toy-fold preset: every clean answer and every
pair-pass bit equals the plaintext model outside the guard band.

One key set and one database of 1,000 codes for the module (about a
minute). The query holds five eyes at open-iris's 31 rotations: a generated
enrolled eye, a generated outsider, and three crafted from gallery eyes at
FHD 0.10 (enrolled twice, a clean match), 0.30 (a match under the design's
clean yes: flagged) and t + 0.01 (a near miss: flagged or a clean no); a
sixth eye has sixteen neighbouring gallery entries that all match it (FHD
0.10 to 0.30: a clean match). The flagged eyes go through the pair pass.
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
    assert main(["iris", "decrypt", "--keys", str(keys), str(r)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answers"] == ["flagged"] and out["flagged"] == [0], out
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
