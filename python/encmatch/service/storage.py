"""The service's disk: tenants' indexes, resumable uploads and committed generations.

Layout under the data directory::

    tenants.json                          tenants and token hashes (encmatch.service.tenancy)
    tenants/<tenant>/<index id>/
        index.json                        id, label, creation time, the key set's keys.json
        keys/                             keys.json, relin.key, gal-<element>.key (never a secret key)
        uploads/<name>.part, <name>.json  an upload in progress: bytes so far, declared size and SHA-256
        files/<name>                      a complete, verified gallery file not yet committed
        gen-<N>/                          a committed generation: manifest.json, its group files,
                                          sealed.json and the sealed label files it lists (opaque)
        current.json                      {"generation": N, "files": {name: sha256}}
    tmp/, trash/                          staging of new indexes, deleted indexes (emptied at start)
    service.lock                          flock'ed by the one service process that uses the directory

Durability rules (a ``kill -9`` at any point loses nothing acknowledged
and leaves nothing half-made that loads):

- a new index is assembled in ``tmp/`` and renamed into place whole;
- an upload chunk is acknowledged only after its bytes are fsynced and the
  upload's record (bytes received) is replaced atomically; at start, a
  ``.part`` longer than its record is cut back to it;
- a finished upload is verified (declared SHA-256, the frame's own length
  and checksum) before it is renamed into ``files/`` or ``keys/``;
- a commit builds ``gen-<N>`` from hard links of verified files, the core
  loads it, and only then is ``current.json`` atomically replaced: an
  index is visible (listed, searchable) only once it has a
  ``current.json``; a crash before that leaves the previous generation;
- every rename is followed by an fsync of its directory.

The service never holds a secret key: uploads are checked against the
frame header (:mod:`encmatch.service.frames`) before their first byte is
written, against an allow-list by content, not by name: a key file must
be the key kind its name calls for, a gallery file a ``gallery-group``
frame of the index's layout, a ``*.sealed`` file ``sealed-labels``;
any other kind (a secret key, a label secret key, a threshold share, a
receiver's secret key, a kind this version does not know) is refused
and the partial upload deleted. Nor does it hold a name: a manifest carrying ``labels`` is
refused, and labels arrive only sealed (``*.sealed`` uploads, kind
``sealed-labels``) for the key holder's label key; the service checks
their frame like any upload and stores and returns them without reading
them. The threshold is the index's: a commit that changes the delta (or
the uid) of the committed manifest is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .._util.atomic import fsync_dir, write_atomic
from ..errors import Corrupt, EncmatchError, Exists, InvalidArgument, Mismatch, NotFound
from .errors import Conflict, Forbidden, InsufficientStorage, QuotaExceeded
from .frames import FrameError, parse_header, verify_file
from .policy import (
    FILE_NAME,
    GROUP_KIND,
    INDEX_ID,
    PUBLIC_KINDS,
    SEALED_KIND,
    allowed_kinds,
    check_append_only,
    check_key_meta,
    check_name,
    group_kind,
    is_fill_of,
    key_files,
)

__all__ = ["Storage", "Generation", "INDEX_ID", "FILE_NAME"]

#: Bytes of a file's start read to find its header.
_HEAD = 1 << 16


def _write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` as JSON, atomically."""
    write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())


def _read_json(path: Path) -> Any:
    """Read a JSON file the service wrote (Corrupt if it is not JSON)."""
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise Corrupt(f"{path}: {exc}") from exc


