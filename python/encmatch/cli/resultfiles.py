"""Where ``encmatch query`` writes encrypted results, and how ``encmatch decrypt`` finds them again.

One probe writes one file, ``--out r.bin``. Several probes write a folder,
``--out results/``: one file per probe (``0000.bin``, ``0001.bin``...) and
``results.json``, which names the probe of each file::

    {"mode": "identification", "probes": [{"name": "alice.jpg", "file": "0000.bin"}, ...]}

The destination is checked (:func:`plan`) before any key is loaded or any
photo embedded, so a mistyped path fails at once, not after the work.
Every file is written atomically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .._util.atomic import check_writable_folder, write_atomic
from ..errors import Corrupt, InvalidArgument, NotFound

__all__ = ["MANIFEST", "ResultFiles", "precheck", "plan", "expand"]

#: The listing of a results folder.
MANIFEST = "results.json"


@dataclass
class ResultFiles:
    """The destination of one query run: a single file, or a folder of one file per probe."""

    out: Path
    folder: bool
    mode: str
    written: list[dict] = field(default_factory=list)

    def path(self, i: int) -> Path:
        """Where probe ``i``'s result goes."""
        return self.out / f"{i:04d}.bin" if self.folder else self.out

    def write(self, i: int, name: str, blob: bytes) -> Path:
        """Write probe ``i`` (named ``name``)'s encrypted result; returns its path."""
        path = self.path(i)
        write_atomic(path, blob)
        self.written.append({"name": name, "file": path.name})
        return path

    def finish(self) -> None:
        """Write the folder's ``results.json`` (nothing for a single file)."""
        if self.folder:
            doc = {"mode": self.mode, "probes": self.written}
            write_atomic(self.out / MANIFEST, (json.dumps(doc, indent=1) + "\n").encode())


def precheck(out: Path) -> None:
    """The check that needs no probe count: ``out`` is a folder to write in, or a new or existing file
    (not a folder) in one. Run before any work; :func:`plan` completes it."""
    out = Path(out)
    if out.is_dir():
        check_writable_folder(out, f"--out {out}")
    else:
        check_writable_folder(out.parent, f"--out {out}")


def plan(out: Path | None, count: int, mode: str) -> ResultFiles:
    """Check ``--out`` for ``count`` probes before any work.

    One probe: a file whose folder exists (an existing folder gets
    ``0000.bin`` and ``results.json`` in it). Several: a folder, created
    here if its parent exists; refused if it already holds another run's
    ``results.json`` or ``.bin`` files (nothing is overwritten silently).
    """
    if out is None:
        raise InvalidArgument("--out is required (or --decrypt to print the answers only)")
    out = Path(out)
    if count > 1 or out.is_dir():
        if (out.exists() and not out.is_dir()) or (not out.exists() and out.suffix == ".bin"):
            raise InvalidArgument(f"--out {out}: {count} probes need a folder (one result file each), "
                                  "not a file")
        if not out.exists():
            check_writable_folder(out.parent, f"--out {out}")
            out.mkdir()
        check_writable_folder(out, f"--out {out}")
        if (out / MANIFEST).exists() or any(out.glob("[0-9][0-9][0-9][0-9].bin")):
            raise InvalidArgument(f"--out {out} already holds results of another query; choose an empty folder")
        return ResultFiles(out, True, mode)
    check_writable_folder(out.parent, f"--out {out}")
    return ResultFiles(out, False, mode)


def expand(paths: Sequence[Path]) -> list[tuple[str, Path]]:
    """The (probe name, result file) pairs of ``decrypt``'s arguments: files, or results folders."""
    pairs: list[tuple[str, Path]] = []
    for p in map(Path, paths):
        if p.is_dir():
            listing = p / MANIFEST
            if not listing.is_file():
                raise NotFound(f"{p} is a folder without {MANIFEST}: not the output of `encmatch query`")
            try:
                probes = json.loads(listing.read_text())["probes"]
                pairs += [(str(e["name"]), p / Path(str(e["file"])).name) for e in probes]
            except (ValueError, KeyError, TypeError) as exc:
                raise Corrupt(f"{listing}: not a results listing ({exc})") from None
        elif p.is_file():
            pairs.append((p.name, p))
        else:
            raise NotFound(f"no such file: {p}")
    return pairs
