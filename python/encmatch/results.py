"""Search results, shared by the encrypted index and the plaintext brute force.

Both :class:`~encmatch.EncryptedIndex` and :mod:`encmatch.evaluation.bruteforce`
return these types, so their answers compare directly:

- :class:`MembershipResult`: how many gallery entries match, and whether
  any does (``enrolled``);
- :class:`IdentificationResult`: the gallery positions that match (sorted
  ``np.ndarray`` of int64) and their labels when the gallery has labels;
- :class:`PayloadResult`: the payloads (int16 ``[k, W]``) of the matching
  records of an index enrolled with payloads, sorted by payload then
  position, with the exact count and whether the answer is complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from .errors import InvalidArgument, PayloadIncomplete

__all__ = ["MODES", "PAYLOAD", "SEARCH_MODES", "DEFAULT_BOUND", "MAX_BOUND", "check_mode", "check_bound",
           "check_search",
           "MembershipResult", "IdentificationResult", "PayloadResult", "Result", "make_result",
           "payload_result", "incomplete_message", "require_complete", "sort_records"]

#: The two search modes every index answers.
MODES = ("membership", "identification")

#: The payload fetch mode: only indexes created with ``payload_width > 0`` answer it.
PAYLOAD = "payload"

#: Every search mode (:data:`MODES` and :data:`PAYLOAD`).
SEARCH_MODES = MODES + (PAYLOAD,)

#: Default public bound on the number of matches of a payload search (the result's size depends only on it).
DEFAULT_BOUND = 32

#: The largest bound the core accepts.
MAX_BOUND = 4096


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is a known search mode (:data:`SEARCH_MODES`), else raise InvalidArgument."""
    if not isinstance(mode, str) or mode not in SEARCH_MODES:
        raise InvalidArgument(f"unknown mode {mode!r}; expected one of {', '.join(SEARCH_MODES)}")
    return mode


def check_bound(bound: object) -> int:
    """``bound`` (the public bound on the matches of a payload search) as an int in 1..:data:`MAX_BOUND`;
    ``None`` is :data:`DEFAULT_BOUND`. InvalidArgument otherwise."""
    if bound is None:
        return DEFAULT_BOUND
    if isinstance(bound, bool) or not isinstance(bound, (int, np.integer)) or not 1 <= int(bound) <= MAX_BOUND:
        raise InvalidArgument(f"bound must be an integer from 1 to {MAX_BOUND} (the public bound on the number "
                              f"of matches), got {bound!r}")
    return int(bound)


def check_search(mode: object, bound: object) -> int | None:
    """A search's ``mode`` (:func:`check_mode`) and its ``bound``: the payload
    mode's as :func:`check_bound` gives it (``None``: the default), ``None``
    for the other modes, which take none (InvalidArgument when given one)."""
    check_mode(mode)
    if mode == PAYLOAD:
        return check_bound(bound)
    if bound is not None:
        raise InvalidArgument(f"bound is the payload mode's, not the {mode} mode's")
    return None


@dataclass(frozen=True)
class MembershipResult:
    """Answer to "is this person enrolled?".

    ``count`` is the number of gallery entries whose score is at least delta
    (rounded, for the encrypted search), ``raw_count`` the unrounded
    decrypted sum (``None`` for the brute force), ``enrolled`` is
    ``count > 0``. ``approximate`` says the decrypted sum was farther than
    1e-3 from an integer: scores within the comparator's value band of
    delta added fractions, so the count may be off by their number.
    """

    count: int
    enrolled: bool
    raw_count: float | None = None
    approximate: bool = False
    #: The index's threshold, when the decryption checked the result against it (else ``None``).
    delta: float | None = None
    mode: str = field(default="membership", init=False)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        return {"mode": self.mode, "count": self.count, "enrolled": self.enrolled, "raw_count": self.raw_count,
                "approximate": self.approximate}


