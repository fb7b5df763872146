"""A batch of iris templates held as packed bits, with ids and optional ground truth.

A gallery of ``7 * 2^14 = 114,688`` templates is 3.8 GB as bool arrays but
470 MB packed (``np.packbits``, 8 bits a byte, C order of the layout);
:class:`Templates` keeps the packed form and unpacks slices on demand
(:meth:`Templates.bits`), which is how :mod:`encmatch.iris.model` walks a
gallery chunk by chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import InvalidArgument
from .encoding import LAYOUT, check_layout, check_template

__all__ = ["Templates", "NOT_ENROLLED"]

#: Ground-truth value of a query eye that is not in the gallery.
NOT_ENROLLED = ""


def _strings(values: Sequence[Any], n: int, name: str) -> np.ndarray:
    """``values`` as a unicode array of length ``n``."""
    out = np.asarray(values).astype(str)
    if out.shape != (n,):
        raise InvalidArgument(f"{name}: expected {n} values, got shape {out.shape}")
    return out


@dataclass(frozen=True)
class Templates:
    """``n`` templates: packed ``codes``/``masks`` ``[n, ceil(l/8)]`` uint8, ``ids`` ``[n]`` str, ``layout``.

    ``ids`` may be given as ``None``: ``eye000000``, ``eye000001``...

    ``truth`` (optional, ``[n]`` str) is the gallery id each template (a
    query eye) is enrolled as, :data:`NOT_ENROLLED` when it is not; the
    generator writes it so that matching can be scored. ``version`` is
    open-iris's ``iris_code_version`` (``v<major>.<minor>``).
    """

    codes: np.ndarray
    masks: np.ndarray
    ids: np.ndarray
    layout: tuple[int, ...] = LAYOUT
    truth: np.ndarray | None = None
    version: str = "v0.1"

    def __post_init__(self) -> None:
        """Check shapes and types of the packed arrays against ``layout``."""
        layout = check_layout(self.layout)
        object.__setattr__(self, "layout", layout)
        width = (int(np.prod(layout)) + 7) // 8
        for name in ("codes", "masks"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 2 or arr.shape[1] != width:
                raise InvalidArgument(f"{name}: expected packed uint8 [n, {width}] for layout {layout}, got "
                                      f"{getattr(arr, 'dtype', type(arr))} {getattr(arr, 'shape', '')}")
        if self.codes.shape != self.masks.shape:
            raise InvalidArgument(f"codes have shape {self.codes.shape}, masks {self.masks.shape}")
        empty = np.flatnonzero(~self.masks.any(axis=1))
        if empty.size:
            raise InvalidArgument(f"mask of template {int(empty[0])} is empty (no usable bit); "
                                  f"{empty.size} such template(s)")
        n = len(self.codes)
        ids = [f"eye{i:06d}" for i in range(n)] if self.ids is None else self.ids
        object.__setattr__(self, "ids", _strings(ids, n, "ids"))
        if self.truth is not None:
            object.__setattr__(self, "truth", _strings(self.truth, n, "truth"))

    @classmethod
    def from_bits(
        cls,
        codes: Any,
        masks: Any,
        ids: Sequence[Any] | None = None,
        layout: tuple[int, ...] = LAYOUT,
        truth: Sequence[Any] | None = None,
        version: str = "v0.1",
    ) -> "Templates":
        """Pack checked bool/0-1 arrays of shape ``(n, *layout)`` (or one ``layout`` template)."""
        layout = check_layout(layout)
        c, m = check_template(codes, masks, layout)
        c = c.reshape(-1, int(np.prod(layout)))
        m = m.reshape(c.shape)
        return cls(np.packbits(c, axis=1), np.packbits(m, axis=1), ids, layout, truth, version)

    @property
    def bit_length(self) -> int:
        """``l``, the number of bits of one code."""
        return int(np.prod(self.layout))

    def __len__(self) -> int:
        return len(self.codes)

    def bits(self, start: int = 0, stop: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Unpacked ``(codes, masks)`` bool arrays ``(k, *layout)`` of templates ``start:stop``."""
        sl = slice(start, stop)
        shape = (-1, *self.layout)
        c = np.unpackbits(self.codes[sl], axis=1, count=self.bit_length).astype(bool).reshape(shape)
        m = np.unpackbits(self.masks[sl], axis=1, count=self.bit_length).astype(bool).reshape(shape)
        return c, m

    def select(self, index: Any) -> "Templates":
        """The templates at ``index`` (an int array, a boolean array or a slice)."""
        truth = None if self.truth is None else self.truth[index]
        return Templates(self.codes[index], self.masks[index], self.ids[index], self.layout, truth, self.version)

    def mask_coverage(self) -> np.ndarray:
        """Fraction of usable bits of each template's mask, ``[n]`` float64."""
        return np.bitwise_count(self.masks).sum(axis=1, dtype=np.int64) / self.bit_length

    @staticmethod
    def concatenate(parts: Sequence["Templates"]) -> "Templates":
        """One batch from several of the same layout (truth kept only if every part has it)."""
        if not parts:
            raise InvalidArgument("no templates to concatenate")
        layouts = {p.layout for p in parts}
        if len(layouts) != 1:
            raise InvalidArgument(f"templates of different layouts: {sorted(layouts)}")
        truth = None if any(p.truth is None for p in parts) else np.concatenate([p.truth for p in parts])
        return Templates(
            np.concatenate([p.codes for p in parts]), np.concatenate([p.masks for p in parts]),
            np.concatenate([p.ids for p in parts]), parts[0].layout, truth, parts[0].version,
        )
