"""Paths the SDK takes from its users.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import NotFound


PathLike = str | os.PathLike


def require_dir(path: PathLike, what: str) -> Path:
    """Return ``path`` as a Path, raising NotFound with a clear message if it is not a directory."""
    p = Path(path)
    if not p.is_dir():
        raise NotFound(f"{what} {p} does not exist")
    return p