@dataclass(frozen=True, eq=False)
class IdentificationResult:
    """Answer to "which gallery entries match?".

    ``positions`` are 0-based gallery positions in enrollment order (sorted,
    int64); ``labels`` names them when the gallery was enrolled with labels
    (else ``None``). ``uncertain`` are the positions whose decrypted value
    was not clean (a score within the comparator's value band of delta, an
    exact tie included): each is in ``positions`` or not as the index's rule
    decides its value, and is flagged rather than silently rounded.
    """

    positions: np.ndarray
    labels: list[str] | None = None
    uncertain: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: The index's threshold, when the decryption checked the result against it (else ``None``).
    delta: float | None = None
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
        return {"mode": self.mode, "positions": self.positions.tolist(), "labels": self.labels,
                "uncertain": self.uncertain.tolist()}


@dataclass(frozen=True, eq=False)
class PayloadResult:
    """Answer of a payload search: the payloads of the records that match.

    ``payloads`` is int16 ``[k, W]`` sorted lexicographically by payload,
    then by position (as the fetch-by-similarity workload wants them);
    ``positions[i]`` is the gallery position of ``payloads[i]`` and
    ``labels[i]`` its label when the gallery has labels. ``count`` is the
    exact number of matching records, which may exceed ``bound``;
    ``complete`` is False when ``count > bound`` or when some matches
    could not be separated (``unresolved``): then ``payloads`` holds only
    what could be decoded, never a silently truncated answer passed off as
    whole (:meth:`encmatch.EncryptedIndex.search` raises
    :class:`~encmatch.errors.PayloadIncomplete`).
    """

    count: int
    positions: np.ndarray
    payloads: np.ndarray
    complete: bool = True
    bound: int | None = None
    width: int = 0
    labels: list[str] | None = None
    raw_count: float | None = None
    unresolved: int = 0
    uncertain: int = 0
    #: The index's threshold, when the decryption checked the result against it (else ``None``).
    delta: float | None = None
    mode: str = field(default=PAYLOAD, init=False)

    @property
    def enrolled(self) -> bool:
        """True if at least one record matches."""
        return self.count > 0

    @property
    def matches(self) -> np.ndarray:
        """The matching positions, ascending (int64)."""
        return np.sort(self.positions)

    def __eq__(self, other: object) -> bool:
        """Equal when the count, the completeness and the (position, payload) records in order are equal
        (and the labels, when both have them)."""
        if not isinstance(other, PayloadResult):
            return NotImplemented
        same = (self.count == other.count and self.complete == other.complete
                and np.array_equal(self.positions, other.positions)
                and self.payloads.shape == other.payloads.shape and np.array_equal(self.payloads, other.payloads))
        if self.labels is not None and other.labels is not None:
            same = same and list(self.labels) == list(other.labels)
        return same

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        return {"mode": self.mode, "count": self.count, "complete": self.complete, "bound": self.bound,
                "width": self.width, "positions": self.positions.tolist(), "payloads": self.payloads.tolist(),
                "records": [{"position": int(p), "payload": row} for p, row in
                            zip(self.positions.tolist(), self.payloads.tolist())],
                "matches": self.matches.tolist(), "labels": self.labels, "raw_count": self.raw_count,
                "unresolved": self.unresolved, "uncertain": self.uncertain}


#: Any result type.
Result = MembershipResult | IdentificationResult | PayloadResult


def sort_records(positions: Sequence[int] | np.ndarray, payloads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, payloads)`` sorted lexicographically by payload (column 0 first), then by position."""
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    pay = np.asarray(payloads, dtype=np.int16)
    pay = pay.reshape(len(pos), pay.shape[-1] if pay.ndim else 0)
    order = np.lexsort((pos, *pay.T[::-1])) if len(pos) else np.zeros(0, dtype=np.int64)
    return pos[order], pay[order]


def payload_result(decrypted: dict, gallery_labels: Sequence[str] | None = None) -> PayloadResult:
    """A :class:`PayloadResult` from the core's decrypted payload answer (``docs/ABI.md``), records kept in
    the core's order; the positions named by ``gallery_labels`` when given."""
    width = int(decrypted.get("width") or 0)
    records = decrypted.get("records") or []
    pos = np.asarray([int(r["position"]) for r in records], dtype=np.int64)
    pay = np.asarray([list(r["payload"]) for r in records], dtype=np.int64).reshape(len(records), width)
    if pay.size and (pay.min() < -32768 or pay.max() > 32767):
        raise InvalidArgument("decrypted payloads outside int16: not a payload result of this key set?")
    labels = None
    if gallery_labels is not None:
        labels = [str(gallery_labels[p]) if 0 <= p < len(gallery_labels) else "" for p in pos]
    raw = decrypted.get("raw_count")
    bound = decrypted.get("bound")
    return PayloadResult(
        count=int(decrypted.get("count") or 0), positions=pos, payloads=pay.astype(np.int16),
        complete=bool(decrypted.get("complete", True)), bound=None if bound is None else int(bound), width=width,
        labels=labels, raw_count=None if raw is None else float(raw), unresolved=int(decrypted.get("unresolved") or 0),
        uncertain=int(decrypted.get("uncertain") or 0))


