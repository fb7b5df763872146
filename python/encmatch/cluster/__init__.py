"""Scale-out: an encrypted index sharded over Ray actors, and capacity planning.

:class:`RayBackend` opens an index as a :class:`RayServer` (the same search
interface as :class:`encmatch.Server`): ``EncryptedIndex(path,
backend=RayBackend(...))`` and ``encmatch serve --backend ray`` use it.
:func:`encmatch.cluster.plan.plan` sizes a fleet from measured per-shard
costs (``encmatch plan``). Ray is imported only when the Ray backend is
used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RayBackend", "RayServer", "ensure_ray", "shard_groups"]


def __getattr__(name: str) -> Any:
    """The Ray backend's names, imported (with Ray) on first use."""
    if name in __all__:
        from . import ray_backend

        return getattr(ray_backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
