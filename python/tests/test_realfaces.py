"""Real faces (ORL and LFW, MobileFaceNet 192-d) with queries whose best score lies near the threshold.

Genuine pairs spread down to the threshold, so these are the cases where
a comparator that is wrong near delta shows up (shared/data/README.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from encmatch.evaluation.bruteforce import cosine_scores
from encmatch.data import build_scenario

pytestmark = pytest.mark.data

#: Thresholds at FMR 1e-3 from shared/data/README.md.
ORL_DELTA = 0.486
LFW_DELTA = 0.457


def near_threshold(gallery, candidates, delta, per_side=3, lo=0.02, hi=0.1):
    """Indices of candidates whose best gallery score is ``lo..hi`` above (and below) delta."""
    best = cosine_scores(gallery, candidates).max(axis=1)
    gap = best - delta
    above = np.flatnonzero((gap >= lo) & (gap <= hi))[:per_side]
    below = np.flatnonzero((-gap >= lo) & (-gap <= hi))[:per_side]
    assert len(above) == per_side and len(below) == per_side, "not enough near-threshold queries"
    return np.concatenate([above, below])


def test_orl_near_threshold(orl, new_index, check):
    # One image per person in the gallery; the other 360 are candidate queries.
    rows = np.arange(len(orl))
    first = np.array([rows[orl.label == k][0] for k in np.unique(orl.label)])
    rest = np.setdiff1d(rows, first)
    gallery = orl.emb[first]
    labels = [str(x) for x in orl.name[first]]
    pick = near_threshold(gallery, orl.emb[rest], ORL_DELTA)
    queries = orl.emb[rest][pick]

    ix = new_index(192, ORL_DELTA)
    ix.add(gallery, labels=labels)
    report, results, scores, bands = check(ix, gallery, queries, labels=labels)
    best = scores.max(axis=1)
    assert np.all(np.abs(best - ORL_DELTA) >= 0.02) and np.all(np.abs(best - ORL_DELTA) <= 0.1)
    # Above the threshold: found, with the right names; below: nothing.
    for i in range(3):
        assert results["membership"][i].enrolled
        assert results["identification"][i].labels
    for i in range(3, 6):
        assert not results["membership"][i].enrolled
        assert results["identification"][i].count == 0


def test_lfw_full_group_near_threshold(lfw, new_index, check):
    sc = build_scenario(lfw, size=2048, n_known=0, n_unknown=0, n_enrolled=1024, seed=5)
    rng = np.random.default_rng(5)
    candidates = lfw.emb[rng.choice(len(lfw), 3000, replace=False)]
    pick = near_threshold(sc.gallery, candidates, LFW_DELTA)
    queries = candidates[pick]

    ix = new_index(192, LFW_DELTA)
    ix.add(sc.gallery, labels=sc.gallery_labels)
    assert len(ix) == 2048
    report, results, scores, _ = check(ix, sc.gallery, queries, labels=sc.gallery_labels)
    assert report.identification.errors == 0 and report.membership.errors == 0
    for i in range(3):
        assert results["identification"][i].count >= 1
    for i in range(3, 6):
        assert results["identification"][i].count == 0
