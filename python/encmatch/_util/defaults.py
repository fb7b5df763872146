"""Defaults shared by the SDK, the CLI and the benchmarks: the comparator's depth budget and the presets.

``DEFAULT_KAPPA`` is the comparator's depth budget at which every path
creates keys unless told otherwise; it equals the core's default
(``params.DefaultKappa``; ``tests/test_index.py`` checks that they agree).
At 13 the comparator's value band is at most 0.0076 around any threshold
in (-1, 1) (docs/COMPARATOR.md), so membership counts are exact for every
search whose scores all lie outside it.
"""

DEFAULT_KAPPA = 13

#: The core's parameter presets (``params.Presets``; ``tests/test_index.py`` checks that they agree):
#: ``default`` and ``real`` give 128-bit security, ``toy`` and ``toy-real`` none (tests only).
PRESETS = ("default", "real", "toy", "toy-real")

#: The preset every path uses unless told otherwise.
DEFAULT_PRESET = "default"
