"""Iris templates for encrypted 1:N search: encoding, plaintext model, synthetic data, open-iris files.

::

    from encmatch.iris import generate, match

    gallery, queries = generate(16384, n_queries=32, n_enrolled=16, seed=0)
    res = match(queries, gallery, t=0.34)          # 31 rotations per eye
    res.bits                                       # one bit per query eye
    res.guard_band(0.005)                          # eyes an approximate comparator may flip

- :mod:`~encmatch.iris.encoding`: ``c' = m (1 - 2c)``, rotations (open-iris
  convention), score ``<c'_1, c'_2> / |m_1 and m_2| = 1 - 2 FHD``;
- :mod:`~encmatch.iris.templates`: batches of templates as packed bits;
- :mod:`~encmatch.iris.model`: the plaintext model of the encrypted search
  (one bit per eye; masks, hence the normaliser, public to the server);
- :mod:`~encmatch.iris.generator`: seeded synthetic codes and masks
  calibrated to about 250 degrees of freedom;
- :mod:`~encmatch.iris.calibration`: impostor/genuine statistics, FMR/FNMR;
- :mod:`~encmatch.iris.openiris`: open-iris JSON and the project's ``.npz``;
- :mod:`~encmatch.iris.folding`: papers/004's fold polynomial, made sound
  for any gallery, and the plaintext model of folded answers;
- :mod:`~encmatch.cli.iris`: ``encmatch iris generate|match|calibrate|convert``.

``docs/IRIS.md`` describes the choices and the calibration.
"""

from .calibration import measure
from .encoding import DEFAULT_ROTATION_SHIFT, LAYOUT, fhd, masked_bits, rotations, score, shifts
from .generator import POPULATIONS, IrisGenerator, generate
from .model import EyeResults, Normalisation, confusion, match
from .openiris import load_templates, read_openiris, read_templates, save_templates, write_openiris
from .templates import NOT_ENROLLED, Templates

__all__ = [
    "LAYOUT",
    "DEFAULT_ROTATION_SHIFT",
    "masked_bits",
    "rotations",
    "shifts",
    "score",
    "fhd",
    "Templates",
    "NOT_ENROLLED",
    "match",
    "confusion",
    "EyeResults",
    "Normalisation",
    "generate",
    "IrisGenerator",
    "POPULATIONS",
    "measure",
    "read_openiris",
    "write_openiris",
    "save_templates",
    "load_templates",
    "read_templates",
]
