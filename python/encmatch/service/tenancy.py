"""Tenants and their bearer tokens.

A tenant is a name; its tokens are random 256-bit strings handed out once
(:meth:`TokenStore.add`) and stored only as SHA-256 hashes in
``<data>/tenants.json`` (a high-entropy random token needs no slow password
hash: the hash only keeps a copy of the file from being usable as
credentials). Every request of the service carries ``Authorization:
Bearer <token>``; :meth:`TokenStore.authenticate` maps it to the tenant,
whose indexes are the only ones the request can see.

The file is written atomically and re-read when it changes, so tenants
can be added, rotated or revoked (``encmatch tenant add|rotate|revoke``)
while the service runs. Adding a tenant that exists is refused
(:class:`~encmatch.errors.Exists`): a second token is issued only by a
rotation, which revokes the tenant's earlier tokens in the same write.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Iterator

from ..errors import Exists, InvalidArgument, NotFound
from .._util.atomic import write_atomic

__all__ = ["TokenStore", "TENANT_NAME", "hash_token"]

#: Allowed tenant names (they name a directory).
TENANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_FILE = "tenants.json"


def hash_token(token: str) -> str:
    """The stored form of a token: hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    """The tenants of one data directory and the hashes of their tokens."""

    def __init__(self, data_dir: str | os.PathLike):
        """Use ``<data_dir>/tenants.json`` (created on the first :meth:`add`)."""
        self.path = Path(data_dir) / _FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._by_hash: dict[str, str] = {}

    def _read(self) -> dict:
        """The file's content (``{"tenants": {name: {"tokens": [hash...], "created"}}}``)."""
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"tenants": {}}
        if not isinstance(doc, dict) or not isinstance(doc.get("tenants"), dict):
            raise InvalidArgument(f"{self.path} is not a tenants file")
        return doc

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold this object's lock and an exclusive ``flock`` on ``<data>/tenants.lock`` (so two
        ``encmatch tenant`` processes cannot both read the old file and write over each other).
        NotFound if the data directory does not exist."""
        if not self.path.parent.is_dir():
            raise NotFound(f"no data directory {self.path.parent}")
        with self._lock, open(self.path.with_suffix(".lock"), "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def _write(self, doc: dict) -> None:
        """Replace the file atomically (mode 0600)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, (json.dumps(doc, indent=2) + "\n").encode(), mode=0o600)

    def add(self, tenant: str, *, rotate: bool = False) -> str:
        """Create tenant ``tenant`` and its token; returns the token, shown only now.

        A tenant that exists (with tokens or revoked) is refused
        (:class:`~encmatch.errors.Exists`) unless ``rotate``: then its
        earlier tokens are revoked and the new one replaces them, and a
        tenant that does not exist is created. Use :meth:`rotate` to
        require an existing tenant.
        """
        return self._issue(tenant, create=True, rotate=rotate)

    def rotate(self, tenant: str) -> str:
        """A new token for the existing tenant ``tenant``; its earlier tokens are revoked in the
        same write (:class:`~encmatch.errors.NotFound` if there is no such tenant). Returns the new token."""
        return self._issue(tenant, create=False, rotate=True)

    def _issue(self, tenant: str, *, create: bool, rotate: bool) -> str:
        """Issue a token under the lock: a new tenant when ``create``, a replacement when ``rotate``."""
        if not TENANT_NAME.match(tenant):
            raise InvalidArgument(f"tenant name {tenant!r} must match {TENANT_NAME.pattern}")
        token = "em_" + secrets.token_urlsafe(32)
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            doc = self._read()
            entry = doc["tenants"].get(tenant)
            if entry is None and not create:
                raise NotFound(f"no tenant {tenant!r} in {self.path} (`encmatch tenant add {tenant}` creates it)")
            if entry is not None and not rotate:
                raise Exists(f"tenant {tenant!r} exists ({len(entry.get('tokens', []))} active token(s)); "
                             f"`encmatch tenant rotate {tenant}` issues a new token and revokes the old ones")
            if entry is None:
                entry = doc["tenants"][tenant] = {"created": time.time(), "tokens": []}
            elif rotate:
                entry["rotated"] = time.time()
            entry["tokens"] = [hash_token(token)]
            self._write(doc)
        return token

    def revoke(self, tenant: str) -> int:
        """Revoke every token of ``tenant`` (its indexes stay on disk); returns how many were revoked."""
        with self._locked():
            doc = self._read()
            entry = doc["tenants"].get(tenant)
            if entry is None:
                raise NotFound(f"no tenant {tenant!r}")
            n = len(entry["tokens"])
            entry["tokens"] = []
            self._write(doc)
        return n

    def tenants(self) -> dict[str, int]:
        """Tenant names and their number of active tokens."""
        return {name: len(e.get("tokens", [])) for name, e in self._read()["tenants"].items()}

    def authenticate(self, token: str | None) -> str | None:
        """The tenant whose token this is, or ``None``."""
        if not token:
            return None
        self._refresh()
        digest = hash_token(token)
        for known, tenant in self._by_hash.items():
            if hmac.compare_digest(known, digest):
                return tenant
        return None

    def _refresh(self) -> None:
        """Re-read the file if its modification time or size changed."""
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = (0, 0)
        if stamp == self._stamp:
            return
        with self._lock:
            doc = self._read()
            self._by_hash = {
                h: name for name, e in doc["tenants"].items() for h in e.get("tokens", []) if isinstance(h, str)
            }
            self._stamp = stamp
