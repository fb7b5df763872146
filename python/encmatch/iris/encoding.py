"""Iris templates as masked bitvectors: checks, the ternary encoding, rotations, score and distance.

A template is an iris code ``c`` and a mask ``m``, both in ``{0, 1}^l``
(``m = 1`` where the bit is usable). Arrays keep open-iris's serialised
layout ``(rows, columns, filters, 2)`` = ``(16, 256, 2, 2)`` (``l = 16384``):
rows are radial, columns the 256 angular positions, then one plane per
Gabor filter and its real/imaginary part (open-iris ``IrisTemplate``
"old format", ``iris/io/dataclasses.py``).

papers/004 Eq. 2 (after Bloemen et al.): ``c' = m (1 - 2c)`` in
``{-1, 0, 1}^l``; the score of two templates is
``<c'_1, c'_2> / |m_1 and m_2|``, which equals ``1 - 2 FHD`` where FHD is
the fractional Hamming distance over the common mask; a pair matches when
``score > 1 - 2t`` for a Hamming threshold ``t`` (``FHD < t``).

Rotations follow open-iris's ``HammingDistanceMatcher``
(``iris/nodes/matcher/utils.py``, ``get_bitcounts``): the probe's code AND
mask are ``np.roll``-ed by ``shift`` columns along the angular axis, for
shifts ``0, -1, 1, ..., -s, s`` with ``s = rotation_shift = 15``, i.e.
``rho = 2s + 1 = 31`` rotations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgument

__all__ = [
    "LAYOUT",
    "ANGULAR_AXIS",
    "DEFAULT_ROTATION_SHIFT",
    "check_layout",
    "check_bits",
    "check_template",
    "masked_bits",
    "shifts",
    "rotate",
    "rotations",
    "score",
    "fhd",
    "score_threshold",
    "is_match",
]

#: open-iris's template layout (rows, angular columns, filters, real/imaginary).
LAYOUT: tuple[int, ...] = (16, 256, 2, 2)
#: Axis of ``LAYOUT`` along which rotations shift (the 256 angular columns).
ANGULAR_AXIS = 1
#: open-iris ``HammingDistanceMatcher`` default: shifts of -15..15 columns, 31 rotations.
DEFAULT_ROTATION_SHIFT = 15


def check_layout(layout: Any) -> tuple[int, ...]:
    """Return ``layout`` as a tuple of 4 positive ints ``(rows, columns, filters, 2)``, or raise."""
    try:
        out = tuple(int(x) for x in layout)
    except (TypeError, ValueError):
        raise InvalidArgument(f"layout: expected 4 positive integers, got {layout!r}") from None
    if len(out) != 4 or min(out) < 1:
        raise InvalidArgument(f"layout: expected 4 positive integers (rows, columns, filters, 2), got {out}")
    return out


def check_bits(x: Any, name: str, layout: tuple[int, ...] = LAYOUT) -> np.ndarray:
    """Return ``x`` as a bool array of shape ``layout`` or ``(n, *layout)``.

    Accepts bool arrays and numbers that are exactly 0 or 1; raises
    :class:`~encmatch.errors.InvalidArgument` on any other shape or value
    (NaN, 2, 0.5...).
    """
    arr = np.asarray(x)
    if arr.shape[-len(layout):] != tuple(layout) or arr.ndim not in (len(layout), len(layout) + 1):
        raise InvalidArgument(f"{name}: expected shape {tuple(layout)} or (n, *{tuple(layout)}), got {arr.shape}")
    if arr.dtype == bool:
        return arr
    if not (np.issubdtype(arr.dtype, np.number) and not np.iscomplexobj(arr)):
        raise InvalidArgument(f"{name}: expected bits (bool or 0/1 numbers), got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
        raise InvalidArgument(f"{name}: contains NaN")
    if not np.isin(arr, (0, 1)).all():
        bad = arr[~np.isin(arr, (0, 1))].flat[0]
        raise InvalidArgument(f"{name}: values must be 0 or 1, found {bad!r}")
    return arr.astype(bool)


def check_template(code: Any, mask: Any, layout: tuple[int, ...] = LAYOUT) -> tuple[np.ndarray, np.ndarray]:
    """Checked ``(code, mask)`` bool arrays of the same shape; every mask must keep at least one bit."""
    c = check_bits(code, "code", layout)
    m = check_bits(mask, "mask", layout)
    if c.shape != m.shape:
        raise InvalidArgument(f"code has shape {c.shape}, mask {m.shape}")
    flat = m.reshape(-1, int(np.prod(layout)))
    empty = np.flatnonzero(~flat.any(axis=1))
    if empty.size:
        raise InvalidArgument(f"mask of template {int(empty[0])} is empty (no usable bit); {empty.size} such template(s)")
    return c, m


def masked_bits(code: np.ndarray, mask: np.ndarray, dtype: Any = np.int8) -> np.ndarray:
    """``c' = m (1 - 2c)`` flattened to ``[..., l]``: +1 where the bit is 0, -1 where it is 1, 0 where masked.

    ``code`` and ``mask`` are bool arrays of shape ``(*lead, *layout)`` with
    a 4-axis layout.
    """
    lead = code.shape[:-4]
    c = code.reshape(*lead, -1)
    m = mask.reshape(*lead, -1)
    return (m.astype(dtype) * (1 - 2 * c.astype(dtype))).astype(dtype)


def shifts(rotation_shift: int = DEFAULT_ROTATION_SHIFT) -> np.ndarray:
    """The column shifts in open-iris's order: ``[0, -1, 1, ..., -s, s]`` (``2s + 1`` of them)."""
    s = int(rotation_shift)
    if s < 0:
        raise InvalidArgument(f"rotation_shift must be >= 0, got {rotation_shift}")
    return np.array([0] + [y for x in range(1, s + 1) for y in (-x, x)], dtype=np.int64)


