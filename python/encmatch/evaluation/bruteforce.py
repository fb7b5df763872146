"""Exact plaintext search: the reference the encrypted search is checked against.

Vectors are L2-normalised, scores are cosine similarities (float64), and a
gallery entry matches when its score is ``>= delta`` (or ``> delta`` for an
index created with ``rule=">"``) - the decision the encrypted comparator
approximates. Results have the same types as
:meth:`encmatch.EncryptedIndex.search`; :func:`payload_search` is the exact
answer of the payload mode.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .._core import as_matrix, as_payloads
from ..errors import InvalidArgument
from ..results import PAYLOAD, PayloadResult, Result, check_bound, check_mode, make_result, sort_records

__all__ = ["normalize", "cosine_scores", "search", "BruteForceIndex", "expected_results", "same_answer",
           "matches", "payload_search"]


def normalize(x: Any, name: str = "vectors") -> np.ndarray:
    """Return the rows of ``x`` (checked like the encrypted path) L2-normalised, as float64 ``[n, d]``."""
    arr = as_matrix(x, name=name).astype(np.float64)
    return arr / np.linalg.norm(arr, axis=1, keepdims=True)


def cosine_scores(gallery: Any, queries: Any) -> np.ndarray:
    """Cosine similarities ``[q, n]`` of each query against each gallery vector."""
    g = normalize(gallery, "gallery")
    q = normalize(queries, "queries")
    if g.shape[1] != q.shape[1]:
        raise InvalidArgument(f"queries have dimension {q.shape[1]}, the gallery {g.shape[1]}")
    return q @ g.T


def matches(scores: Any, delta: float, rule: str = ">=") -> np.ndarray:
    """The match bits of ``scores`` at ``delta``: ``scores >= delta``, or ``scores > delta`` for ``rule=">"``."""
    if rule == ">=":
        return np.asarray(scores) >= delta
    if rule == ">":
        return np.asarray(scores) > delta
    raise InvalidArgument(f"rule must be '>=' or '>', got {rule!r}")


def payload_search(gallery: Any, payloads: Any, queries: Any, delta: float, rule: str = ">=",
                   bound: int | None = None, labels: Sequence[str] | None = None) -> PayloadResult | list[PayloadResult]:
    """The exact payload answer of ``queries`` (``[dim]``: one result; ``[q, dim]``: a list).

    Every matching record (cosine score ``>= delta``, or ``> delta`` with
    ``rule=">"``) in :class:`PayloadResult` form: ``payloads`` int16 sorted
    lexicographically by payload then position, ``positions`` beside them,
    ``count`` the number of matches. ``bound`` (default: none) only sets
    ``complete`` (``count <= bound``) and ``bound``; the records are all
    there, whatever the bound.
    """
    scores = np.atleast_2d(cosine_scores(gallery, queries))  # the same scores as every other brute force
    n = scores.shape[1]
    width = np.asarray(payloads).shape[-1] if np.ndim(payloads) >= 1 else 0
    pays = as_payloads(payloads, n, width)
    b = None if bound is None else check_bound(bound)
    out = []
    for row in matches(scores, delta, rule):
        pos, pay = sort_records(np.flatnonzero(row), pays[row])
        names = None if labels is None else [str(labels[p]) for p in pos]
        out.append(PayloadResult(count=int(len(pos)), positions=pos, payloads=pay, width=width, bound=b,
                                 complete=b is None or len(pos) <= b, labels=names))
    return out[0] if np.ndim(queries) == 1 else out


def results_from_scores(
    scores: np.ndarray, delta: float, mode: str, labels: Sequence[str] | None = None
) -> list[Result]:
    """Results of ``mode`` for each row of a ``[q, n]`` score matrix thresholded at ``delta``."""
    check_mode(mode)
    if mode == PAYLOAD:
        raise InvalidArgument("payload answers need the payloads: use payload_search")
    hits = np.atleast_2d(scores) >= delta
    if mode == "membership":
        return [make_result(mode, count=int(row.sum())) for row in hits]
    return [make_result(mode, positions=np.flatnonzero(row), gallery_labels=labels) for row in hits]


def search(
    gallery: Any, queries: Any, delta: float, mode: str = "identification", labels: Sequence[str] | None = None
) -> Result | list[Result]:
    """Exact search of ``queries`` (``[dim]`` or ``[q, dim]``) in ``gallery``; one result per query.

    Returns a single result for a 1-D query, a list for a 2-D array, like
    :meth:`encmatch.EncryptedIndex.search`.
    """
    out = results_from_scores(cosine_scores(gallery, queries), delta, mode, labels)
    return out[0] if np.ndim(queries) == 1 else out


class BruteForceIndex:
    """An in-memory plaintext index with the same ``add``/``search``/``len`` shape as EncryptedIndex."""

    def __init__(self, dim: int, delta: float = 0.5):
        """Empty index of ``dim``-dimensional vectors with threshold ``delta``."""
        self.dim = int(dim)
        self.delta = float(delta)
        self._vectors = np.zeros((0, self.dim))
        self._labels: list[str | None] = []

    def add(self, vectors: Any, labels: Sequence[Any] | None = None) -> None:
        """Append vectors (normalised) and their optional labels."""
        v = normalize(as_matrix(vectors, self.dim))
        if labels is not None and len(labels) != len(v):
            raise InvalidArgument(f"labels: {len(labels)} labels for {len(v)} vectors")
        self._vectors = np.vstack([self._vectors, v])
        self._labels.extend([str(x) for x in labels] if labels is not None else [None] * len(v))

    @property
    def labels(self) -> list[str] | None:
        """Labels per position, or ``None`` unless every entry has one."""
        return None if any(x is None for x in self._labels) else list(self._labels)  # type: ignore[arg-type]

    def scores(self, queries: Any) -> np.ndarray:
        """Cosine scores ``[q, n]`` of ``queries`` against the index."""
        return normalize(as_matrix(queries, self.dim, "queries")) @ self._vectors.T

    def search(self, queries: Any, mode: str = "identification") -> Result | list[Result]:
        """Exact search; one result for a 1-D query, a list for 2-D."""
        out = results_from_scores(self.scores(queries), self.delta, mode, self.labels)
        return out[0] if np.ndim(queries) == 1 else out

    def __len__(self) -> int:
        """Number of vectors."""
        return len(self._vectors)


def expected_results(gallery: np.ndarray, queries: np.ndarray, delta: float, mode: str) -> list[Result]:
    """The exact (plaintext) answers of ``queries`` in ``mode``."""
    scores = cosine_scores(gallery, queries)
    return [make_result(mode, count=float((s >= delta).sum()), positions=np.flatnonzero(s >= delta))
            for s in scores]


def same_answer(got: Result, want: Result) -> bool:
    """Whether two answers agree (count, and positions for identification)."""
    if got.mode != want.mode or got.count != want.count:
        return False
    return want.mode == "membership" or np.array_equal(got.positions, want.positions)
