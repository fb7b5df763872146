"""The enrollment journal: a rerun of an interrupted enrollment adds nothing twice.

The core appends one group per call and rewrites the index's manifest
atomically after the group file is in, so a killed or Ctrl-C'd
``encmatch enroll`` leaves every group written so far and none in part.
Rerunning the same command used to append those groups again (12,048
entries for 10,000 vectors: one face matching at two positions).

The journal (``index_dir/enrollments.json``, written atomically) records,
per batch of at most one group, the SHA-256 of its content (dimension,
vectors as float64, labels and payloads) and the positions it took. Each batch is
written as *pending* before the core call and *done* after it; a pending
record found by the next enrollment is settled against the manifest (the
group is in if the entry count reached its end, absent if the count is
still at its start). A batch whose content is already done is skipped and
reported, so a rerun adds only what the interrupted run did not.

The content hash identifies a batch, not a person: the same vectors in
batches cut differently (another ``batch_size``) hash differently.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import Corrupt
from .atomic import write_atomic

#: The journal's file name inside an index directory.
JOURNAL_FILE = "enrollments.json"
_VERSION = 1


def batch_digest(vectors: np.ndarray, labels: Sequence[str] | None, payloads: np.ndarray | None = None) -> str:
    """SHA-256 (hex) of a batch: its shape, its vectors as little-endian float64, its labels and, for an
    index with payloads, its payloads as little-endian int16 (a batch without payloads hashes as before)."""
    v = np.ascontiguousarray(vectors, dtype="<f8")
    h = hashlib.sha256()
    h.update(f"encmatch-batch/v1 {v.shape[0]}x{v.shape[1]}\n".encode())
    h.update(v.tobytes())
    h.update(json.dumps(None if labels is None else list(labels)).encode())
    if payloads is not None:
        p = np.ascontiguousarray(payloads, dtype="<i2")
        h.update(f"payloads {p.shape[0]}x{p.shape[1]}\n".encode())
        h.update(p.tobytes())
    return h.hexdigest()


@dataclass
class Batch:
    """One journal record: a batch's digest and the positions ``[start, start + count)`` it took."""

    digest: str
    start: int
    count: int
    done: bool = False


@dataclass
class Journal:
    """The enrollment journal of one index directory (see the module doc)."""

    path: Path
    batches: list[Batch] = field(default_factory=list)

    @classmethod
    def open(cls, index_dir: Path, entries: int) -> "Journal":
        """Read the journal of ``index_dir`` and settle a pending batch against the manifest's ``entries``."""
        path = Path(index_dir) / JOURNAL_FILE
        journal = cls(path, _read_batches(path, "enrollment journal", lambda b: Batch(
            str(b["digest"]), int(b["start"]), int(b["count"]), bool(b["done"]))))
        journal._settle(entries)
        return journal

    def _settle(self, entries: int) -> None:
        pending = [b for b in self.batches if not b.done]
        if not pending:
            return
        for b in pending:
            if entries >= b.start + b.count:
                b.done = True
            elif entries <= b.start:
                self.batches.remove(b)
            else:
                raise Corrupt(f"enrollment journal {self.path}: an interrupted batch took positions "
                              f"[{b.start}, {b.start + b.count}) but the index holds {entries} entries")
        self._write()

    def done(self, digest: str) -> Batch | None:
        """The completed batch with this digest, if any."""
        return next((b for b in self.batches if b.done and b.digest == digest), None)

    def begin(self, digest: str, start: int, count: int) -> Batch:
        """Record a batch as pending before the core appends it."""
        b = Batch(digest, start, count)
        self.batches.append(b)
        self._write()
        return b

    def finish(self, batch: Batch, start: int) -> None:
        """Record a pending batch as done at ``start`` (the position the core gave it)."""
        batch.start, batch.done = start, True
        self._write()

    def _write(self) -> None:
        doc = {"version": _VERSION, "batches": [b.__dict__ for b in self.batches]}
        write_atomic(self.path, json.dumps(doc, separators=(",", ":")).encode())


def _read_batches(path: Path, what: str, batch: Callable[[dict], Any]) -> list:
    """The batches of the journal file at ``path`` (none if it does not exist), each made by ``batch``;
    Corrupt, naming ``what``, for a file that cannot be read."""
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text())
        if doc.get("version") != _VERSION:
            raise ValueError(f"version {doc.get('version')!r}")
        return [batch(b) for b in doc["batches"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise Corrupt(f"{what} {path} is unreadable ({exc}); it is only needed to resume an interrupted "
                      "enrollment: remove it if none was interrupted") from None


#: Where remote enrollments are journalled (``ENCMATCH_STATE_DIR`` overrides).
def state_dir() -> Path:
    """The directory of this user's remote-enrollment journals."""
    root = os.environ.get("ENCMATCH_STATE_DIR") or os.environ.get("XDG_STATE_HOME")
    return Path(root) / "encmatch" if root else Path.home() / ".local" / "state" / "encmatch"


@dataclass
class RemoteBatch:
    """One remote enrollment: its digest and the group entries its commit adds to the manifest."""

    digest: str
    groups: list[dict]
    done: bool = False


@dataclass
class RemoteJournal:
    """The journal of the enrollments this machine sends to one remote index.

    A remote enrollment is one commit: the new groups, named in the
    service's manifest by file, start, count and size. The batch is written
    as pending (with those entries) before the commit and done after it; a
    pending batch found by the next enrollment is settled against the
    service's manifest: done when its groups are there, dropped when they
    are not (the commit never happened). A batch whose content is done is
    not enrolled again. Kept on the enroller's side: the service never sees
    a digest of the vectors (a server holding a photo could otherwise test
    whether its embedding is enrolled).
    """

    path: Path
    batches: list[RemoteBatch] = field(default_factory=list)

    @classmethod
    def open(cls, url: str, index_id: str, manifest: dict) -> "RemoteJournal":
        """The journal of index ``index_id`` at service ``url``, settled against its current ``manifest``."""
        name = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
        path = state_dir() / "remote-enrollments" / f"{name}-{index_id}.json"
        journal = cls(path, _read_batches(path, "remote enrollment journal", lambda b: RemoteBatch(
            str(b["digest"]), list(b["groups"]), bool(b["done"]))))
        committed = [{k: g.get(k) for k in ("file", "start", "count", "bytes")} for g in manifest.get("groups") or []]
        changed = False
        for b in [b for b in journal.batches if not b.done]:
            if b.groups and all(g in committed for g in b.groups):
                b.done = True
            else:
                journal.batches.remove(b)
            changed = True
        if changed:
            journal._write()
        return journal

    def done(self, digest: str) -> RemoteBatch | None:
        """The committed batch with this digest, if any."""
        return next((b for b in self.batches if b.done and b.digest == digest), None)

    def begin(self, digest: str, groups: list[dict]) -> RemoteBatch:
        """Record a batch as pending before its commit."""
        b = RemoteBatch(digest, [{k: g.get(k) for k in ("file", "start", "count", "bytes")} for g in groups])
        self.batches.append(b)
        self._write()
        return b

    def finish(self, batch: RemoteBatch) -> None:
        """Record a pending batch as committed."""
        batch.done = True
        self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"version": _VERSION, "batches": [b.__dict__ for b in self.batches]}
        write_atomic(self.path, json.dumps(doc, separators=(",", ":")).encode())
