"""Reading a folding result without encryption: answers, the pair pass's padded list, and combine's
handling of flagged, padded and contradicting eyes (decrypted values built by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from encmatch.errors import InvalidArgument
from encmatch.iris import encrypted as E


def _fold(sure, maybe) -> E.FoldValues:
    n = len(sure)
    return E.FoldValues(pairs=False, eyes=n, listed=np.arange(n), sure=np.asarray(sure, float), maybe=np.asarray(maybe, float))


def _pairs(eyes: int, listed, sure) -> E.FoldValues:
    return E.FoldValues(pairs=True, eyes=eyes, listed=np.asarray(listed), sure=np.asarray(sure, float), maybe=None)


# eyes: 0 match, 1 no match, 2 flagged (maybe only), 3 flagged (a sure bit in its band), 4..7 no match
FOLD = _fold([1, 0, 0, 0.6, 0, 0, 0, 0], [1, 0, 1, 1, 0, 0, 0, 0])


def test_answers_and_flagged():
    assert FOLD.answers().tolist() == [E.MATCH, E.NO_MATCH, E.FLAGGED, E.FLAGGED] + [E.NO_MATCH] * 4
    assert FOLD.flagged() == [2, 3]


def test_pair_eyes_pads_with_random_unflagged_eyes():
    assert FOLD.pair_eyes() == [2, 3] and FOLD.pair_eyes(2) == [2, 3]
    seen = set()
    for _ in range(200):
        eyes = FOLD.pair_eyes(5)
        assert len(eyes) == 5 and eyes == sorted(set(eyes)) and {2, 3} <= set(eyes), eyes
        seen |= set(eyes) - {2, 3}
    assert seen == {0, 1, 4, 5, 6, 7}  # every unflagged eye is drawn (the chance of missing one: 6 (5/6)^600)
    assert FOLD.pair_eyes(8) == list(range(8))
    with pytest.raises(InvalidArgument):
        FOLD.pair_eyes(9)
    with pytest.raises(InvalidArgument):
        FOLD.pair_eyes(-1)


def test_combine_flagged_and_padded():
    bits, undecided = E.combine(FOLD)
    assert bits.tolist()[:2] == [True, False] and undecided.tolist() == [2, 3]
    # the pair pass on exactly the flagged eyes
    bits, undecided = E.combine(FOLD, _pairs(8, [2, 3], [1, 0]))
    assert bits.tolist() == [True, False, True, False, False, False, False, False] and not len(undecided)
    # padded: a padded eye keeps its fold answer; agreeing pair bits change nothing
    bits, undecided = E.combine(FOLD, _pairs(8, [0, 2, 3, 6], [1, 1, 0, 0]))
    assert bits.tolist() == [True, False, True, False, False, False, False, False] and not len(undecided)
    # a padded eye whose decided pair bit contradicts its clean fold answer is undecided, not silently flipped
    bits, undecided = E.combine(FOLD, _pairs(8, [0, 2, 3, 6], [1, 1, 0, 1]))
    assert bits[6] == False and undecided.tolist() == [6]  # noqa: E712 (numpy bool)
    # a flagged eye's pair bit inside its band is undecided
    bits, undecided = E.combine(FOLD, _pairs(8, [2, 3], [0.5, 0]))
    assert undecided.tolist() == [2]
    # the pair pass must cover every flagged eye
    with pytest.raises(InvalidArgument):
        E.combine(FOLD, _pairs(8, [2, 6], [1, 0]))
    with pytest.raises(InvalidArgument):
        E.combine(FOLD, _pairs(9, [2, 3], [1, 0]))
