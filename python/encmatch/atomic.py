"""Durable file writes: a file is replaced whole or not at all.

Shared by the SDK (label keys, sealed labels) and the service's storage.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["write_atomic", "fsync_dir"]


def fsync_dir(path: Path) -> None:
    """fsync a directory so that the renames and creations in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a temporary file: write, fsync, rename, fsync the directory."""
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
