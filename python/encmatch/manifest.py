"""An index's manifest (``manifest.json``): :func:`index_info` reads it through the core and
:class:`Manifest` is the only place that knows its field names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import _core
from ._util.paths import PathLike
from .errors import Internal

__all__ = ["Manifest", "index_info"]


def index_info(index_dir: PathLike) -> dict:
    """The manifest of the index in ``index_dir`` (read and checked by the core), with the comparator's
    ``guard_band`` and ``decision_band`` at its threshold."""
    return _core.call("index_info", {"index_dir": Path(index_dir)})[0]


@dataclass(frozen=True)
class Manifest:
    """A read-only view of an index's manifest: ``raw`` is the JSON object as the core wrote (or a
    service sent) it; the properties read its fields, with the defaults of manifests made before
    those fields existed."""

    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def of(cls, manifest: Mapping[str, Any] | Manifest) -> Manifest:
        """``manifest`` as a :class:`Manifest` (itself when it is one)."""
        return manifest if isinstance(manifest, Manifest) else cls(manifest)

    @property
    def params(self) -> dict:
        """The parameter description (preset, kappa, dim, slots, group size...; empty if absent)."""
        return dict(self.raw.get("params") or {})

    @property
    def dim(self) -> int:
        """The vector dimension."""
        dim = self.raw.get("dim", self.params.get("dim"))
        if dim is None:
            raise Internal("the index manifest has no dimension")
        return int(dim)

    @property
    def total(self) -> int:
        """The number of enrolled vectors."""
        for key in ("count", "total"):
            if key in self.raw:
                return int(self.raw[key])
        return 0

    @property
    def payload_width(self) -> int:
        """Payload values per record (0: no payloads)."""
        return int(self.raw.get("payload_width") or 0)

    @property
    def rule(self) -> str:
        """The threshold rule, ``">="`` or ``">"`` (older manifests: ``">="``)."""
        return str(self.raw.get("rule") or ">=")

    @property
    def delta(self) -> float:
        """The match threshold, fixed when the index was created."""
        return float(self.raw["delta"])

    @property
    def strategy(self) -> tuple[str, int]:
        """``(strategy, n1)`` the index was made for (``("", 0)`` when the manifest does not say)."""
        return str(self.raw.get("strategy") or ""), int(self.raw.get("n1") or 0)
