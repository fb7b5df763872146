"""Plaintext model of the encrypted iris search: one bit per query eye, with rotations.

For a batch of query eyes, each tried at ``rho = 2s + 1`` rotations
(:func:`~encmatch.iris.encoding.rotations`), against a gallery of ``n``
templates, the server is to return per eye one bit: *does any rotation
match any gallery entry* (papers/004 section 2.1.4, ``match_DB``). This
module computes that bit exactly, in the clear, the way the encrypted
computation is organised, so that encrypted runs can be checked against it.

**The normaliser.** The score ``<c'_1, c'_2> / |m_1 and m_2|`` has a
data-dependent denominator. As in papers/004 (section 3: "only the former
[codes] are encrypted"), masks stay in the clear at the server: the query's
masks travel with its encrypted codes and the gallery's masks are stored
unencrypted. Then ``|m_1 and m_2|`` is a public number per (query rotation,
gallery entry) and the encrypted test needs no division::

    score > 1 - 2t   <=>   <c'_1, c'_2> - (1 - 2t) |m_1 and m_2| > 0

(``|m_1 and m_2| > 0``; a pair without common bits never matches, as
open-iris skips it). The server computes the encrypted inner products with
one ciphertext-plaintext product per mask (``c' = m (1 - 2c)``) and
subtracts the public offset ``(1 - 2t) |m_1 and m_2|``. What this reveals
to the server: every mask (the occlusion pattern of each query eye and each
gallery entry) and hence the mask overlap of every pair at every rotation;
not the codes, not the scores, not the distances, not which pair matched.
Masks do carry information (eyelid shape, image quality) and can help
link two queries of the same person; a deployment that must hide them
would need the denominator under encryption (an encrypted division or a
comparison of ``<c'_1, c'_2>`` against an encrypted product).

The per-pair quantity the comparator sees is the *margin*
``(<c'_1, c'_2> - (1 - 2t) |m_1 and m_2|) / l``, in ``[-2, 2]``; a pair
matches iff its margin is ``> 0`` (the model decides exact ties, margin 0
up to the rounding of ``1 - 2t``, as open-iris does: ``H / M < t``). An approximate comparator can only
decide differently from this model on pairs whose margin is within its
error band of 0, so an eye's bit can only differ when its *best* margin is
within that band (:meth:`EyeResults.guard_band`).

Computation: the ``q * rho`` rotated query vectors and masks, as float32
matrices, times each gallery chunk's vectors and masks (two BLAS products
per chunk; every value is an integer ``<= l = 16384 < 2^24``, so float32
sums are exact); distances, decisions and margins in float64.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from .._util.progress import progress as progress_bar

from ..errors import InvalidArgument
from .encoding import DEFAULT_ROTATION_SHIFT, masked_bits, rotations, score_threshold, shifts
from .templates import NOT_ENROLLED, Templates

__all__ = [
    "EyeResults",
    "match",
    "confusion",
    "query_matrices",
    "gallery_matrices",
    "public_offsets",
    "Normalisation",
    "DEFAULT_CHUNK",
]

#: Gallery templates per BLAS product (two float32 [chunk, l] matrices: 128 MB each at 2048 x 16384).
DEFAULT_CHUNK = 2048


@dataclass(frozen=True)
class Normalisation:
    """open-iris's normalised Hamming distance (``iris/nodes/matcher/utils.py`` ``normalized_HD``).

    ``NHD = max(0, norm_mean - (norm_mean - FHD) (norm_gradient M + 0.5))``
    for a pair with ``M`` common mask bits; defaults are open-iris's. For
    ``t > 0``, ``NHD < t`` iff ``FHD < norm_mean - (norm_mean - t) /
    (norm_gradient M + 0.5)``: a per-pair threshold that depends only on the
    public ``M``, so the encrypted test keeps a public offset.
    """

    norm_mean: float = 0.45
    norm_gradient: float = 0.00005

    def __post_init__(self) -> None:
        """open-iris's bounds: ``0 <= norm_mean <= 1``; a gradient >= 0 keeps ``g M + 0.5 > 0``."""
        if not 0 <= self.norm_mean <= 1 or self.norm_gradient < 0:
            raise InvalidArgument(f"normalisation needs 0 <= norm_mean <= 1 and norm_gradient >= 0, got "
                                  f"{self.norm_mean}, {self.norm_gradient}")

    def fhd_threshold(self, t: float, overlap: np.ndarray) -> np.ndarray:
        """The FHD threshold equivalent to ``NHD < t`` for pairs of ``overlap`` common bits."""
        return self.norm_mean - (self.norm_mean - t) / (self.norm_gradient * overlap + 0.5)

    def distance(self, fhd: np.ndarray, overlap: np.ndarray) -> np.ndarray:
        """open-iris's ``normalized_HD`` of pairs with distance ``fhd`` and ``overlap`` common bits."""
        return np.maximum(0.0, self.norm_mean - (self.norm_mean - fhd) * (self.norm_gradient * overlap + 0.5))