def _sha256_file(path: Path, start: int = 0, length: int | None = None) -> str:
    """Hex SHA-256 of ``length`` bytes of ``path`` from ``start`` (to the end when ``None``)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start)
        left = length
        while left is None or left > 0:
            block = f.read(1 << 20 if left is None else min(1 << 20, left))
            if not block:
                break
            h.update(block)
            if left is not None:
                left -= len(block)
    return h.hexdigest()


@dataclass
class Generation:
    """A generation of an index built by :meth:`Storage.prepare_commit`, not yet current."""

    tenant: str
    index_id: str
    number: int
    path: Path
    keys_dir: Path
    files: dict[str, str]
    previous: int | None
    #: Uploads this commit would commit for the first time (new groups and sealed files; the key
    #: files at the first commit): what :meth:`Storage.discard` drops when the core refuses them.
    new_uploads: tuple[str, ...] = ()


@dataclass(frozen=True)
class Quotas:
    """What one tenant may hold: indexes (pending or committed), bytes on disk (committed files, uploads
    and the sizes declared for uploads in progress) and uploads in progress at once. 0: no limit."""

    indexes: int = 64
    bytes: int = 1 << 40
    uploads: int = 64


class Storage:
    """All indexes of all tenants under one data directory (see the module docstring for the layout).

    Mutations of one index (uploads, commits, deletion) are serialised by a
    per-index lock; reads take no lock (every file they read is replaced
    atomically).
    """

    def __init__(self, root: str | os.PathLike, *, allow_insecure: bool = False, max_file_bytes: int = 16 << 30,
                 quotas: "Quotas | None" = None):
        """Use (and create) the data directory ``root``, locked for this process (Exists if another holds it).

        ``allow_insecure`` admits key sets of insecure presets;
        ``max_file_bytes`` bounds a declared upload; ``quotas`` bound what
        each tenant may hold (:class:`Quotas`).
        """
        self.root = Path(root)
        self.allow_insecure = allow_insecure
        self.max_file_bytes = int(max_file_bytes)
        self.quotas = quotas or Quotas()
        for sub in ("tenants", "tmp", "trash"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.root / "service.lock", "a")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise Exists(f"another service process uses the data directory {self.root}") from None
        #: (tenant, index id) -> [lock, holders and waiters]; an entry lives only while someone uses it.
        self._locks: dict[tuple[str, str], list] = {}
        self._locks_guard = threading.Lock()

    # ---- paths and locks -------------------------------------------------

    @contextlib.contextmanager
    def lock(self, tenant: str, index_id: str) -> Iterator[None]:
        """Hold the lock that serialises mutations of one index (re-entrant in one thread).

        The id is checked first (NotFound unless it has the form of an
        index id), and the lock exists only while a thread holds or waits
        for it, so unknown or malformed ids leave nothing behind.
        """
        if not isinstance(index_id, str) or not INDEX_ID.match(index_id):
            raise NotFound(f"no index {str(index_id)[:40]!r}")
        key = (tenant, index_id)
        with self._locks_guard:
            entry = self._locks.get(key)
            if entry is None:
                entry = self._locks[key] = [threading.RLock(), 0]
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._locks_guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[key]

    def lock_count(self) -> int:
        """How many index locks exist now (held or waited for)."""
        with self._locks_guard:
            return len(self._locks)

    def _dir(self, tenant: str, index_id: str) -> Path:
        """The directory of an existing index of ``tenant`` (NotFound otherwise, also for another tenant's)."""
        if not INDEX_ID.match(index_id):
            raise NotFound(f"no index {index_id[:40]!r}")
        d = self.root / "tenants" / tenant / index_id
        if not (d / "index.json").is_file():
            raise NotFound(f"no index {index_id!r}")
        return d

    @staticmethod
    def _current(d: Path) -> dict | None:
        """The index's ``current.json`` (``None`` while it has never been committed)."""
        path = d / "current.json"
        return _read_json(path) if path.is_file() else None

    # ---- start-up ----------------------------------------------------------

    def recover(self) -> dict:
        """Clean up after a crash: staging and trash emptied, uncommitted generations removed,
        partial uploads cut back to what was acknowledged, committed copies dropped from ``files/``.

        Returns counts of what was cleaned.
        """
        report = {"removed": 0, "truncated": 0}
        for sub in ("tmp", "trash"):
            for p in (self.root / sub).iterdir():
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
                report["removed"] += 1
        for d in (self.root / "tenants").glob("*/*"):
            if not (d / "index.json").is_file():
                continue
            cur = self._current(d)
            keep = f"gen-{cur['generation']:06d}" if cur else None
            for p in d.iterdir():
                stale_gen = (p.name.startswith("gen-") and p.name != keep) or p.name.startswith(".gen-tmp-")
                if stale_gen or (p.name.startswith(".") and ".tmp-" in p.name):
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
                    report["removed"] += 1
            committed = (cur or {}).get("files", {})
            for f in (d / "files").iterdir():
                if f.name in committed or ".tmp-" in f.name:
                    f.unlink(missing_ok=True)
                    report["removed"] += 1
            for rec_path in (d / "uploads").glob("*.json"):
                report["truncated"] += self._recover_upload(d, rec_path)
            for p in (d / "uploads").glob(".*.tmp-*"):
                p.unlink(missing_ok=True)
        return report

    def _recover_upload(self, d: Path, rec_path: Path) -> int:
        """Bring one upload back to its record; returns 1 if its ``.part`` was cut back."""
        rec = _read_json(rec_path)
        part = d / "uploads" / (rec["name"] + ".part")
        dest = self._dest(d, rec["name"])
        if (self._current(d) or {}).get("files", {}).get(rec["name"]) == rec["sha256"]:
            rec_path.unlink()  # committed: a publish crashed before it removed the record
            part.unlink(missing_ok=True)
            return 0
        if rec.get("complete") or not part.exists():
            if dest.is_file() and dest.stat().st_size == rec["size"]:
                if not rec.get("complete"):  # crashed between the rename of the verified file and the record
                    _write_json(rec_path, dict(rec, received=rec["size"], complete=True))
            else:
                rec_path.unlink()
                part.unlink(missing_ok=True)
            return 0
        if part.stat().st_size > rec["received"]:
            with open(part, "r+b") as f:
                f.truncate(rec["received"])
                os.fsync(f.fileno())
            return 1
        return 0

    # ---- indexes -----------------------------------------------------------

    def usage(self, tenant: str) -> dict:
        """What ``tenant`` holds: ``indexes``, ``bytes`` (every file once, hard links across generations
        counted once, plus the part still to come of each upload in progress) and ``uploads`` in progress."""
        root = self.root / "tenants" / tenant
        seen: set[tuple[int, int]] = set()
        used = indexes = uploads = 0
        if root.is_dir():
            for d in root.iterdir():
                if not INDEX_ID.match(d.name):
                    continue
                indexes += 1
                for p in d.rglob("*"):
                    try:
                        st = p.lstat()
                    except FileNotFoundError:
                        continue
                    if p.is_file() and (st.st_dev, st.st_ino) not in seen:
                        seen.add((st.st_dev, st.st_ino))
                        used += st.st_size
                for rec_path in (d / "uploads").glob("*.json"):
                    try:
                        rec = _read_json(rec_path)
                    except Exception:  # noqa: BLE001 - a record being replaced: counted at the next call
                        continue
                    if not rec.get("complete"):
                        uploads += 1
                        used += max(0, int(rec.get("size", 0)) - int(rec.get("received", 0)))
        return {"indexes": indexes, "bytes": used, "uploads": uploads}

    def _check_quota(self, tenant: str, *, new_index: bool = False, new_upload: int = 0) -> None:
        """QuotaExceeded (429) or InsufficientStorage (507) if ``tenant`` may not add an index or an
        upload of ``new_upload`` bytes."""
        q, u = self.quotas, self.usage(tenant)
        if new_index and q.indexes and u["indexes"] >= q.indexes:
            raise QuotaExceeded(f"the tenant holds {u['indexes']} indexes, its quota: delete one (or ask for more)")
        if new_upload and q.uploads and u["uploads"] >= q.uploads:
            raise QuotaExceeded(f"the tenant has {u['uploads']} uploads in progress, its quota: finish or commit "
                                "them first")
        if new_upload and q.bytes and u["bytes"] + new_upload > q.bytes:
            raise InsufficientStorage(f"the tenant stores {u['bytes']:,} bytes of its quota of {q.bytes:,}; this "
                                      f"upload needs {new_upload:,} more: delete an index (or ask for more)")

    def create_index(self, tenant: str, keys_meta: Any, label: str = "") -> dict:
        """Create a pending index for ``tenant`` bound to a key set's ``keys.json``; returns its status.

        The key files it then needs are listed in ``missing_key_files``.
        """
        meta = check_key_meta(keys_meta, self.allow_insecure)
        self._check_quota(tenant, new_index=True)
        if not isinstance(label, str) or len(label) > 200:
            raise InvalidArgument("label must be a string of at most 200 characters")
        index_id = secrets.token_hex(8)
        tmp = self.root / "tmp" / f"{tenant}-{index_id}"
        (tmp / "keys").mkdir(parents=True)
        (tmp / "uploads").mkdir()
        (tmp / "files").mkdir()
        _write_json(tmp / "keys" / "keys.json", meta)
        _write_json(tmp / "index.json", {"id": index_id, "label": label, "created": time.time()})
        for sub in ("keys", "uploads", "files"):
            fsync_dir(tmp / sub)
        parent = self.root / "tenants" / tenant
        parent.mkdir(parents=True, exist_ok=True)
        os.rename(tmp, parent / index_id)
        fsync_dir(parent)
        fsync_dir(self.root / "tmp")
        return self.status(tenant, index_id)

    def list(self, tenant: str) -> list[dict]:
        """Status of every committed index of ``tenant`` (pending ones are not listed)."""
        out = []
        for d in sorted((self.root / "tenants" / tenant).glob("*")):
            if INDEX_ID.match(d.name) and (d / "current.json").is_file() and (d / "index.json").is_file():
                out.append(self.status(tenant, d.name))
        return out

    def keys_meta(self, tenant: str, index_id: str) -> dict:
        """The ``keys.json`` an index was created with."""
        return _read_json(self._dir(tenant, index_id) / "keys" / "keys.json")

    def status(self, tenant: str, index_id: str) -> dict:
        """What an index is: ``state`` (``pending`` or ``ready``), generation, entries, parameters,
        missing key files and uploads in progress."""
        d = self._dir(tenant, index_id)
        info = _read_json(d / "index.json")
        meta = _read_json(d / "keys" / "keys.json")
        cur = self._current(d)
        out: dict[str, Any] = {
            "id": index_id,
            "label": info.get("label", ""),
            "created": info.get("created"),
            "state": "ready" if cur else "pending",
            "generation": cur["generation"] if cur else None,
            "key_id": meta["key_id"],
            "preset": meta["preset"],
            "insecure": meta["insecure"],
            "kappa": meta["kappa"],
            "dim": meta["dim"],
            "strategy": meta["strategy"],
            "n1": meta["n1"],
            "missing_key_files": [n for n in key_files(meta) if not (d / "keys" / n).is_file()],
            "uploads": [],
        }
        if cur:
            manifest = _read_json(d / f"gen-{cur['generation']:06d}" / "manifest.json")
            sealed = _read_json(d / f"gen-{cur['generation']:06d}" / "sealed.json") if (
                d / f"gen-{cur['generation']:06d}" / "sealed.json").is_file() else []
            out.update(count=manifest.get("count", 0), groups=len(manifest.get("groups", [])),
                       delta=manifest.get("delta"), labelled=bool(sealed), sealed_files=len(sealed))
        for rec_path in sorted((d / "uploads").glob("*.json")):
            rec = _read_json(rec_path)
            if not (cur and cur["files"].get(rec["name"]) == rec["sha256"]):
                out["uploads"].append(self._upload_view(rec, committed=False))
        return out

    def manifest(self, tenant: str, index_id: str) -> dict:
        """The manifest of an index's current generation (Conflict while it is pending)."""
        d = self._dir(tenant, index_id)
        cur = self._current(d)
        if not cur:
            raise Conflict(f"index {index_id} has not been committed yet")
        return _read_json(d / f"gen-{cur['generation']:06d}" / "manifest.json")

    def sealed(self, tenant: str, index_id: str) -> list[dict]:
        """The sealed label files of an index's current generation: ``name``, ``size``, ``sha256`` (none while pending)."""
        d = self._dir(tenant, index_id)
        cur = self._current(d)
        if not cur:
            return []
        path = d / f"gen-{cur['generation']:06d}" / "sealed.json"
        return _read_json(path) if path.is_file() else []

    def sealed_bytes(self, tenant: str, index_id: str, name: str) -> bytes:
        """The bytes of one committed sealed label file (NotFound for a name the current generation does not list)."""
        d = self._dir(tenant, index_id)
        cur = self._current(d)
        if not cur or name not in {f["name"] for f in self.sealed(tenant, index_id)}:
            raise NotFound(f"no sealed file {name!r} in index {index_id}")
        return (d / f"gen-{cur['generation']:06d}" / name).read_bytes()

    def group_file(self, tenant: str, index_id: str, name: str) -> tuple[Path, str]:
        """The path and SHA-256 of one group file of the current generation (NotFound for a name its
        manifest does not list): an enroller fills the last, partial group from it."""
        d = self._dir(tenant, index_id)
        cur = self._current(d)
        if not cur:
            raise NotFound(f"index {index_id} has no committed generation")
        gen = d / f"gen-{cur['generation']:06d}"
        if name not in {g.get("file") for g in _read_json(gen / "manifest.json").get("groups", [])}:
            raise NotFound(f"no group file {name!r} in index {index_id}")
        return gen / name, cur["files"][name]

    def current(self, tenant: str, index_id: str) -> tuple[int, Path, Path] | None:
        """``(generation, generation dir, keys dir)`` of a committed index, ``None`` if pending."""
        d = self._dir(tenant, index_id)
        cur = self._current(d)
        if not cur:
            return None
        return cur["generation"], d / f"gen-{cur['generation']:06d}", d / "keys"

    def committed(self) -> list[tuple[str, str]]:
        """``(tenant, index id)`` of every committed index on disk."""
        return [(d.parent.name, d.name) for d in sorted((self.root / "tenants").glob("*/*"))
                if INDEX_ID.match(d.name) and (d / "current.json").is_file()]

    def delete(self, tenant: str, index_id: str) -> None:
        """Delete an index: one atomic rename into ``trash/``, then the removal of its files."""
        with self.lock(tenant, index_id):
            d = self._dir(tenant, index_id)
            trash = self.root / "trash" / f"{tenant}-{index_id}-{secrets.token_hex(4)}"
            os.rename(d, trash)
            fsync_dir(d.parent)
            shutil.rmtree(trash, ignore_errors=True)

    # ---- uploads -----------------------------------------------------------

    @staticmethod
    def _dest(d: Path, name: str) -> Path:
        """Where a verified upload goes: ``keys/`` for key files, ``files/`` for gallery files."""
        meta = _read_json(d / "keys" / "keys.json")
        return d / ("keys" if name in set(key_files(meta)) else "files") / name

    @staticmethod
    def _upload_view(rec: dict, committed: bool) -> dict:
        """The public status of an upload record."""
        return {"name": rec["name"], "size": rec["size"], "sha256": rec["sha256"], "received": rec["received"],
                "complete": bool(rec.get("complete")), "committed": committed}

    def declare(self, tenant: str, index_id: str, name: str, size: Any, sha256: Any) -> dict:
        """Start (or resume) the upload of file ``name`` of ``size`` bytes with SHA-256 ``sha256``.

        Idempotent: declaring the same file again returns its progress
        (``received``) so the client resumes there. A different
        declaration replaces an uncommitted upload; a committed file cannot
        change (Conflict).
        """
        check_name(name)
        if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= self.max_file_bytes:
            raise InvalidArgument(f"size must be 1 to {self.max_file_bytes} bytes")
        if not isinstance(sha256, str) or not re.match(r"^[0-9a-f]{64}$", sha256):
            raise InvalidArgument("sha256 must be 64 lowercase hex digits")
        with self.lock(tenant, index_id):
            d = self._dir(tenant, index_id)
            cur = self._current(d)
            rec_path = d / "uploads" / f"{name}.json"
            if cur and name in cur["files"]:
                if cur["files"][name] != sha256:
                    raise Conflict(f"{name} is committed with other content; committed files cannot change")
                return {"name": name, "size": size, "sha256": sha256, "received": size, "complete": True,
                        "committed": True}
            if rec_path.is_file():
                rec = _read_json(rec_path)
                if rec["size"] == size and rec["sha256"] == sha256:
                    return self._upload_view(rec, committed=False)
                self._drop_upload(d, name)
            self._check_quota(tenant, new_upload=size)
            rec = {"name": name, "size": size, "sha256": sha256, "received": 0, "complete": False}
            (d / "uploads" / f"{name}.part").touch()
            fsync_dir(d / "uploads")
            _write_json(rec_path, rec)
            return self._upload_view(rec, committed=False)

    def upload_status(self, tenant: str, index_id: str, name: str) -> dict:
        """Progress of the upload of ``name`` (NotFound if it was never declared)."""
        check_name(name)
        d = self._dir(tenant, index_id)
        cur = self._current(d)
        rec_path = d / "uploads" / f"{name}.json"
        if rec_path.is_file():
            rec = _read_json(rec_path)
            return self._upload_view(rec, committed=bool(cur and cur["files"].get(name) == rec["sha256"]))
        if cur and name in cur["files"]:
            size = (d / "keys" / name) if (d / "keys" / name).is_file() else (
                d / f"gen-{cur['generation']:06d}" / name)
            return {"name": name, "size": size.stat().st_size, "sha256": cur["files"][name],
                    "received": size.stat().st_size, "complete": True, "committed": True}
        raise NotFound(f"no upload {name!r} in index {index_id}")

    def _drop_upload(self, d: Path, name: str) -> None:
        """Forget an uncommitted upload and its bytes."""
        (d / "uploads" / f"{name}.part").unlink(missing_ok=True)
        dest = self._dest(d, name)
        cur = self._current(d)
        if dest.is_file() and not (cur and name in cur["files"]):
            dest.unlink()
        (d / "uploads" / f"{name}.json").unlink(missing_ok=True)
        fsync_dir(d / "uploads")

    def check_chunk(self, tenant: str, index_id: str, name: str, offset: int, length: int | None) -> None:
        """Check, before its body is read, that a chunk of ``length`` bytes (``None``: unknown) at
        ``offset`` can be appended to the upload of ``name``: the index and the declared upload
        exist, the offset is not beyond what was received and the chunk not beyond the declared size.

        Raises what :meth:`write_chunk` would (NotFound, Conflict, InvalidArgument); a committed
        file passes (its chunks are answered with its status).
        """
        if offset < 0:
            raise InvalidArgument("offset must be >= 0")
        d = self._dir(tenant, index_id)
        rec_path = d / "uploads" / f"{check_name(name)}.json"
        if not rec_path.is_file():
            cur = self._current(d)
            if cur and name in cur["files"]:
                return
            raise NotFound(f"no upload {name!r} in index {index_id}: declare it first")
        rec = _read_json(rec_path)
        if offset > rec["received"]:
            raise Conflict(f"chunk at offset {offset}, but {rec['received']} bytes are received: resume there")
        if length is not None and offset + length > rec["size"]:
            raise InvalidArgument(f"chunk ends at byte {offset + length}, beyond the declared size {rec['size']}")

    def write_chunk(self, tenant: str, index_id: str, name: str, offset: int, data: bytes,
                    chunk_sha256: str | None) -> dict:
        """Append ``data`` at ``offset`` of a declared upload; returns its progress once durable.

        ``chunk_sha256`` (hex) must match ``data``. A chunk wholly or partly
        received already is checked against the stored bytes and only its
        new part is written (a retried chunk is harmless); an offset beyond
        what was received is a Conflict naming the offset to resume at.
        Before the first byte is stored the frame header is checked
        against :func:`allowed_kinds`: a kind outside it that is not a known
        public one (secret keys, threshold shares, receiver secret keys,
        unknown kinds) is Forbidden, a public kind in the wrong place,
        another key set or parameter set a Mismatch, a header that does not
        fit the first 64 KiB Corrupt; each drops the upload. When the last byte arrives the whole file is verified and
        moved into place (a failed verification drops the upload).
        """
        if chunk_sha256 is None or hashlib.sha256(data).hexdigest() != chunk_sha256.lower():
            raise Corrupt("chunk checksum missing or wrong (X-Chunk-SHA256 must be the hex SHA-256 of the body)")
        if offset < 0:
            raise InvalidArgument("offset must be >= 0")
        with self.lock(tenant, index_id):
            d = self._dir(tenant, index_id)
            rec_path = d / "uploads" / f"{check_name(name)}.json"
            if not rec_path.is_file():
                cur = self._current(d)
                if cur and name in cur["files"]:
                    return self.upload_status(tenant, index_id, name)
                raise NotFound(f"no upload {name!r} in index {index_id}: declare it first")
            rec = _read_json(rec_path)
            end = offset + len(data)
            if end > rec["size"]:
                raise InvalidArgument(f"chunk ends at byte {end}, beyond the declared size {rec['size']}")
            if offset > rec["received"]:
                raise Conflict(f"chunk at offset {offset}, but {rec['received']} bytes are received: resume there")
            part = d / "uploads" / f"{name}.part"
            stored = self._dest(d, name) if rec.get("complete") else part
            overlap = min(end, rec["received"]) - offset
            if overlap > 0 and _sha256_file(stored, offset, overlap) != hashlib.sha256(data[:overlap]).hexdigest():
                raise Conflict(f"bytes {offset}..{offset + overlap} differ from those already received")
            new = data[overlap:] if overlap > 0 else data
            if not new:
                return self._upload_view(rec, committed=False)
            if rec["received"] < _HEAD:
                self._check_head(d, name, part, rec["received"], new, rec["size"])
            with open(part, "r+b") as f:
                f.seek(rec["received"])
                f.write(new)
                f.flush()
                os.fsync(f.fileno())
            rec["received"] += len(new)
            if rec["received"] == rec["size"]:
                self._finish(d, rec, part)
            _write_json(rec_path, rec)
            return self._upload_view(rec, committed=False)

    def _check_head(self, d: Path, name: str, part: Path, received: int, new: bytes, size: int) -> None:
        """Check the frame header of an upload from its stored start and a new chunk, before storing it."""
        with open(part, "rb") as f:
            head = f.read(received) + new[: _HEAD - received]
        try:
            h = parse_header(head)
        except FrameError as exc:
            if exc.truncated and len(head) < min(size, _HEAD):
                return  # the header is not complete yet; checked again with the next chunk
            # (a header longer than _HEAD is refused: no byte past it is stored before the kind is known)
            self._drop_upload(d, name)
            raise Corrupt(f"{name}: {exc}") from None
        meta = _read_json(d / "keys" / "keys.json")
        allowed = allowed_kinds(name, meta)
        kind = group_kind(h.kind, meta)
        problem: EncmatchError | None = None
        if kind not in allowed and not (h.kind in PUBLIC_KINDS or h.kind.startswith(GROUP_KIND + "/")):
            what = "a secret key" if "secret" in h.kind else f"of kind {h.kind[:60]!r}"
            problem = Forbidden(f"{name} is {what}: the service accepts only {', '.join(sorted(allowed))} "
                                "under this name and never holds secret material")
        elif h.fingerprint != meta["fingerprint"]:
            problem = Mismatch(f"{name} was made with other parameters (fingerprint {h.fingerprint}, "
                               f"the index's keys have {meta['fingerprint']})")
        elif h.key_id != meta["key_id"]:
            problem = Mismatch(f"{name} belongs to key set {h.key_id}, the index to {meta['key_id']}")
        elif kind not in allowed:
            problem = Mismatch(f"{name} must be {' or '.join(sorted(allowed))}, it is a {h.kind}")
        elif h.total_length != size:
            problem = Corrupt(f"{name}: declared {size} bytes, its header announces {h.total_length}")
        if problem is not None:
            self._drop_upload(d, name)
            raise problem

    def _finish(self, d: Path, rec: dict, part: Path) -> None:
        """Verify a fully received upload and move it into ``keys/`` or ``files/`` (Corrupt drops it)."""
        try:
            with open(part, "rb") as f:
                _, digest = verify_file(f, rec["size"])
        except FrameError as exc:
            self._drop_upload(d, rec["name"])
            raise Corrupt(f"{rec['name']}: {exc}") from None
        if digest != rec["sha256"]:
            self._drop_upload(d, rec["name"])
            raise Corrupt(f"{rec['name']}: SHA-256 of the received file differs from the declared one")
        dest = self._dest(d, rec["name"])
        os.replace(part, dest)
        fsync_dir(dest.parent)
        fsync_dir(part.parent)
        rec["complete"] = True

    # ---- commits -------------------------------------------------------------

    def prepare_commit(self, tenant: str, index_id: str, manifest: Any, sealed: Any = ()) -> Generation:
        """Build the next generation of an index from ``manifest`` (the enroller's manifest.json)
        and the uploaded ``sealed`` label files it adds.

        Committed groups must stay as they are (an index only grows), and
        every field of the manifest but the groups and the count must equal
        the committed one (:func:`check_append_only`); every other group file must be
        uploaded and verified, and the key files complete. A manifest with
        plaintext ``labels`` is refused. Sealed files are kept opaque: the
        committed ones carry over, the new ones must be uploaded. The generation is assembled from hard links in a staging
        directory, fsynced and renamed to ``gen-<N>``; it becomes visible
        only with :meth:`publish` (after the core has loaded it). Call with
        :meth:`lock` held until :meth:`publish` or :meth:`discard`.
        """
        d = self._dir(tenant, index_id)
        meta = _read_json(d / "keys" / "keys.json")
        if not isinstance(manifest, dict):
            raise InvalidArgument("manifest must be a JSON object")
        if manifest.get("key_id") != meta["key_id"] or manifest.get("fingerprint") != meta["fingerprint"]:
            raise Mismatch("the manifest belongs to another key set or parameter set than the index's keys")
        if "labels" in manifest:
            raise InvalidArgument("the manifest carries labels: names never reach the service in plaintext "
                                  "(they are sealed by the enroller and uploaded as *.sealed files)")
        if not isinstance(sealed, (list, tuple)) or not all(isinstance(n, str) for n in sealed):
            raise InvalidArgument("sealed must be a list of uploaded file names")
        groups = manifest.get("groups")
        if not isinstance(groups, list) or not all(
            isinstance(g, dict) and isinstance(g.get("file"), str) and isinstance(g.get("bytes"), int) for g in groups
        ):
            raise InvalidArgument("manifest: groups must be a list of {file, start, count, bytes}")
        missing_keys = [n for n in key_files(meta) if not (d / "keys" / n).is_file()]
        if missing_keys:
            raise Conflict(f"key files not uploaded yet: {', '.join(missing_keys[:5])}"
                           + (f" and {len(missing_keys) - 5} more" if len(missing_keys) > 5 else ""))
        cur = self._current(d)
        old_dir = d / f"gen-{cur['generation']:06d}" if cur else None
        old_groups = _read_json(old_dir / "manifest.json").get("groups", []) if old_dir else []
        replaced = None  # the committed last group this commit fills, if any
        if groups[: len(old_groups)] != old_groups:
            n = len(old_groups)
            if not (n and len(groups) >= n and groups[: n - 1] == old_groups[:-1] and is_fill_of(old_groups[-1], groups[n - 1])):
                raise Conflict("the manifest changes committed groups; an index only grows (and only its last, "
                               "partial group may be filled: same start, more entries, the next fill's file)")
            replaced = old_groups[-1]["file"]
        if old_dir is not None:
            check_append_only(_read_json(old_dir / "manifest.json"), manifest)
        old_sealed = _read_json(old_dir / "sealed.json") if old_dir and (old_dir / "sealed.json").is_file() else []
        files = dict(cur["files"]) if cur else {}
        if replaced is not None:
            files.pop(replaced, None)  # the filled file takes its place
        new_keys = [n for n in key_files(meta) if n not in files]  # all at the first commit; again after drop_keys
        for n in new_keys:
            files[n] = _read_json(d / "uploads" / f"{n}.json")["sha256"]
        sources: list[tuple[str, Path]] = []
        for g in groups:
            name = check_name(g["file"])
            if name in {n for n, _ in sources}:
                raise InvalidArgument(f"manifest names {name} twice")
            if old_dir is not None and g in old_groups:
                sources.append((name, old_dir / name))
                continue
            src = d / "files" / name
            rec_path = d / "uploads" / f"{name}.json"
            if not src.is_file() or not rec_path.is_file():
                raise Conflict(f"{name} is not uploaded (or not complete)")
            if src.stat().st_size != g["bytes"]:
                raise Conflict(f"{name} has {src.stat().st_size} bytes, the manifest says {g['bytes']}")
            files[name] = _read_json(rec_path)["sha256"]
            sources.append((name, src))
        sealed_list = list(old_sealed)
        for name in sealed:
            check_name(name)
            if not name.endswith(".sealed"):
                raise InvalidArgument(f"{name}: sealed label files are named *.sealed")
            if name in {f["name"] for f in sealed_list}:
                continue  # committed before (a retried commit)
            if name in {n for n, _ in sources}:
                raise InvalidArgument(f"manifest names {name} twice")
            src = d / "files" / name
            rec_path = d / "uploads" / f"{name}.json"
            if not src.is_file() or not rec_path.is_file():
                raise Conflict(f"{name} is not uploaded (or not complete)")
            with open(src, "rb") as f:
                kind = parse_header(f.read(_HEAD)).kind
            if kind != SEALED_KIND:
                raise Mismatch(f"{name} is a {kind}, not sealed labels")
            digest = _read_json(rec_path)["sha256"]
            files[name] = digest
            sealed_list.append({"name": name, "size": src.stat().st_size, "sha256": digest})
            sources.append((name, src))
        if old_dir is not None and replaced is None and len(groups) == len(old_groups) and len(sealed_list) == len(old_sealed):
            raise Conflict(f"this commit adds nothing to generation {cur['generation']} (no new group or sealed "
                           "file): a replayed commit?")
        for f in old_sealed:
            sources.append((f["name"], old_dir / f["name"]))
        number = (cur["generation"] if cur else 0) + 1
        staging = d / f".gen-tmp-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            for name, src in sources:
                os.link(src, staging / name)
            write_atomic(staging / "manifest.json", (json.dumps(manifest) + "\n").encode())
            write_atomic(staging / "sealed.json", (json.dumps(sealed_list) + "\n").encode())
            final = d / f"gen-{number:06d}"
            if final.exists():  # left by a commit whose core load failed and whose clean-up crashed
                shutil.rmtree(final)
            os.rename(staging, final)
            fsync_dir(d)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        new = [n for n, src in sources if src.parent == d / "files"] + new_keys
        return Generation(tenant, index_id, number, final, d / "keys", files, cur["generation"] if cur else None,
                          tuple(new))

    def keys_proven(self, tenant: str, index_id: str) -> bool:
        """Whether the core has loaded the index's key files: its current generation has entries
        (such a generation was loaded with them at its commit and is at every start)."""
        d = self._dir(tenant, index_id)
        cur = self._current(d)
        if not cur:
            return False
        return int(_read_json(d / f"gen-{cur['generation']:06d}" / "manifest.json").get("count", 0)) > 0

    def drop_keys(self, tenant: str, index_id: str) -> list[str]:
        """Delete an index's key files that the core refused before any entry was served with them
        (committed with an empty generation, or uploaded for the first commit); the index is then
        missing them again and takes corrected uploads. Returns the names deleted.

        Call with :meth:`lock` held; never for keys that are :meth:`keys_proven`.
        """
        d = self._dir(tenant, index_id)
        names = key_files(_read_json(d / "keys" / "keys.json"))
        cur = self._current(d)
        if cur and any(n in cur["files"] for n in names):
            _write_json(d / "current.json", dict(cur, files={k: v for k, v in cur["files"].items() if k not in names}))
        present = [n for n in names if (d / "keys" / n).is_file() or (d / "uploads" / f"{n}.json").is_file()]
        for n in present:
            self._drop_upload(d, n)
        fsync_dir(d / "keys")
        return present

    def publish(self, gen: Generation) -> None:
        """Make a prepared generation current (one atomic write), then remove what it superseded."""
        d = self._dir(gen.tenant, gen.index_id)
        _write_json(d / "current.json", {"generation": gen.number, "files": gen.files})
        for name in gen.files:
            if (d / "files" / name).is_file():
                (d / "files" / name).unlink()
            (d / "uploads" / f"{name}.json").unlink(missing_ok=True)
        fsync_dir(d / "files")
        fsync_dir(d / "uploads")

    def remove_generation(self, tenant: str, index_id: str, number: int) -> None:
        """Remove a superseded generation's directory (its files live on as hard links in the new one)."""
        d = self._dir(tenant, index_id)
        shutil.rmtree(d / f"gen-{number:06d}", ignore_errors=True)

    def discard(self, gen: Generation, *, drop_uploads: bool = False) -> list[str]:
        """Throw away a prepared generation that was not published.

        With ``drop_uploads`` (the core refused the files), the uploads it
        would have committed for the first time are deleted too, so no
        file the core cannot load stays on disk (the client uploads
        corrected ones). Returns the names of the dropped uploads.
        """
        shutil.rmtree(gen.path, ignore_errors=True)
        dropped: list[str] = []
        if drop_uploads:
            d = self._dir(gen.tenant, gen.index_id)
            for name in gen.new_uploads:
                self._drop_upload(d, name)
                dropped.append(name)
            fsync_dir(d / "files")
            fsync_dir(d / "keys")
        return dropped
