"""Folding (papers/004 Algorithm 2) made sound for any gallery: the fold polynomial, its proof, the plaintext model.

Algorithm 2 evaluates a low-degree polynomial ``f`` on every score before
any bootstrap, adds ``k`` of the results per slot and bootstraps only the
sums: ``k`` times fewer bootstraps. papers/004 (section 4, appendix C.2)
fits ``f`` to a model of impostor scores and assumes that at most one score
of a slot is not an impostor's (its "folding assumption", checked on 10^12
simulated sums). A gallery can break that assumption: one eye enrolled
twice, sixteen near misses where one slot adds them, a code enrolled as the
complement of another (score -1, where the paper's degree-7 ``f`` is 780).
Then a slot's sum can say "match" where no pair matches: a clean wrong
answer. This module designs ``f`` so that no gallery can do that.

**The quantity.** Each slot holds ``x = score - delta`` (``score =
<c'_1, c'_2> / |m_1 and m_2|``, ``delta = 1 - 2t``; the server multiplies
by the public ``1 / |m_1 and m_2|`` and subtracts ``delta``; a pair without
common bits gets ``x = -delta``), so a pair matches iff ``x > 0`` and every
``x`` lies in ``[-1 - delta, 1 - delta]``.

**The design** (:func:`design`): a linear program over ``f``'s Chebyshev
coefficients finds ``f`` of the given degree with

- ``f >= floor`` on the whole domain (a small negative number);
- ``f <= near`` for every non-match outside the guard band (``x <= -guard``);
- ``f >= 1`` for every match outside it (``x >= guard``);
- ``f <= quiet`` for clear non-matches (``x <= clear``);
- ``f <= top`` everywhere (it bounds the classifier's domain);
- ``f >= k near + gap`` from ``sure_from`` on, the smallest such point
  (bisection over feasible programs), minimising ``near``.

The program sees a grid; the bounds are then measured exactly on the
polynomial (its extrema on each interval are at the interval's ends or at
real roots of ``f'``), and :class:`FoldDesign` keeps only the measured ones.

**Two classifications of a slot's sum** ``S`` (``k`` terms, or fewer in the
last group): *sure* ``S >= sure_at`` and *maybe* ``S >= maybe_at``, with

    sure_at - tolerance  >  k * near                 (no slot of non-matches is sure)
    maybe_at + tolerance <  low + (k - 1) * floor     (every slot with a match is maybe)

where ``low`` is ``f``'s minimum over matches. An eye is a **match** if one
of its slots is sure, **no match** if none is maybe, and **flagged**
otherwise. Whatever the gallery (duplicates, crowds of near misses,
complements), a match answer has a pair with ``x > -guard`` and a no-match
answer has none with ``x >= guard``: outside the guard band the answer
equals the model or is flagged, never wrong. ``tolerance`` (in units of
``S``) is what the encrypted evaluation of ``f``, the sum and the
classifier's band may add. Which eyes get a clean answer depends on the
data, not the soundness: an eye whose scores are all at most ``delta +
clear`` gets a clean no (``k * quiet + tolerance < maybe_at``); one with a
pair at ``x >= sure_from`` gets a clean yes. Flagged eyes go to Algorithm 1
(each pair classified alone), which decides them up to its own band.

**The slots** (:func:`fold_match`): the ``k`` rotations of a fold group are
added for the *same* gallery entry (papers/004 rotates rotation ``r`` by
``r`` slots so that the ``k`` terms come from ``k`` different entries; its
soundness argument needs that, this one does not, and the sum of a genuine
entry's neighbouring rotations helps it past ``sure_at``): no rotation keys,
and the answer does not depend on where entries are placed.

**A second polynomial for maybe** (``design(..., maybe_degree=...)``):
the encrypted classifiers must tell ``S`` apart at the design's precision
over the whole range ``[k floor, k top]`` (about 2^-13 of it), deeper than
one bootstrap's comparator. With ``h`` (``floor <= h <= maybe_top``,
``h <= quiet`` on clear non-matches, ``h >= low_h`` on matches, ``low_h``
maximised) deciding *maybe* on its own sums, and ``f`` deciding *sure*
with a larger ``sure_tolerance``, both gaps widen (docs/IRIS.md); the
soundness argument is the same, each inequality on its own polynomial.

:func:`check_sums` is the simulation the issue asks for: ``n`` random slots
from impostor, genuine, near-miss, duplicate and arbitrary scores, each
answer checked against its slot's exact truth.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

import numpy as np
from numpy.polynomial import chebyshev as cheb

from .._util.extras import require
from .._util.progress import progress as progress_bar
from ..errors import InvalidArgument
from .encoding import DEFAULT_ROTATION_SHIFT, score_threshold, shifts
from .model import DEFAULT_CHUNK, EyeResults, _check_inputs, _chunk_scores, query_matrices
from .templates import Templates

__all__ = ["FoldPolynomial", "FoldDesign", "FoldResults", "design", "fold_match", "check_sums",
           "MATCH", "NO_MATCH", "FLAGGED"]

#: Answers of :func:`fold_match`, per eye.
MATCH, NO_MATCH, FLAGGED = 1, 0, -1

#: Grid points of the linear program (the measured bounds are exact, not the grid's).
_GRID = 6001


@dataclass(frozen=True)
class FoldPolynomial:
    """``f(x) = sum_i c_i T_i(y)`` with ``y`` the affine map of ``[lo, hi]`` onto ``[-1, 1]``."""

    coefficients: tuple[float, ...]
    lo: float
    hi: float

    @property
    def degree(self) -> int:
        """The polynomial's degree (its multiplicative depth is its bit length)."""
        return len(self.coefficients) - 1

    def _y(self, x: np.ndarray) -> np.ndarray:
        return (2.0 * np.asarray(x, dtype=np.float64) - (self.lo + self.hi)) / (self.hi - self.lo)

    def __call__(self, x: np.ndarray | float) -> np.ndarray:
        return cheb.chebval(self._y(x), np.asarray(self.coefficients))

    def extrema(self, a: float, b: float) -> tuple[float, float]:
        """``(min, max)`` of ``f`` on ``[a, b]``: at the ends or at a real root of ``f'`` inside."""
        if not self.lo <= a <= b <= self.hi:
            raise InvalidArgument(f"[{a}, {b}] is not inside the domain [{self.lo}, {self.hi}]")
        roots = cheb.chebroots(cheb.chebder(np.asarray(self.coefficients)))
        ya, yb = self._y(a), self._y(b)
        inside = [r.real for r in roots if abs(r.imag) < 1e-9 and ya <= r.real <= yb]
        values = cheb.chebval(np.array([ya, yb, *inside]), np.asarray(self.coefficients))
        return float(values.min()), float(values.max())

    def power_coefficients(self) -> list[float]:
        """The coefficients in the monomial basis of ``x``, lowest first (for display; evaluate with Chebyshev)."""
        c = cheb.cheb2poly(np.asarray(self.coefficients))
        s, m = 2.0 / (self.hi - self.lo), -(self.lo + self.hi) / (self.hi - self.lo)
        return np.polynomial.Polynomial(c)(np.polynomial.Polynomial([m, s])).coef.tolist()