def _score_thresholds(t: float, overlap: np.ndarray, normalise: Normalisation | None) -> np.ndarray | float:
    """Score threshold ``1 - 2 t_pair`` per pair: ``1 - 2t``, or open-iris's normalised equivalent."""
    thr = score_threshold(t)
    if normalise is None:
        return thr
    return 1.0 - 2.0 * normalise.fhd_threshold(t, overlap)


@dataclass
class EyeResults:
    """Per query eye: the bit, the best pair, and optionally every pair's minimum distance.

    - ``bits[e]``: some rotation of eye ``e`` matches some gallery entry.
    - ``best_margin[e]``: the largest margin over rotations and gallery
      entries (``-inf`` when no pair has a common bit). ``> 0`` iff
      ``bits[e]``, except at exact ties (``|margin| < 1e-12``), which the
      bit decides as open-iris does (``H / M < t`` in float64).
    - ``best_score[e]``, ``best_index[e]``, ``best_shift[e]``: the highest
      score, the gallery entry and the column shift where it occurs
      (``min FHD = (1 - best_score) / 2``); ``-inf``/``-1``/``0`` for an
      eye whose masks overlap no gallery mask.
    - ``min_fhd[e, i]`` (with ``pairs=True``): the minimum fractional Hamming
      distance of eye ``e`` and gallery entry ``i`` over rotations (1.0 when
      no rotation has a common bit, open-iris's starting value).
    """

    t: float
    rotation_shift: int
    normalise: Normalisation | None
    bits: np.ndarray
    best_margin: np.ndarray
    best_score: np.ndarray
    best_index: np.ndarray
    best_shift: np.ndarray
    min_fhd: np.ndarray | None = None
    gallery_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, str))

    @property
    def best_fhd(self) -> np.ndarray:
        """Minimum FHD of each eye over rotations and gallery entries (1.0 when undefined)."""
        return np.where(np.isfinite(self.best_score), (1.0 - self.best_score) / 2.0, 1.0)

    def guard_band(self, band: float, unit: str = "margin") -> np.ndarray:
        """Indices of the eyes whose best margin (``unit="margin"``) or score (``"score"``) is within ``band`` of the threshold.

        Outside these eyes an approximate comparator whose error on the
        margin (or score) is below ``band`` returns the same bit as this model.
        """
        if not band >= 0:
            raise InvalidArgument(f"band must be >= 0, got {band}")
        if unit == "margin":
            dist = np.abs(self.best_margin)
        elif unit == "score" and self.normalise is None:
            dist = np.abs(self.best_score - score_threshold(self.t))
        elif unit == "score":
            raise InvalidArgument("with normalisation the score threshold differs per pair: use unit='margin'")
        else:
            raise InvalidArgument(f"unit must be 'margin' or 'score', got {unit!r}")
        return np.flatnonzero(dist <= band)

    def best_ids(self) -> list[str | None]:
        """Gallery id of each eye's best entry (``None`` when it has none)."""
        return [str(self.gallery_ids[i]) if i >= 0 else None for i in self.best_index]

    def to_dict(self, query_ids: Sequence[str] | None = None, band: float | None = None) -> dict:
        """JSON-ready summary: per eye the bit, best FHD/score/margin, entry and shift, and the guard-band eyes."""
        ids = list(query_ids) if query_ids is not None else [str(i) for i in range(len(self.bits))]
        eyes = [
            {"eye": ids[e], "bit": bool(self.bits[e]), "min_fhd": float(self.best_fhd[e]),
             "best_score": float(self.best_score[e]) if np.isfinite(self.best_score[e]) else None,
             "best_margin": float(self.best_margin[e]) if np.isfinite(self.best_margin[e]) else None,
             "best_id": best, "best_shift": int(self.best_shift[e])}
            for e, best in enumerate(self.best_ids())
        ]
        norm = None if self.normalise is None else dataclasses.asdict(self.normalise)
        out = {"t": self.t, "normalise": norm, "rotation_shift": self.rotation_shift,
               "score_threshold": score_threshold(self.t) if norm is None else "per pair (normalised)",
               "rotations": 2 * self.rotation_shift + 1, "gallery_size": len(self.gallery_ids),
               "matches": int(self.bits.sum()), "eyes": eyes}
        if band is not None:
            out["guard_band"] = {"band": band, "unit": "margin",
                                 "eyes": [ids[e] for e in self.guard_band(band)]}
        return out


