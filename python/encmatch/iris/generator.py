"""Synthetic iris templates with realistic statistics (there is no real iris data in any registry).

**Codes.** Each identity (eye) has a latent Gaussian random field per
filter plane (``filters x 2`` planes of ``rows x columns``), smooth along
the angular axis (a circular Gaussian kernel of ``angular_sigma`` columns)
and along the radial axis (``radial_sigma`` rows); the code is its sign.
Codes of different eyes are independent, so their fractional Hamming
distance (FHD) has mean 0.5, and the spatial correlation makes its spread
that of a binomial with far fewer than ``l`` trials: Daugman's *degrees of
freedom* ``DoF = p (1 - p) / var(FHD)``, about 250 for real iris codes.
The defaults are calibrated to that (``docs/IRIS.md``). The field is drawn
directly in the angular Fourier domain, keeping only the harmonics the
kernel passes, which makes 114,688 templates take seconds.

**Genuine samples.** The enrolled template is the sign of the eye's field
``X``; another capture of the same eye is the sign of
``cos(pi f) X + sin(pi f) Y`` with a fresh field ``Y``, which differs
from the enrolled code on a fraction ``f`` of the bits (``P[sign
differs] = arccos(rho) / pi`` for correlation ``rho``), in spatially
correlated patches like real capture noise. ``f`` is drawn per capture
around ``genuine_fhd``; the capture is rotated by a random offset of at
most ``max_offset`` columns (head tilt), and gets its own mask.

**Masks** (1 = usable) cover about 80 % of the bits, like papers/004's
Bernoulli(0.8): rows run from the pupil (row 0) to the limbus; the upper
eyelid occludes the outer rows over a parabolic arc around the top
(column ``columns / 4``), the lower eyelid a smaller arc around the bottom,
and eyelashes/reflections add sparse short runs along the angle. The same
spatial mask applies to every filter plane, as open-iris derives its
mask codes from one noise mask.

Everything is seeded: the same seed and settings give the same templates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from .._util.progress import progress as progress_bar

from ..errors import InvalidArgument
from .encoding import LAYOUT, check_layout
from .templates import NOT_ENROLLED, Templates

__all__ = ["IrisGenerator", "POPULATIONS", "generate"]

#: Harmonics whose kernel gain is below this are not drawn (they would change under 1e-4 of the field).
_GAIN_CUTOFF = 1e-4


@dataclass(frozen=True)
class IrisGenerator:
    """Settings of the synthetic iris population (defaults: calibrated, ``docs/IRIS.md``)."""

    angular_sigma: float = 5.8
    radial_sigma: float = 3.0
    genuine_fhd: float = 0.25
    genuine_spread: float = 0.03
    max_offset: int = 10
    upper_depth: tuple[float, float] = (4.0, 13.0)
    upper_halfwidth: tuple[float, float] = (40.0, 80.0)
    lower_depth: tuple[float, float] = (0.0, 6.0)
    lower_halfwidth: tuple[float, float] = (20.0, 50.0)
    lash_rate: float = 0.006
    lash_length: int = 5
    layout: tuple[int, ...] = LAYOUT

    def __post_init__(self) -> None:
        """Reject settings outside their meaning."""
        object.__setattr__(self, "layout", check_layout(self.layout))
        cols = self.layout[1]
        if self.angular_sigma <= 0 or self.radial_sigma <= 0:
            raise InvalidArgument("angular_sigma and radial_sigma must be > 0")
        if not 0 <= self.genuine_fhd < 0.5 or self.genuine_spread < 0:
            raise InvalidArgument(f"genuine_fhd must be in [0, 0.5) and genuine_spread >= 0, got "
                                  f"{self.genuine_fhd}, {self.genuine_spread}")
        if not 0 <= self.max_offset <= cols // 2:
            raise InvalidArgument(f"max_offset must be in [0, {cols // 2}], got {self.max_offset}")
        if not 0 <= self.lash_rate < 1 or self.lash_length < 1:
            raise InvalidArgument("lash_rate must be in [0, 1) and lash_length >= 1")

    # -- codes -------------------------------------------------------------

    def _angular_gain(self) -> np.ndarray:
        """Kernel gain per kept angular harmonic ``k = 0..K``."""
        cols = self.layout[1]
        k = np.arange(cols // 2 + 1)
        gain = np.exp(-0.5 * (2 * np.pi * k * self.angular_sigma / cols) ** 2)
        return gain[gain >= _GAIN_CUTOFF]

    def _radial_kernel(self) -> np.ndarray:
        """``rows x rows`` Gaussian smoothing matrix along the (non-circular) radial axis."""
        r = np.arange(self.layout[0])
        k = np.exp(-0.5 * ((r[:, None] - r[None, :]) / self.radial_sigma) ** 2)
        return (k / k.sum(axis=1, keepdims=True)).astype(np.float32)

    def fields(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` latent fields, float32 ``(n, *layout)``: their signs are iris codes."""
        rows, cols, filters, parts = self.layout
        gain = self._angular_gain().astype(np.float32)
        shape = (n, filters * parts, rows, len(gain))
        kernel = self._radial_kernel()
        re, im = (kernel @ (rng.standard_normal(shape, dtype=np.float32) * gain) for _ in range(2))
        field = np.fft.irfft(re + 1j * im, n=cols, axis=-1).astype(np.float32)
        return field.reshape(n, filters, parts, rows, cols).transpose(0, 3, 4, 1, 2)

    def capture(self, rng: np.random.Generator, field: np.ndarray) -> np.ndarray:
        """Another capture of the eyes of ``field`` ``(n, *layout)``: codes at FHD ~ ``genuine_fhd``, rotated."""
        n = len(field)
        f = np.clip(rng.normal(self.genuine_fhd, self.genuine_spread, n), 0.0, 0.49)
        rho = np.cos(np.pi * f).astype(np.float32)[:, None, None, None, None]
        mixed = rho * field + np.sqrt(1 - rho**2) * self.fields(rng, n)
        offsets = rng.integers(-self.max_offset, self.max_offset + 1, n)
        codes = mixed > 0
        for i, o in enumerate(offsets):
            codes[i] = np.roll(codes[i], o, axis=1)
        return codes

    # -- masks -------------------------------------------------------------

    def _eyelid(self, rng: np.random.Generator, n: int, centre: float, depth: tuple, halfwidth: tuple) -> np.ndarray:
        """Occluded ``(n, rows, cols)``: outer rows under a parabolic arc around column ``centre``."""
        rows, cols = self.layout[:2]
        c = centre + rng.normal(0, cols / 64, (n, 1))
        d = rng.uniform(*depth, (n, 1))
        w = rng.uniform(*halfwidth, (n, 1))
        dist = np.abs((np.arange(cols)[None, :] - c + cols / 2) % cols - cols / 2)
        reach = d * np.clip(1 - (dist / w) ** 2, 0, None)
        return np.arange(rows)[None, :, None] >= rows - reach[:, None, :]

    def _lashes(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Occluded ``(n, rows, cols)``: sparse runs of ``lash_length`` columns."""
        rows, cols = self.layout[:2]
        seeds = rng.random((n, rows, cols)) < self.lash_rate
        out = seeds.copy()
        for s in range(1, self.lash_length):
            out |= np.roll(seeds, s, axis=2)
        return out

    def masks(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` masks, bool ``(n, *layout)``, True where usable (about 80 %)."""
        cols = self.layout[1]
        occluded = (
            self._eyelid(rng, n, cols / 4, self.upper_depth, self.upper_halfwidth)
            | self._eyelid(rng, n, 3 * cols / 4, self.lower_depth, self.lower_halfwidth)
            | self._lashes(rng, n)
        )
        usable = ~occluded
        return np.broadcast_to(usable[..., None, None], (n, *self.layout))


#: Named populations: ``daugman`` (the default settings: ~250 degrees of freedom, Daugman's
#: figure for real iris codes, the issue's target) and ``papers004`` (~850: the single-rotation
#: impostor scores N(0.008, 0.034) papers/004 measured on open-iris templates of ND-IRIS-0405,
#: i.e. FHD std ~0.017). Calibration of both: ``docs/IRIS.md``.
POPULATIONS: dict[str, IrisGenerator] = {
    "daugman": IrisGenerator(),
    "papers004": IrisGenerator(angular_sigma=2.6, radial_sigma=1.8),
}


def _check_counts(n_gallery: int, n_queries: int, n_enrolled: int) -> None:
    """Raise unless ``0 <= n_enrolled <= min(n_queries, n_gallery)`` and the gallery is non-empty."""
    if n_gallery < 1 or n_queries < 0:
        raise InvalidArgument(f"need a gallery of >= 1 template and >= 0 queries, got {n_gallery}, {n_queries}")
    if not 0 <= n_enrolled <= min(n_queries, n_gallery):
        raise InvalidArgument(f"enrolled query eyes must be in [0, min(queries, gallery)] = "
                              f"[0, {min(n_queries, n_gallery)}], got {n_enrolled}")


def _gallery_chunk(
    gen: IrisGenerator, rng: np.random.Generator, k: int, enrolled: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``k`` gallery templates ``(codes, masks)`` and captures of the rows ``enrolled`` (codes, masks)."""
    field = gen.fields(rng, k)
    probe_codes = gen.capture(rng, field[enrolled])
    return field > 0, gen.masks(rng, k), probe_codes, gen.masks(rng, len(probe_codes))


def generate(
    n_gallery: int,
    n_queries: int = 0,
    n_enrolled: int = 0,
    seed: int = 0,
    generator: IrisGenerator | None = None,
    chunk: int = 2048,
    progress: bool | None = None,
) -> tuple[Templates, Templates]:
    """A gallery of ``n_gallery`` eyes and ``n_queries`` query captures, ``n_enrolled`` of them of gallery eyes.

    Returns ``(gallery, queries)``. Gallery ids are ``eye000000``...;
    ``queries.truth`` is the gallery id of each enrolled query eye and
    :data:`~encmatch.iris.templates.NOT_ENROLLED` for the others, whose
    eyes are not in the gallery. Query order is shuffled.
    """
    gen = generator or IrisGenerator()
    _check_counts(n_gallery, n_queries, n_enrolled)
    root = np.random.SeedSequence(seed)
    plan_seed, outsider_seed, *chunk_seeds = root.spawn(2 + (n_gallery + chunk - 1) // chunk)
    plan = np.random.default_rng(plan_seed)
    chosen = np.sort(plan.choice(n_gallery, n_enrolled, replace=False))
    parts, probes = [], []
    bar = progress_bar(range(0, n_gallery, chunk), desc="iris generate", unit="chunk",
                       show=bool(progress if progress is not None else n_gallery > chunk))
    for start, s in zip(bar, chunk_seeds):
        k = min(chunk, n_gallery - start)
        local = chosen[(chosen >= start) & (chosen < start + k)] - start
        codes, masks, pc, pm = _gallery_chunk(gen, np.random.default_rng(s), k, local)
        parts.append(Templates.from_bits(codes, masks, [f"eye{start + i:06d}" for i in range(k)], gen.layout))
        if len(local):
            ids = [f"eye{start + i:06d}" for i in local]
            probes.append(Templates.from_bits(pc, pm, ids, gen.layout, truth=ids))
    gallery = Templates.concatenate(parts)
    queries = _with_outsiders(gen, np.random.default_rng(outsider_seed), probes, n_queries - n_enrolled)
    order = plan.permutation(len(queries))
    queries = queries.select(order)
    return gallery, Templates(queries.codes, queries.masks, [f"query{i:05d}" for i in range(len(queries))],
                              queries.layout, queries.truth)


def _with_outsiders(gen: IrisGenerator, rng: np.random.Generator, probes: list, n: int) -> Templates:
    """``probes`` plus ``n`` captures of eyes that are not in the gallery."""
    if n:
        pc = gen.capture(rng, gen.fields(rng, n))
        probes = probes + [Templates.from_bits(pc, gen.masks(rng, n), [f"outsider{i:05d}" for i in range(n)],
                                               gen.layout, truth=[NOT_ENROLLED] * n)]
    if not probes:
        empty = np.zeros((0, (int(np.prod(gen.layout)) + 7) // 8), np.uint8)
        return Templates(empty, empty.copy(), np.zeros(0, str), gen.layout, np.zeros(0, str))
    return Templates.concatenate(probes)