@dataclass(frozen=True)
class FoldDesign:
    """A fold polynomial, its measured bounds and the two thresholds of a slot's sum (module docstring)."""

    t: float
    k: int
    guard: float
    clear: float
    tolerance: float
    poly: FoldPolynomial
    floor: float
    top: float
    near: float
    low: float
    quiet: float
    sure_from: float
    maybe_at: float
    sure_at: float
    #: The optional second polynomial ``h`` whose sums decide *maybe*
    #: (:func:`design` with ``maybe_degree``), its measured bounds and the
    #: tolerance its sums are held to; None: ``f``'s sums decide both.
    maybe_poly: FoldPolynomial | None = None
    maybe_floor: float | None = None
    maybe_top: float | None = None
    maybe_low: float | None = None
    maybe_quiet: float | None = None
    maybe_tolerance: float | None = None
    maybe_clear: float | None = None

    @property
    def delta(self) -> float:
        """The score threshold ``1 - 2t``."""
        return score_threshold(self.t)

    @property
    def sum_range(self) -> tuple[float, float]:
        """Every value a slot's sum can take, whatever the gallery: the classifiers' domain."""
        return self.k * min(self.floor, 0.0), self.k * self.top

    @property
    def maybe_range(self) -> tuple[float, float]:
        """Every value a slot's *maybe* sum can take: ``f``'s range, or ``h``'s with a second polynomial."""
        if self.maybe_poly is None:
            return self.sum_range
        return self.k * min(self.maybe_floor, 0.0), self.k * max(self.maybe_top, 0.0)

    @property
    def sure_precision(self) -> float:
        """The *sure* classifier's gap over its domain: ``(sure_at - k near) / width``."""
        lo, hi = self.sum_range
        return (self.sure_at - self.k * self.near) / (hi - lo)

    @property
    def maybe_precision(self) -> float:
        """The *maybe* classifier's smallest gap (to the sums of matches, to those of clear non-matches) over its domain."""
        lo, hi = self.maybe_range
        low, floor, quiet = self._maybe_bounds()
        return min(low + (self.k - 1) * floor - self.maybe_at, self.maybe_at - self.k * quiet) / (hi - lo)

    @property
    def precision(self) -> float:
        """The classifiers' band as a fraction of their domain: the smaller of the two."""
        return min(self.sure_precision, self.maybe_precision)

    def _maybe_bounds(self) -> tuple[float, float, float]:
        """``(low, floor, quiet)`` of the polynomial whose sums decide *maybe*."""
        if self.maybe_poly is None:
            return self.low, self.floor, self.quiet
        return self.maybe_low, self.maybe_floor, self.maybe_quiet

    def slot_sums(self, x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
        """``(sure sums, maybe sums)`` of the values ``x`` added along ``axis`` (the same array when ``f`` decides both)."""
        s = self.poly(x).sum(axis=axis)
        return s, (s if self.maybe_poly is None else self.maybe_poly(x).sum(axis=axis))

    def classify(self, sums: np.ndarray, maybe_sums: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(sure, maybe)`` of slot sums (``maybe_sums``: those of ``h``, when the design has it)."""
        s = np.asarray(sums)
        m = s if maybe_sums is None else np.asarray(maybe_sums)
        return s >= self.sure_at, m >= self.maybe_at

    def check(self) -> None:
        """Raise unless the two soundness inequalities (module docstring) hold with the measured bounds."""
        if not self.sure_at - self.tolerance > self.k * self.near:
            raise InvalidArgument(f"sure_at {self.sure_at} - tolerance {self.tolerance} is not above k * near = {self.k * self.near}")
        low, floor, _ = self._maybe_bounds()
        tol = self.tolerance if self.maybe_poly is None else self.maybe_tolerance
        if not self.maybe_at + tol < low + (self.k - 1) * floor:
            raise InvalidArgument(f"maybe_at {self.maybe_at} + tolerance {tol} is not below low + (k - 1) floor")

    def to_dict(self) -> dict:
        """JSON-ready: parameters, measured bounds, thresholds, the polynomial in both bases."""
        out = {key: value for key, value in asdict(self).items() if key not in ("poly", "maybe_poly")}
        out.update(delta=self.delta, degree=self.poly.degree, domain=[self.poly.lo, self.poly.hi],
                   chebyshev=list(self.poly.coefficients), monomial=self.poly.power_coefficients(),
                   sum_range=list(self.sum_range), precision=self.precision,
                   sure_precision=self.sure_precision, maybe_precision=self.maybe_precision,
                   sure_from_score=self.sure_from + self.delta, clear_score=self.clear + self.delta)
        if self.maybe_poly is not None:
            out.update(maybe_degree=self.maybe_poly.degree, maybe_chebyshev=list(self.maybe_poly.coefficients),
                       maybe_range=list(self.maybe_range))
        return out


def _grid(t: float, degree: int, points: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """The programs' grid over ``x`` in ``[-1 - delta, 1 - delta]`` with ``points`` added, and its Chebyshev basis up to ``degree``."""
    delta = score_threshold(t)
    lo, hi = -1.0 - delta, 1.0 - delta
    x = np.union1d(np.linspace(lo, hi, _GRID), points)
    return x, cheb.chebvander((2.0 * x - (lo + hi)) / (hi - lo), degree)


def _program(t: float, k: int, degree: int, guard: float, clear: float, quiet: float, floor: float,
             top: float, gap: float, sure_from: float):
    """One linear program (module docstring); scipy's result."""
    require("fold", "scipy")
    from scipy.optimize import linprog

    x, basis = _grid(t, degree, [-guard, guard, clear, sure_from])
    rows, rhs = [], []

    def at_most(sel: np.ndarray, bound: float, near_coef: float = 0.0, sign: float = 1.0) -> None:
        b = sign * basis[sel]
        rows.append(np.hstack([b, np.full((len(b), 1), near_coef)]))
        rhs.append(np.full(len(b), bound))

    everywhere = np.ones(len(x), bool)
    at_most(everywhere, -floor, sign=-1.0)                       # f >= floor
    at_most(everywhere, top)                                     # f <= top
    at_most(x >= guard, -1.0, sign=-1.0)                         # f >= 1 on matches
    at_most(x <= -guard, 0.0, near_coef=-1.0)                    # f <= near on non-matches
    at_most(x <= clear, quiet)                                   # f <= quiet on clear non-matches
    at_most(x >= sure_from, -gap, near_coef=float(k), sign=-1.0)  # f >= k near + gap
    cost = np.zeros(degree + 2)
    cost[-1] = 1.0
    return linprog(cost, A_ub=np.vstack(rows), b_ub=np.concatenate(rhs),
                   bounds=[(None, None)] * (degree + 1) + [(0.0, None)], method="highs")


def design(
    t: float,
    k: int = 16,
    degree: int = 15,
    guard: float = 0.005,
    clear: float = -0.15,
    quiet: float | None = None,
    floor: float | None = None,
    top: float = 60.0,
    tolerance: float = 0.05,
    maybe_degree: int | None = None,
    sure_tolerance: float | None = None,
    maybe_top: float = 4.0,
    maybe_clear: float | None = None,
) -> FoldDesign:
    """The fold polynomial for threshold ``t`` and ``k`` terms per slot, measured and checked.

    ``guard``: the band around the threshold (on ``x = score - delta``)
    inside which an answer may go either way; ``clear``: non-matches at or
    below it add at most ``quiet`` each (default ``1 / (4k)``); ``floor``
    (default ``-1 / (4k)``) bounds ``f`` below, ``top`` above;
    ``tolerance``: what the encrypted evaluation may add to a slot's sum.

    ``maybe_degree``: decide *maybe* on the sums of a second polynomial
    ``h`` of that degree, bounded by ``maybe_top``, so that its classifier's
    domain is ``[k floor, k maybe_top]`` instead of ``[k floor, k top]``
    (:func:`_maybe_program`);
    ``f``'s sums then decide *sure* only, held to ``sure_tolerance``
    (default ``tolerance``): a larger one widens the sure classifier's gap
    (``2 sure_tolerance``) at the price of a later ``sure_from``;
    ``maybe_clear`` (default ``clear``): ``h <= quiet`` up to there, so that
    impostors up to that score get a clean no (a higher one narrows ``h``'s
    window; degree 31 holds it to ``-0.06`` at t = 0.34).
    """
    if k < 1 or degree < 1 or (maybe_degree is not None and maybe_degree < 1):
        raise InvalidArgument(f"k and the degrees must be >= 1, got k={k}, degree={degree}, maybe_degree={maybe_degree}")
    if maybe_degree is None and (sure_tolerance is not None or maybe_clear is not None):
        raise InvalidArgument("sure_tolerance and maybe_clear need maybe_degree: with one polynomial both classifiers share them")
    if maybe_clear is not None and not clear <= maybe_clear < -guard:
        raise InvalidArgument(f"need clear <= maybe_clear < -guard, got maybe_clear={maybe_clear}")
    if not 0.0 < guard < 0.5 or not clear < -guard:
        raise InvalidArgument(f"need 0 < guard < 0.5 and clear < -guard, got guard={guard}, clear={clear}")
    quiet = 1.0 / (4 * k) if quiet is None else float(quiet)
    floor = -1.0 / (4 * k) if floor is None else float(floor)
    two = maybe_degree is not None
    f_tolerance = (tolerance if sure_tolerance is None else float(sure_tolerance)) if two else tolerance
    # The bisection's target above k near: what _measure needs at
    # sure_from (sure_at + tolerance = k near + 3 tolerance, after the
    # other k - 1 terms' floor), with 10 % to spare; the one-polynomial
    # designs keep 10 tolerance, with which docs/IRIS.md's were measured.
    gap = (1.1 * (3.0 * f_tolerance + (k - 1) * abs(min(floor, 0.0)))) if sure_tolerance is not None else 10.0 * f_tolerance
    delta = score_threshold(t)
    lo, hi = guard, 1.0 - delta
    result = None
    for _ in range(20):  # bisection: the smallest sure_from whose program is feasible
        mid = (lo + hi) / 2
        r = _program(t, k, degree, guard, clear, quiet, floor, top, gap, mid)
        if r.status == 0:
            hi, result = mid, r
        else:
            lo = mid
    if result is None:
        r = _program(t, k, degree, guard, clear, quiet, floor, top, gap, hi)
        if r.status != 0:
            raise InvalidArgument(f"no degree-{degree} fold polynomial meets these bounds ({r.message}); "
                                  "raise the degree or top, or lower clear")
        result = r
    poly = FoldPolynomial(tuple(float(c) for c in result.x[:-1]), -1.0 - delta, 1.0 - delta)
    out = _measure(poly, t, k, guard, clear, f_tolerance, sure_from=hi, check=not two)
    if not two:
        return out
    h_clear = clear if maybe_clear is None else float(maybe_clear)
    r = _maybe_program(t, maybe_degree, guard, h_clear, quiet, floor, maybe_top)
    if r.status != 0:
        raise InvalidArgument(f"no degree-{maybe_degree} maybe polynomial meets these bounds ({r.message})")
    h = FoldPolynomial(tuple(float(c) for c in r.x[:-1]), -1.0 - delta, 1.0 - delta)
    h_floor, h_top = h.extrema(h.lo, h.hi)
    h_low = h.extrema(guard, h.hi)[0]
    h_quiet = h.extrema(h.lo, h_clear)[1]
    maybe_at = (k * max(h_quiet, 0.0) + h_low + (k - 1) * min(h_floor, 0.0)) / 2
    out = dataclasses.replace(out, maybe_poly=h, maybe_floor=h_floor, maybe_top=h_top, maybe_low=h_low,
                              maybe_quiet=h_quiet, maybe_tolerance=float(tolerance), maybe_clear=h_clear,
                              maybe_at=maybe_at)
    out.check()
    return out


def _maybe_program(t: float, degree: int, guard: float, clear: float, quiet: float, floor: float, top: float):
    """The linear program of the *maybe* polynomial ``h``: ``floor <= h <= top`` everywhere, ``h <= quiet`` on clear non-matches, ``h >= low`` on matches with ``low`` maximised; scipy's result (last variable: ``low``)."""
    require("fold", "scipy")
    from scipy.optimize import linprog

    x, basis = _grid(t, degree, [-guard, guard, clear])
    zero, one = np.zeros((len(x), 1)), np.ones((len(x), 1))
    rows = [np.hstack([-basis, zero]), np.hstack([basis, zero]),           # h >= floor, h <= top
            np.hstack([-basis[x >= guard], one[x >= guard]]),              # h >= low on matches
            np.hstack([basis[x <= clear], zero[x <= clear]])]              # h <= quiet on clear non-matches
    rhs = [np.full(len(x), -floor), np.full(len(x), top), np.zeros(int((x >= guard).sum())), np.full(int((x <= clear).sum()), quiet)]
    cost = np.zeros(degree + 2)
    cost[-1] = -1.0
    return linprog(cost, A_ub=np.vstack(rows), b_ub=np.concatenate(rhs),
                   bounds=[(None, None)] * (degree + 1) + [(0.0, top)], method="highs")


def _measure(poly: FoldPolynomial, t: float, k: int, guard: float, clear: float, tolerance: float,
            sure_from: float, check: bool = True) -> FoldDesign:
    """Measure ``poly``'s bounds exactly, place the thresholds and check soundness."""
    lo, hi = poly.lo, poly.hi
    floor, top = poly.extrema(lo, hi)
    near = poly.extrema(lo, -guard)[1]
    low = poly.extrema(guard, hi)[0]
    quiet = poly.extrema(lo, clear)[1]
    sure_at = k * near + 2 * tolerance
    sure_value = poly.extrema(sure_from, hi)[0] + (k - 1) * min(floor, 0.0)
    if sure_value < sure_at + tolerance:  # the grid was optimistic: move sure_from to where it holds
        xs = np.linspace(sure_from, hi, 20001)
        ok = poly(xs) + (k - 1) * min(floor, 0.0) >= sure_at + tolerance
        tail = np.flatnonzero(~ok)
        if tail.size == len(xs):
            raise InvalidArgument("the fold polynomial never reaches its sure threshold")
        sure_from = float(xs[tail[-1] + 1]) if tail.size else sure_from
    top_of_matches = low + (k - 1) * min(floor, 0.0)
    maybe_at = (k * max(quiet, 0.0) + top_of_matches) / 2
    out = FoldDesign(t=float(t), k=k, guard=guard, clear=clear, tolerance=tolerance, poly=poly,
                     floor=floor, top=top, near=near, low=low, quiet=quiet, sure_from=sure_from,
                     maybe_at=maybe_at, sure_at=sure_at)
    if check:
        out.check()
    return out


@dataclass
class FoldResults:
    """Per query eye: the folded answer and what led to it.

    - ``answer[e]``: :data:`MATCH`, :data:`NO_MATCH` or :data:`FLAGGED`;
    - ``sure[e]``, ``maybe[e]``: some slot of the eye is sure / maybe;
    - ``best_sum[e]``: the eye's largest slot sum;
    - ``slots``: slot sums computed (eyes x fold groups x gallery entries).
    """

    answer: np.ndarray
    sure: np.ndarray
    maybe: np.ndarray
    best_sum: np.ndarray
    slots: int

    def wrong(self, model: EyeResults, guard: float) -> np.ndarray:
        """Eyes whose clean answer differs from the plaintext model's bit although their best score is more than ``guard`` from the threshold (empty for a sound design)."""
        outside = self.answer != FLAGGED  # clean answers outside the band
        outside[model.guard_band(guard, unit="score")] = False
        return np.flatnonzero(outside & ((self.answer == MATCH) != model.bits))


def fold_match(
    queries: Templates,
    gallery: Templates,
    fold: FoldDesign,
    rotation_shift: int = DEFAULT_ROTATION_SHIFT,
    chunk: int = DEFAULT_CHUNK,
    progress: bool | None = None,
) -> FoldResults:
    """The folded answers of Algorithm 2 for each query eye, in the clear (module docstring).

    Rotations are taken in open-iris's order (:func:`~encmatch.iris.encoding.shifts`)
    and cut into fold groups of ``fold.k``; each slot adds ``f(x)`` over a
    group's rotations for one gallery entry.
    """
    _check_inputs(queries, gallery, chunk, fold.t)
    rho = len(shifts(rotation_shift))
    q, n = len(queries), len(gallery)
    groups = [(s, min(s + fold.k, rho)) for s in range(0, rho, fold.k)]
    qv, qm = query_matrices(queries, rotation_shift)
    sure = np.zeros(q, bool)
    maybe = np.zeros(q, bool)
    best = np.full(q, -np.inf)
    starts = range(0, n, chunk)
    bar = progress_bar(starts, desc="iris fold", unit="chunk", show=bool(progress if progress is not None else len(starts) > 1))
    for start in bar:
        # x = score - delta; a pair without common bits (score -inf) holds -delta.
        _, _, score = _chunk_scores(qv, qm, gallery, start, min(start + chunk, n), fold.t, None)
        x = (np.where(np.isfinite(score), score, 0.0) - fold.delta).reshape(q, rho, -1)
        for a, b in groups:
            sums, maybe_sums = fold.slot_sums(x[:, a:b], axis=1)
            s, m = fold.classify(sums, maybe_sums)
            sure |= s.any(axis=1)
            maybe |= m.any(axis=1)
            best = np.maximum(best, sums.max(axis=1))
    answer = np.where(sure, MATCH, np.where(maybe, FLAGGED, NO_MATCH))
    return FoldResults(answer=answer, sure=sure, maybe=maybe, best_sum=best, slots=q * len(groups) * n)


#: The kinds of simulated slots in :func:`check_sums`.
SCENARIOS = ("impostor", "genuine", "near misses", "duplicates", "arbitrary")


def check_sums(
    fold: FoldDesign,
    n: int,
    impostor: tuple[float, float] = (0.008, 0.034),
    genuine: tuple[float, float] = (0.5, 0.06),
    seed: int = 0,
    chunk: int = 1_000_000,
    progress: bool | None = None,
) -> dict:
    """Simulate ``n`` slots of ``fold.k`` scores and check every folded answer against the slot's truth.

    Slots cycle through :data:`SCENARIOS`: impostor scores ~ N(``impostor``)
    (mean and std of the score; papers/004 measured N(0.008, 0.034) on
    open-iris templates); one genuine score ~ N(``genuine``) among
    impostors; 1 to k near misses just below the guard band; 2 to k
    matches (one eye enrolled several times); k scores uniform on the
    whole domain. A slot is wrong when it is sure with every ``x <= -guard``
    or not maybe with some ``x >= guard``; the count must be 0. Returns
    per scenario the slots, wrong answers, sure, maybe and flagged counts.
    """
    rng = np.random.default_rng(seed)
    k, delta, lo, hi = fold.k, fold.delta, fold.poly.lo, fold.poly.hi
    stats = {s: {"slots": 0, "wrong": 0, "sure": 0, "maybe": 0, "flagged": 0} for s in SCENARIOS}
    bar = progress_bar(range(0, n, chunk), desc="fold sums", unit="chunk", show=bool(progress if progress is not None else n > 10 * chunk))
    for start in bar:
        m = min(chunk, n - start)
        kind = (np.arange(start, start + m) % len(SCENARIOS))
        x = np.clip(rng.normal(impostor[0], impostor[1], (m, k)) - delta, lo, hi)
        g = kind == 1
        x[g, 0] = np.clip(rng.normal(genuine[0], genuine[1], g.sum()) - delta, lo, hi)
        near = kind == 2
        count = rng.integers(1, k + 1, near.sum())
        vals = -fold.guard - rng.exponential(0.02, (near.sum(), k))
        x[near] = np.where(np.arange(k) < count[:, None], vals, x[near])
        dup = kind == 3
        count = rng.integers(2, k + 1, dup.sum())
        vals = np.clip(rng.normal(genuine[0], genuine[1], (dup.sum(), k)) - delta, lo, hi)
        x[dup] = np.where(np.arange(k) < count[:, None], vals, x[dup])
        arb = kind == 4
        x[arb] = rng.uniform(lo, hi, (arb.sum(), k))
        sure, maybe = fold.classify(*fold.slot_sums(x, axis=1))
        top = x.max(axis=1)
        wrong = (sure & (top <= -fold.guard)) | (~maybe & (top >= fold.guard))
        for i, name in enumerate(SCENARIOS):
            sel = kind == i
            st = stats[name]
            st["slots"] += int(sel.sum())
            st["wrong"] += int((wrong & sel).sum())
            st["sure"] += int((sure & sel).sum())
            st["maybe"] += int((maybe & sel).sum())
            st["flagged"] += int((maybe & ~sure & sel).sum())
    return stats
