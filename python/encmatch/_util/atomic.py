"""Durable file writes: a file is replaced whole or not at all; and the check, made before any
work, that a destination folder can be written in.

Shared by the SDK (label keys, sealed labels), the command line's outputs
and the service's storage.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ..errors import InvalidArgument

__all__ = ["write_atomic", "fsync_dir", "check_writable_folder"]


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


def check_writable_folder(folder: Path, what: str) -> None:
    """InvalidArgument unless ``folder`` exists, is a folder and this process may create files in it;
    ``what`` (``--out results/``, ``-o x.npz``) starts the message."""
    if not folder.exists():
        raise InvalidArgument(f"{what}: the folder {folder} does not exist (create it first)")
    if not folder.is_dir():
        raise InvalidArgument(f"{what}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidArgument(f"{what}: permission denied (cannot write in {folder})")