def from_decrypted(decrypted: dict, gallery_labels: Sequence[str] | None = None, delta: float | None = None) -> Result:
    """The typed result of the core's decrypted answer (``docs/ABI.md``): a :class:`MembershipResult`,
    :class:`IdentificationResult` or :class:`PayloadResult` (an incomplete payload answer as such:
    ``complete`` False; :func:`require_complete` raises on it). ``gallery_labels`` name the positions;
    ``delta`` is the threshold the result was checked against."""
    mode = decrypted.get("mode", "")
    if mode == PAYLOAD:
        res: Result = payload_result(decrypted, gallery_labels)
    elif mode == "membership":
        res = make_result(mode, count=decrypted.get("count"), raw_count=decrypted.get("raw_count"),
                          approximate=bool(decrypted.get("approximate")))
    else:
        res = make_result(mode, positions=decrypted.get("matches") or [], gallery_labels=gallery_labels,
                          uncertain=decrypted.get("uncertain_positions") or [])
    return replace(res, delta=delta) if delta is not None else res


def incomplete_message(res: PayloadResult) -> str:
    """Why a payload answer is incomplete, for an ``error:`` line or :class:`~encmatch.errors.PayloadIncomplete`."""
    if res.bound is not None and res.count > res.bound:
        return (f"{res.count} records match, more than the bound {res.bound}: the payloads were not all returned "
                f"(search again with a larger bound, at most {MAX_BOUND})")
    if res.unresolved:
        return (f"{res.unresolved} of {res.count} matches could not be separated (scores within the comparator's "
                "guard band or colliding cells)")
    return (f"the payload answer is incomplete ({res.count} matches, {len(res.positions)} decoded, bound "
            f"{res.bound}, {res.uncertain} uncertain cells)")


def require_complete(res: Result, query: int | None = None) -> Result:
    """``res`` unless it is an incomplete :class:`PayloadResult`, which raises :class:`PayloadIncomplete`
    (``query``: its row, named in the message when several queries were searched)."""
    if isinstance(res, PayloadResult) and not res.complete:
        where = f"query {query}: " if query is not None else ""
        raise PayloadIncomplete(where + incomplete_message(res), count=res.count, bound=res.bound,
                                unresolved=res.unresolved, result=res, query=query)
    return res


def make_result(
    mode: str,
    *,
    count: float | None = None,
    raw_count: float | None = None,
    positions: Sequence[int] | np.ndarray | None = None,
    gallery_labels: Sequence[str] | None = None,
    uncertain: Sequence[int] | np.ndarray | None = None,
    approximate: bool = False,
) -> Result:
    """Build the result of ``mode`` from a count or from matching positions.

    ``gallery_labels`` (one per gallery position) names the positions of an
    identification result; pass ``None`` when the gallery has no labels.
    ``uncertain`` (identification) and ``approximate`` (membership) carry
    what the decryption flagged.
    """
    check_mode(mode)
    if mode == PAYLOAD:
        raise InvalidArgument("payload results are built by payload_result (or bruteforce.payload_search)")
    if mode == "membership":
        n = int(round(count if count is not None else (raw_count or 0.0)))
        return MembershipResult(count=n, enrolled=n > 0, raw_count=None if raw_count is None else float(raw_count),
                                approximate=bool(approximate))
    pos = np.unique(np.asarray(positions if positions is not None else [], dtype=np.int64))
    labels = None
    if gallery_labels is not None:
        labels = [str(gallery_labels[p]) if 0 <= p < len(gallery_labels) else "" for p in pos]
    flagged = np.unique(np.asarray(uncertain if uncertain is not None else [], dtype=np.int64))
    return IdentificationResult(positions=pos, labels=labels, uncertain=flagged)
