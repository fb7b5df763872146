"""Sizes with units, one spelling for the SDK and the command line: ``"4GB"``, ``"512 MB"``, ``"1.5GiB"``.

Every memory budget accepts such a string. A bare number keeps the unit
of where it is written: gigabytes (10^9 bytes) on the command line
(``--memory-budget 4``), bytes in the SDK (``memory_budget=4_000_000_000``,
like Python's own resource APIs), where a string must name its unit
(``"4"`` is refused: 4 bytes or 4 GB?). 0 means unlimited.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import InvalidArgument

__all__ = ["UNITS", "parse_size"]

#: Byte multipliers of the accepted units (case-insensitive): decimal and binary.
UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: Any, *, bare: str | None, what: str = "memory budget") -> int:
    """``value`` in bytes: a number counted in unit ``bare``, or a string with a unit (or without one,
    counted in ``bare``; refused when ``bare`` is None).

    InvalidArgument for a negative, non-finite or malformed value, a
    missing or unknown unit.
    """
    if isinstance(value, bool):
        raise InvalidArgument(f"{what} must be a size such as '4GB', not {value!r}")
    unit = (bare or "").lower()
    if isinstance(value, str):
        m = _SIZE.match(value)
        if not m:
            raise InvalidArgument(f"{what}: not a size: {value!r} (e.g. '4GB', '512MB', '1.5GiB')")
        if not m.group(2) and bare is None:
            raise InvalidArgument(f"{what}: {value!r} names no unit; write it with one, e.g. '{m.group(1)}GB'")
        number, unit = float(m.group(1)), (m.group(2) or bare or "").lower()
    else:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidArgument(f"{what} must be a size such as '4GB', not {value!r}") from None
    if unit not in UNITS:
        raise InvalidArgument(f"{what}: unknown unit {unit!r} (want one of {', '.join(u.upper() for u in UNITS)})")
    if not math.isfinite(number) or number < 0:
        raise InvalidArgument(f"{what} must be a non-negative size, got {value!r}")
    return int(round(number * UNITS[unit]))