def query_matrices(queries: Templates, rotation_shift: int = DEFAULT_ROTATION_SHIFT) -> tuple[np.ndarray, np.ndarray]:
    """What the querier sends: ``(c', m)`` of every rotation, float32 ``[q * rho, l]``.

    Row ``e * rho + r`` is eye ``e`` at shift ``shifts(rotation_shift)[r]``;
    the ``c'`` rows are encrypted, the mask rows travel in the clear.
    """
    codes, masks = queries.bits()
    rc, rm = rotations(codes, masks, rotation_shift)
    l = queries.bit_length
    return masked_bits(rc, rm).reshape(-1, l).astype(np.float32), rm.reshape(-1, l).astype(np.float32)


def gallery_matrices(gallery: Templates, start: int = 0, stop: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """What the server stores for entries ``start:stop``: ``(c', m)``, float32 ``[k, l]`` (``c'`` encrypted)."""
    codes, masks = gallery.bits(start, stop)
    vectors = masked_bits(codes, masks).reshape(len(codes), -1)
    return vectors.astype(np.float32), masks.reshape(len(codes), -1).astype(np.float32)


def public_offsets(
    query_masks: np.ndarray, gallery_masks: np.ndarray, t: float, normalise: Normalisation | None = None
) -> np.ndarray:
    """``(1 - 2t) |m_1 and m_2|`` per (query row, gallery row), float64: what the server subtracts in the clear.

    With ``normalise``, ``t`` is replaced per pair by the equivalent FHD
    threshold. ``nan`` where the masks share no bit (the server leaves such
    pairs out).
    """
    overlap = query_masks @ gallery_masks.T
    offsets = _score_thresholds(t, overlap, normalise) * overlap
    return np.where(overlap > 0, offsets, np.nan)


def _chunk_scores(
    qv: np.ndarray, qm: np.ndarray, gallery: Templates, start: int, stop: int, t: float,
    normalise: Normalisation | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For gallery entries ``start:stop``: ``(match, margin, score)``, each ``[q * rho, k]``.

    ``match`` is decided the way open-iris compares, ``H / M < t`` (or the
    normalised distance ``< t``) in float64, so exact ties at the threshold
    go its way. ``margin`` and ``score`` are ``-inf`` (and ``match`` False)
    where the masks have no common bit: ``M`` is public, so the server
    leaves such pairs out.
    """
    gv, gm = gallery_matrices(gallery, start, stop)
    dot = (qv @ gv.T).astype(np.float64)  # exact integers
    overlap = (qm @ gm.T).astype(np.float64)
    some = overlap > 0
    m = np.maximum(overlap, 1.0)
    fhd = (overlap - dot) / (2.0 * m)
    distance = fhd if normalise is None else normalise.distance(fhd, overlap)
    offsets = _score_thresholds(t, overlap, normalise) * overlap
    margin = np.where(some, (dot - offsets) / gallery.bit_length, -np.inf)
    return some & (distance < t), margin, np.where(some, dot / m, -np.inf)


def _check_inputs(queries: Templates, gallery: Templates, chunk: int, t: float) -> None:
    """Raise on empty inputs, different layouts, a bad chunk size or a threshold outside (0, 1)."""
    score_threshold(t)
    if len(queries) == 0 or len(gallery) == 0:
        raise InvalidArgument(f"nothing to match: {len(queries)} query eye(s), {len(gallery)} gallery template(s)")
    if queries.layout != gallery.layout:
        raise InvalidArgument(f"queries have layout {queries.layout}, the gallery {gallery.layout}")
    if chunk < 1:
        raise InvalidArgument(f"chunk must be >= 1, got {chunk}")


def match(
    queries: Templates,
    gallery: Templates,
    t: float,
    rotation_shift: int = DEFAULT_ROTATION_SHIFT,
    pairs: bool = False,
    chunk: int = DEFAULT_CHUNK,
    progress: bool | None = None,
    normalise: Normalisation | None = None,
) -> EyeResults:
    """Match every query eye, at ``2 * rotation_shift + 1`` rotations, against the whole gallery.

    ``t`` is the fractional Hamming threshold (match iff ``FHD < t``, or
    open-iris's ``NHD < t`` with ``normalise``; distances reported stay FHD).
    ``pairs=True`` also returns the ``[q, n]`` minimum FHD per pair.
    ``progress``: a progress bar over gallery chunks (default: when there is
    more than one chunk).
    """
    _check_inputs(queries, gallery, chunk, t)
    rho = len(shifts(rotation_shift))
    q, n = len(queries), len(gallery)
    qv, qm = query_matrices(queries, rotation_shift)
    bits = np.zeros(q, dtype=bool)
    best_margin = np.full(q, -np.inf)
    best_score = np.full(q, -np.inf)
    best_index = np.full(q, -1, dtype=np.int64)
    best_rot = np.zeros(q, dtype=np.int64)
    min_fhd = np.ones((q, n), dtype=np.float32) if pairs else None
    starts = range(0, n, chunk)
    bar = progress_bar(starts, desc="iris match", unit="chunk", show=bool(progress if progress is not None else len(starts) > 1))
    for start in bar:
        stop = min(start + chunk, n)
        hit, margin, sc = _chunk_scores(qv, qm, gallery, start, stop, t, normalise)
        bits |= hit.reshape(q, -1).any(axis=1)
        margin = margin.reshape(q, rho, -1)
        sc = sc.reshape(q, rho, -1)
        best_margin = np.maximum(best_margin, margin.max(axis=(1, 2)))
        flat = sc.reshape(q, -1).argmax(axis=1)
        top = sc.reshape(q, -1)[np.arange(q), flat]
        better = top > best_score
        best_score = np.where(better, top, best_score)
        best_index = np.where(better, start + flat % (stop - start), best_index)
        best_rot = np.where(better, flat // (stop - start), best_rot)
        if min_fhd is not None:
            per_pair = sc.max(axis=1)
            min_fhd[:, start:stop] = np.where(np.isfinite(per_pair), (1.0 - per_pair) / 2.0, 1.0)
    return EyeResults(
        t=float(t), rotation_shift=int(rotation_shift), normalise=normalise, bits=bits, best_margin=best_margin,
        best_score=best_score, best_index=best_index, best_shift=shifts(rotation_shift)[best_rot],
        min_fhd=min_fhd, gallery_ids=gallery.ids,
    )


def confusion(results: EyeResults, truth: np.ndarray) -> dict:
    """TP/FP/TN/FN of the eye bits against ground truth (``truth[e] != NOT_ENROLLED`` means enrolled)."""
    enrolled = np.asarray(truth) != NOT_ENROLLED
    b = results.bits
    ids_ok = np.array([best == tr for best, tr in zip(results.best_ids(), truth)])
    return {
        "tp": int(np.sum(b & enrolled)), "fp": int(np.sum(b & ~enrolled)),
        "tn": int(np.sum(~b & ~enrolled)), "fn": int(np.sum(~b & enrolled)),
        "tp_right_id": int(np.sum(b & enrolled & ids_ok)),
    }
