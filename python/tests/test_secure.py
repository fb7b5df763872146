"""One end-to-end run at the secure default preset (N = 2^15), kept small with dimension 8.

Marked ``secure``: deselect with ``-m 'not secure'`` for a quicker run.
"""

from __future__ import annotations

import numpy as np
import pytest

from encmatch import EncryptedIndex

from conftest import KAPPA

pytestmark = pytest.mark.secure


def test_default_preset_end_to_end(tmp_path, planted, check):
    rng = np.random.default_rng(31)
    delta = 0.8
    q = rng.standard_normal(8)
    gallery = planted(rng, q, [0.7, 0.78, 0.79, 0.81, 0.82, 0.95], 300)
    with EncryptedIndex.create(tmp_path / "ix", dim=8, preset="default", kappa=KAPPA, delta=delta) as ix:
        p = ix.params
        assert p["insecure"] is False and p["security_bits"] >= 128 and p["log_n"] == 15
        ix.add(gallery)
        _, results, scores, _ = check(ix, gallery, np.vstack([q, -q]))
        assert results["identification"][0].count == int((scores[0] >= delta).sum()) >= 3
