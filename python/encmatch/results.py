"""Search results, shared by the encrypted index and the plaintext brute force.

Both :class:`~encmatch.EncryptedIndex` and :mod:`encmatch.bruteforce`
return these types, so their answers compare directly:

- :class:`MembershipResult`: how many gallery entries match, and whether
  any does (``enrolled``);
- :class:`IdentificationResult`: the gallery positions that match (sorted
  ``np.ndarray`` of int64) and their labels when the gallery has labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .errors import InvalidArgument

__all__ = ["MODES", "check_mode", "MembershipResult", "IdentificationResult", "Result", "make_result"]

#: The two search modes.
MODES = ("membership", "identification")


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is a known search mode, else raise InvalidArgument."""
    if mode not in MODES:
        raise InvalidArgument(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


@dataclass(frozen=True)
class MembershipResult:
    """Answer to "is this person enrolled?".

    ``count`` is the number of gallery entries whose score is at least delta
    (rounded, for the encrypted search), ``raw_count`` the unrounded
    decrypted sum (``None`` for the brute force), ``enrolled`` is
    ``count > 0``.
    """

    count: int
    enrolled: bool
    raw_count: float | None = None
    mode: str = field(default="membership", init=False)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        return {"mode": self.mode, "count": self.count, "enrolled": self.enrolled, "raw_count": self.raw_count}


@dataclass(frozen=True, eq=False)
class IdentificationResult:
    """Answer to "which gallery entries match?".

    ``positions`` are 0-based gallery positions in enrollment order (sorted,
    int64); ``labels`` names them when the gallery was enrolled with labels
    (else ``None``).
    """

    positions: np.ndarray
    labels: list[str] | None = None
    mode: str = field(default="identification", init=False)

    @property
    def count(self) -> int:
        """Number of matching entries."""
        return int(len(self.positions))

    @property
    def enrolled(self) -> bool:
        """True if at least one entry matches."""
        return self.count > 0

    def __eq__(self, other: object) -> bool:
        """Equal when the positions (and labels, when both have them) are equal."""
        if not isinstance(other, IdentificationResult):
            return NotImplemented
        same = np.array_equal(self.positions, other.positions)
        if self.labels is not None and other.labels is not None:
            same = same and list(self.labels) == list(other.labels)
        return same

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        return {"mode": self.mode, "positions": self.positions.tolist(), "labels": self.labels}


#: Either result type.
Result = MembershipResult | IdentificationResult


def make_result(
    mode: str,
    *,
    count: float | None = None,
    raw_count: float | None = None,
    positions: Sequence[int] | np.ndarray | None = None,
    gallery_labels: Sequence[str] | None = None,
) -> Result:
    """Build the result of ``mode`` from a count or from matching positions.

    ``gallery_labels`` (one per gallery position) names the positions of an
    identification result; pass ``None`` when the gallery has no labels.
    """
    check_mode(mode)
    if mode == "membership":
        n = int(round(count if count is not None else (raw_count or 0.0)))
        return MembershipResult(count=n, enrolled=n > 0, raw_count=None if raw_count is None else float(raw_count))
    pos = np.unique(np.asarray(positions if positions is not None else [], dtype=np.int64))
    labels = None
    if gallery_labels is not None:
        labels = [str(gallery_labels[p]) if 0 <= p < len(gallery_labels) else "" for p in pos]
    return IdentificationResult(positions=pos, labels=labels)
