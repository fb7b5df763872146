"""The settings of one service instance (``encmatch serve``'s options) and their derived limits."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .storage import Quotas

__all__ = ["ServiceConfig"]


@dataclass
class ServiceConfig:
    """Settings of one service instance (``encmatch serve`` options)."""

    data_dir: Path
    allow_insecure: bool = False
    max_body_bytes: int = 64 << 20
    max_file_bytes: int = 16 << 30
    max_pending: int = 16
    workers: int = 1
    query_timeout: float = 300.0
    shutdown_grace: float = 30.0
    memory_budget: int = 0
    #: Where searches run: None in the service's process, or an encmatch.cluster.RayBackend.
    backend: Any = None
    #: Requests in flight at once, /v1/health excepted (0: max(64, 4 x max_pending)); more get 503 busy.
    max_requests: int = 0
    #: Requests in flight at once for one tenant (0: half of max_requests, at least 8).
    max_tenant_requests: int = 0
    #: Request-body bytes in flight at once (0: 4 x max_body_bytes); a body's Content-Length (the
    #: limit when it has none) is reserved before it is read, and a request beyond is 503 busy.
    max_body_inflight: int = 0
    #: Request-body bytes in flight at once for one tenant (0: 2 x max_body_bytes).
    max_tenant_body_inflight: int = 0
    #: Seconds a client may take to send each piece of a request body (else 408); the environment
    #: variable ENCMATCH_BODY_TIMEOUT sets another default (the tests use a short one).
    body_timeout: float = field(default_factory=lambda: float(os.environ.get("ENCMATCH_BODY_TIMEOUT", "60")))
    #: Seconds a connection may stay without a request in progress (a request's headers must be
    #: whole by then; ENCMATCH_HEADER_TIMEOUT sets another default); see :func:`header_deadline_protocol`.
    header_timeout: float = field(default_factory=lambda: float(os.environ.get("ENCMATCH_HEADER_TIMEOUT", "30")))
    #: TCP connections uvicorn accepts at once (0: no limit of its own); beyond them it answers a
    #: plain-text 503, so it is far above max_requests, which answers in JSON.
    max_connections: int = 4096
    #: Load a commit's new files in a child process first (a core abort then cannot end the service).
    isolate_commit_check: bool = True
    #: The service's ``server-signing.key`` (``threshold signing-keygen``): with it, a search asked
    #: for ``signed=true`` comes back bound to its query and signed for threshold decryptors.
    signing_key: Path | None = None
    #: What each tenant may hold (indexes, bytes, uploads in progress): 429 / 507 beyond.
    quotas: Quotas = field(default_factory=Quotas)

    def resolved(self) -> "ServiceConfig":
        """A copy with every 0 ("derived") limit replaced by its value."""
        max_requests = self.max_requests or max(64, 4 * self.max_pending)
        return replace(
            self, max_requests=max_requests,
            max_tenant_requests=self.max_tenant_requests or max(8, max_requests // 2),
            max_body_inflight=self.max_body_inflight or 4 * self.max_body_bytes,
            max_tenant_body_inflight=self.max_tenant_body_inflight or 2 * self.max_body_bytes,
        )
