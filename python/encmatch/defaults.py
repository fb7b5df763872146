"""Defaults shared by the SDK, the CLI and the benchmarks.

``DEFAULT_KAPPA`` is the comparator's depth budget at which every path
creates keys unless told otherwise; it equals the core's default
(``params.DefaultKappa``; ``tests/test_index.py`` checks that they agree).
At 13 the comparator's value band is at most 0.0076 around any threshold
in (-1, 1) (docs/COMPARATOR.md), so membership counts are exact for every
search whose scores all lie outside it.
"""

DEFAULT_KAPPA = 13