def rotate(bits: np.ndarray, shift: int) -> np.ndarray:
    """``bits`` ``(..., rows, columns, filters, 2)`` rolled by ``shift`` columns (open-iris: ``np.roll(code, shift, axis=1)``)."""
    return np.roll(bits, int(shift), axis=bits.ndim - 4 + ANGULAR_AXIS)


def rotations(
    code: np.ndarray, mask: np.ndarray, rotation_shift: int = DEFAULT_ROTATION_SHIFT
) -> tuple[np.ndarray, np.ndarray]:
    """All rotations of templates ``(..., *layout)``: ``(codes, masks)`` of shape ``(..., rho, *layout)``.

    Rotation ``r`` is the shift ``shifts(rotation_shift)[r]``, applied to
    code and mask alike (what the querier encrypts, papers/004 section 2.1.2).
    """
    lead = code.ndim - 4
    out_c = np.stack([rotate(code, s) for s in shifts(rotation_shift)], axis=lead)
    out_m = np.stack([rotate(mask, s) for s in shifts(rotation_shift)], axis=lead)
    return out_c, out_m


def _pair(c1: Any, m1: Any, c2: Any, m2: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two single templates of the same 4-axis layout, checked, as bool arrays; raises when the masks share no bit."""
    layout = np.shape(c1)
    if len(layout) != 4:
        raise InvalidArgument(f"code: expected one template of shape (rows, columns, filters, 2), got {layout}")
    c1, m1 = check_template(c1, m1, layout)
    c2, m2 = check_template(c2, m2, layout)
    if c2.shape != layout:
        raise InvalidArgument(f"the templates have shapes {layout} and {c2.shape}")
    if not (m1 & m2).any():
        raise InvalidArgument("the two masks have no usable bit in common: score and distance are undefined")
    return c1, m1, c2, m2


def score(c1: Any, m1: Any, c2: Any, m2: Any) -> float:
    """papers/004 Eq. 2 score ``<c'_1, c'_2> / |m_1 and m_2|`` of two templates, in ``[-1, 1]``."""
    c1, m1, c2, m2 = _pair(c1, m1, c2, m2)
    dot = int(np.dot(masked_bits(c1, m1, np.int64), masked_bits(c2, m2, np.int64)))
    return dot / int(np.count_nonzero(m1 & m2))


def fhd(c1: Any, m1: Any, c2: Any, m2: Any) -> float:
    """Fractional Hamming distance ``|(c_1 xor c_2) and m_1 and m_2| / |m_1 and m_2|`` (open-iris, no normalisation)."""
    c1, m1, c2, m2 = _pair(c1, m1, c2, m2)
    common = m1 & m2
    return int(np.count_nonzero((c1 ^ c2) & common)) / int(np.count_nonzero(common))


def score_threshold(t: float) -> float:
    """The score threshold ``1 - 2t`` of a fractional Hamming threshold ``t`` in ``(0, 1)``."""
    t = float(t)
    if not 0.0 < t < 1.0:
        raise InvalidArgument(f"Hamming threshold t must be in (0, 1), got {t}")
    return 1.0 - 2.0 * t


def is_match(s: Any, t: float) -> np.ndarray | bool:
    """``score > 1 - 2t`` (strict, like ``FHD < t``), elementwise for arrays.

    At an exact tie (``FHD == t``) the rounding of ``1 - 2t`` can make this
    true where ``FHD < t`` is false; :func:`encmatch.iris.model.match`
    decides on ``FHD < t`` like open-iris.
    """
    out = np.asarray(s) > score_threshold(t)
    return bool(out) if out.ndim == 0 else out
