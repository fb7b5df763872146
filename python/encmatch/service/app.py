"""The HTTP service: a FastAPI application over :mod:`storage <encmatch.service.storage>`,
:mod:`tenancy <encmatch.service.tenancy>` and :mod:`scheduler <encmatch.service.scheduler>`.

``encmatch serve --data DIR`` runs :func:`serve`; the OpenAPI description
is at ``/openapi.json`` (``/docs`` renders it). Every route except
``/v1/health`` needs ``Authorization: Bearer <token>``; a token sees only
its tenant's indexes, and any other index id is ``404 not_found``.

Routes (all under ``/v1``; ``docs/SERVICE.md`` has the protocol):

- ``POST /indexes`` create a pending index from a key set's ``keys.json``;
- ``PUT|GET|PATCH /indexes/{id}/files/{name}`` declare, inspect and append
  to a resumable upload (key files and gallery group files);
- ``POST /indexes/{id}/commit`` make the uploaded groups and the enroller's
  manifest the index's next generation (loaded, then visible);
- ``POST /indexes/{id}/search?mode=`` encrypted query in, encrypted result out, at
  the index's own threshold (a ``delta`` other than it is refused, 422 invalid_argument);
- ``GET /indexes``, ``GET|DELETE /indexes/{id}``, ``GET /indexes/{id}/manifest``;
- ``GET /indexes/{id}/sealed[/{name}]`` the sealed label files, opaque bytes
  the service stores and hands back but cannot read;
- ``GET /health``.

Limits (:class:`_Admission`, in front of every route but ``/v1/health``,
which always answers): requests in flight overall and per tenant,
request-body bytes in flight overall and per tenant (reserved by
Content-Length before the body is read; beyond them ``503 busy`` with
``Retry-After``), bodies beyond ``max_body_bytes`` refused with 413
(by Content-Length before they are read, or as soon as a chunked body
passes it), a token checked before any body is read, a deadline for
each piece of a body (408). A search's Content-Length is checked against
the size of a query for the index's parameters, and the index checked
loaded, before its body is read; searches beyond the bounded queue get
503 ``busy`` (see :class:`~encmatch.service.scheduler.Scheduler`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._util.extras import require

require("service", "fastapi", "uvicorn")
from fastapi import Depends, FastAPI, Query, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .. import __version__
from ..params import version as core_version
from ..errors import Corrupt, EncmatchError, InvalidArgument, IOError, Mismatch
from ..results import SEARCH_MODES, check_bound
from .errors import (Busy, Conflict, Forbidden, InsufficientStorage, RequestTimeout, TooLarge, Unauthorized,
                     status_for)
from .frames import FrameError, parse_header
from .scheduler import Loaded, Scheduler, check_in_subprocess, open_generation
from .storage import Quotas, Storage
from .tenancy import TokenStore

__all__ = ["ServiceConfig", "create_app", "serve"]

log = logging.getLogger("encmatch.service")

_OCTETS = {"content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}


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
        from dataclasses import replace

        max_requests = self.max_requests or max(64, 4 * self.max_pending)
        return replace(
            self, max_requests=max_requests,
            max_tenant_requests=self.max_tenant_requests or max(8, max_requests // 2),
            max_body_inflight=self.max_body_inflight or 4 * self.max_body_bytes,
            max_tenant_body_inflight=self.max_tenant_body_inflight or 2 * self.max_body_bytes,
        )


class _Strict(BaseModel):
    """A request body whose fields keep their JSON types: no ``true`` taken as 1, no ``"12"`` as 12."""

    model_config = ConfigDict(strict=True, extra="forbid")


class CreateIndex(_Strict):
    """Body of ``POST /v1/indexes``."""

    keys: dict[str, Any] = Field(description="the key set's server/keys.json")
    label: str = Field("", max_length=200, description="a name for people; not unique")


class DeclareFile(_Strict):
    """Body of ``PUT /v1/indexes/{id}/files/{name}``."""

    size: int = Field(description="bytes of the whole file")
    sha256: str = Field(description="hex SHA-256 of the whole file")


class Commit(_Strict):
    """Body of ``POST /v1/indexes/{id}/commit``."""

    manifest: dict[str, Any] = Field(description="the enroller's manifest.json naming every group file")
    sealed: list[str] = Field([], max_length=100000,
                              description="uploaded sealed label files this commit adds (opaque to the service)")


#: Routes that answer without a token and always (the OpenAPI pages are static).
_OPEN_PATHS = {"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}


def _raw_body_route(method: bytes | str, path: str) -> bool:
    """Whether a route reads its body itself (search, chunk upload), checking it before it reads."""
    return method == "PATCH" or (method == "POST" and path.endswith("/search"))


class _Admission:
    """ASGI middleware in front of every route: the service's bounds, checked before a body is read.

    - ``/v1/health`` and the OpenAPI pages pass straight through (health
      always answers, also under load).
    - At most ``max_requests`` other requests are in flight, and at most
      ``max_tenant_requests`` of one tenant; one more is answered ``503
      busy`` (JSON, ``Retry-After``) at once.
    - A request with a body needs a valid token (401 before the body is
      read); a Content-Length over ``max_body_bytes`` is 413; the declared
      length (``max_body_bytes`` for a chunked body) is reserved against
      the body bytes in flight overall and of the tenant (503 busy beyond).
    - Every piece of a body must arrive within ``body_timeout`` seconds
      (408). The JSON routes' bodies are read here, whole, so a chunked
      body over the limit is 413 like any other; the search and the chunk
      upload read theirs themselves, after their own checks, through a
      receive that enforces the same limit and deadline.

    The counters live in the event loop (no locks); :meth:`stats` reports them.
    """

    def __init__(self, app: Any, config: ServiceConfig, tokens: TokenStore):
        """Wrap ``app`` with the limits of ``config`` (resolved) and the tenants of ``tokens``."""
        self.app = app
        self.config = config
        self.tokens = tokens
        self.requests = 0
        self.body_bytes = 0
        self.by_tenant: dict[str, list[int]] = {}  # tenant -> [requests, body bytes]; dropped at zero
        self.refused = 0

    def stats(self) -> dict:
        """Requests and body bytes in flight now, tenants with requests in flight, requests refused as busy."""
        return {"requests": self.requests, "body_bytes": self.body_bytes, "tenants": len(self.by_tenant),
                "refused_busy": self.refused}

    def _tenant(self, scope: dict) -> str | None:
        """The tenant of the request's bearer token (``None`` without a valid one)."""
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    return self.tokens.authenticate(token.strip())
        return None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """Admit, account and bound one request."""
        if scope["type"] != "http" or scope.get("path") in _OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        cfg = self.config
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        has_body = chunked or (declared is not None and declared != b"0")
        if declared is not None and (not declared.isdigit() or int(declared) > cfg.max_body_bytes):
            await _error_response(TooLarge(f"request body of {declared.decode(errors='replace')[:40]} bytes; "
                                           f"the limit is {cfg.max_body_bytes}"))(scope, receive, send)
            return
        tenant = self._tenant(scope)
        if has_body and tenant is None:
            await _error_response(Unauthorized("missing or unknown token (Authorization: Bearer <token>)"))(
                scope, receive, send)
            return
        reserve = (int(declared) if declared is not None and not chunked else cfg.max_body_bytes) if has_body else 0
        mine = self.by_tenant.get(tenant, [0, 0]) if tenant is not None else [0, 0]
        problem = None
        if self.requests >= cfg.max_requests:
            problem = f"{self.requests} requests in flight (limit {cfg.max_requests})"
        elif tenant is not None and mine[0] >= cfg.max_tenant_requests:
            problem = f"{mine[0]} requests of this tenant in flight (limit {cfg.max_tenant_requests})"
        elif reserve and self.body_bytes + reserve > cfg.max_body_inflight:
            problem = f"{self.body_bytes} bytes of request bodies in flight (limit {cfg.max_body_inflight})"
        elif reserve and mine[1] + reserve > cfg.max_tenant_body_inflight:
            problem = (f"{mine[1]} bytes of this tenant's request bodies in flight "
                       f"(limit {cfg.max_tenant_body_inflight})")
        if problem is not None:
            self.refused += 1
            await _error_response(Busy(f"busy: {problem}; retry later"))(scope, receive, send)
            return
        self.requests += 1
        self.body_bytes += reserve
        if tenant is not None:
            mine = self.by_tenant.setdefault(tenant, [0, 0])
            mine[0] += 1
            mine[1] += reserve
        try:
            await self._forward(scope, receive, send, has_body)
        finally:
            self.requests -= 1
            self.body_bytes -= reserve
            if tenant is not None:
                mine[0] -= 1
                mine[1] -= reserve
                if mine[0] == 0:
                    self.by_tenant.pop(tenant, None)

    async def _forward(self, scope: dict, receive: Any, send: Any, has_body: bool) -> None:
        """Hand the request on: a JSON route's body read here first, a raw route's through a bounded receive."""
        limit, timeout = self.config.max_body_bytes, self.config.body_timeout
        if not has_body:
            await self.app(scope, receive, send)
            return
        if _raw_body_route(scope.get("method", ""), scope.get("path", "")):
            seen = 0

            async def bounded() -> dict:
                """The next body message, within the deadline and counted against the limit."""
                nonlocal seen
                try:
                    message = await asyncio.wait_for(receive(), timeout)
                except asyncio.TimeoutError:
                    raise RequestTimeout(f"no part of the request body arrived for {timeout:g} s") from None
                if message["type"] == "http.request":
                    seen += len(message.get("body", b""))
                    if seen > limit:
                        raise TooLarge(f"request body over the limit of {limit} bytes")
                return message

            await self.app(scope, bounded, send)
            return
        body = bytearray()
        more = True
        while more:
            try:
                message = await asyncio.wait_for(receive(), timeout)
            except asyncio.TimeoutError:
                await _error_response(RequestTimeout(f"no part of the request body arrived for {timeout:g} s"))(
                    scope, receive, send)
                return
            if message["type"] != "http.request":
                return  # the client is gone
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
            if len(body) > limit:
                await _error_response(TooLarge(f"request body over the limit of {limit} bytes"))(
                    scope, receive, send)
                return
        replayed = False

        async def replay() -> dict:
            """The buffered body once, then whatever the connection says (a disconnect)."""
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def header_deadline_protocol(seconds: float) -> type:
    """uvicorn's h11 protocol with a deadline for headers: a connection on which no request is in
    progress ``seconds`` after it opened, or after its last answer, is closed.

    uvicorn has no such timeout of its own: a client that opens connections
    and never finishes a request's headers would hold them for good, up to
    the connection limit, and then nobody (``/v1/health`` included) would be
    answered. A request in progress is not affected (its body has
    ``body_timeout``, a search ``query_timeout``).
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        """H11Protocol that closes a connection idle without a complete request for ``seconds``."""

        _deadline: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            """(Re)start the deadline."""
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(seconds, self._expire)

        def _expire(self) -> None:
            """Close the connection unless a request is in progress on it."""
            self._deadline = None
            if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            """Open, and start the deadline for the first request."""
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            """An answer is sent: the next request has ``seconds`` again."""
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            """Closed: no deadline left behind."""
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

    return HeaderDeadlineProtocol


class _Refused(Exception):
    """A commit the core refused: its error, and what it blames (``uploads``: the new uploads;
    ``all``: those and the key files)."""

    def __init__(self, error: EncmatchError, blame: str):
        """``error`` from the core; ``blame`` what is deleted."""
        super().__init__(str(error))
        self.error = error
        self.blame = blame


async def _read_body(request: Request, cap: int) -> bytes:
    """The request body, read as it streams in, refused (413) as soon as it passes ``cap`` bytes."""
    parts: list[bytes] = []
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > cap:
            raise TooLarge(f"request body over {cap} bytes, the most this request can carry")
        parts.append(chunk)
    return b"".join(parts)


def _error_response(exc: EncmatchError) -> JSONResponse:
    """The JSON answer ``{"error", "kind"}`` of an error, with its status (and Retry-After / WWW-Authenticate)."""
    status = status_for(exc)
    headers = {}
    if status == 503:
        headers["Retry-After"] = "1"
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if status in (408, 413):
        headers["Connection"] = "close"  # the rest of the body is not read
    return JSONResponse({"error": exc.message, "kind": exc.kind}, status_code=status, headers=headers)


def create_app(config: ServiceConfig) -> FastAPI:
    """The service application over ``config.data_dir`` (recovered and loaded when it starts)."""
    config = config.resolved()
    storage = Storage(config.data_dir, allow_insecure=config.allow_insecure, max_file_bytes=config.max_file_bytes,
                      quotas=config.quotas)
    tokens = TokenStore(config.data_dir)
    scheduler = Scheduler(max_pending=config.max_pending, workers=config.workers, query_timeout=config.query_timeout)
    unavailable: dict[tuple[str, str], str] = {}

    def load_all() -> None:
        """Load every committed index (after crash recovery); one that cannot load is reported, not served."""
        report = storage.recover()
        if report["removed"] or report["truncated"]:
            log.warning("recovered the data directory: %s", report)
        for key in storage.committed():
            try:
                meta = storage.keys_meta(*key)
                if meta.get("insecure") and not config.allow_insecure:
                    raise Forbidden(f"preset {meta['preset']!r} is INSECURE; start with --allow-insecure to serve it")
                generation, gen_dir, keys_dir = storage.current(*key)  # type: ignore[misc]
                entry = open_generation(gen_dir, keys_dir, config.memory_budget, config.backend)
                entry.generation = generation
                scheduler.install(key, entry)
                log.info("loaded index %s/%s: generation %d, %d entries", key[0], key[1], generation, entry.count)
            except EncmatchError as exc:
                unavailable[key] = str(exc)
                log.error("index %s/%s is not served: %s", key[0], key[1], exc)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        """Recover and load the data directory before serving; stop the search queue after the last request."""
        await asyncio.to_thread(load_all)
        yield
        result = await asyncio.to_thread(scheduler.shutdown)
        log.info("search queue stopped: %s", result)

    app = FastAPI(
        title="encmatch",
        version=__version__,
        description="Encrypted 1:N face search: encrypted galleries and queries in, encrypted results out. "
                    "The service holds evaluation keys and ciphertexts only, never a secret key.",
        lifespan=lifespan,
    )
    app.add_middleware(_Admission, config=config, tokens=tokens)
    core = core_version()
    bearer = HTTPBearer(auto_error=False, description="a tenant token (encmatch tenant add)")

    def tenant_of(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str:
        """The tenant of the request's bearer token (401 without a valid one)."""
        tenant = tokens.authenticate(creds.credentials if creds else None)
        if tenant is None:
            raise Unauthorized("missing or unknown token (Authorization: Bearer <token>)")
        return tenant

    @app.exception_handler(EncmatchError)
    async def on_error(_request: Request, exc: EncmatchError) -> JSONResponse:
        """Every encmatch error as ``{"error", "kind"}`` with its status."""
        if status_for(exc) >= 500 and exc.kind not in ("busy", "shutting_down", "timeout"):
            log.error("internal error: %s", exc)
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        """Malformed JSON, fields or parameters: 422 ``invalid_argument`` with the first problems."""
        parts = []
        for e in exc.errors()[:5]:
            where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            parts.append(f"{where or 'body'}: {e.get('msg', 'invalid')}")
        return JSONResponse({"error": "invalid request: " + "; ".join(parts), "kind": "invalid_argument"},
                            status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Unknown routes and methods in the same JSON shape."""
        kind = {404: "not_found", 405: "invalid_argument"}.get(exc.status_code, "invalid_argument")
        return JSONResponse({"error": str(exc.detail), "kind": kind}, status_code=exc.status_code)

    @app.exception_handler(ClientDisconnect)
    async def on_disconnect(_request: Request, _exc: ClientDisconnect) -> JSONResponse:
        """The client went away while sending its body: nothing to answer, nothing to log."""
        return JSONResponse({"error": "the client disconnected", "kind": "invalid_argument"}, status_code=400)

    @app.exception_handler(OSError)
    async def on_os_error(_request: Request, exc: OSError) -> JSONResponse:
        """A storage error: a full disk (or quota of the file system) is 507 ``insufficient_storage``,
        any other 500 ``io``; logged in one line, answered without a traceback."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            log.error("storage full: %s", exc)
            return _error_response(InsufficientStorage("the service's storage is full; nothing was changed: "
                                                       "retry later"))
        log.error("storage error: %s", exc)
        return _error_response(IOError(f"storage error on the service ({exc.strerror or type(exc).__name__})"))

    @app.exception_handler(Exception)
    async def on_crash(_request: Request, exc: Exception) -> JSONResponse:
        """A bug: logged with its traceback, answered 500 ``internal`` without one."""
        log.exception("unexpected error")
        return JSONResponse({"error": f"internal error: {type(exc).__name__}", "kind": "internal"}, status_code=500)

    def status_with_load(tenant: str, index_id: str) -> dict:
        """An index's stored status plus whether it is loaded (and why not)."""
        out = storage.status(tenant, index_id)
        entry = scheduler.loaded((tenant, index_id))
        out["loaded"] = entry is not None
        if (tenant, index_id) in unavailable:
            out["unavailable"] = unavailable[(tenant, index_id)]
        return out

    def admission() -> _Admission | None:
        """The admission middleware of the built middleware stack (``None`` before the first request)."""
        layer = app.middleware_stack
        while layer is not None and not isinstance(layer, _Admission):
            layer = getattr(layer, "app", None)
        return layer

    @app.get("/v1/health", summary="Liveness, queue and load (no token needed; answers under load)")
    async def health() -> dict:
        """Liveness, versions, queue state, load and limits; needs no token, runs in the event loop
        (no thread) and passes every admission bound, so it answers while the service is saturated."""
        stats = scheduler.stats()
        adm = admission()
        load = dict(adm.stats() if adm is not None else {}, index_locks=storage.lock_count())
        return {"status": "shutting_down" if stats["closing"] else "ok", "version": __version__,
                "core": core, "queue": stats, "load": load, "insecure_allowed": config.allow_insecure,
                "limits": {"max_body_bytes": config.max_body_bytes, "max_file_bytes": config.max_file_bytes,
                           "max_queue": config.max_pending, "query_timeout": config.query_timeout,
                           "max_requests": config.max_requests, "max_tenant_requests": config.max_tenant_requests,
                           "max_body_inflight": config.max_body_inflight,
                           "max_tenant_body_inflight": config.max_tenant_body_inflight,
                           "body_timeout": config.body_timeout}}

    @app.post("/v1/indexes", status_code=201, summary="Create a pending index from a key set's keys.json")
    def create_index(body: CreateIndex, tenant: str = Depends(tenant_of)) -> dict:
        """Create a pending index bound to a key set; its key files are then uploaded like any file."""
        return dict(storage.create_index(tenant, body.keys, body.label), loaded=False)

    @app.get("/v1/indexes", summary="The tenant's committed indexes")
    def list_indexes(tenant: str = Depends(tenant_of)) -> dict:
        """The committed indexes of the token's tenant."""
        return {"indexes": [dict(s, loaded=scheduler.loaded((tenant, s["id"])) is not None)
                            for s in storage.list(tenant)]}

    @app.get("/v1/indexes/{index_id}", summary="State of an index (pending or ready), entries, uploads")
    def get_index(index_id: str, tenant: str = Depends(tenant_of)) -> dict:
        """State of one index: pending or ready, generation, entries, parameters, uploads in progress."""
        return status_with_load(tenant, index_id)

    @app.delete("/v1/indexes/{index_id}", summary="Delete an index and its files")
    def delete_index(index_id: str, tenant: str = Depends(tenant_of)) -> dict:
        """Delete an index (after its running search); its queued searches fail as not found."""
        with storage.lock(tenant, index_id):
            storage.status(tenant, index_id)  # NotFound for another tenant's id
            scheduler.remove((tenant, index_id))
            storage.delete(tenant, index_id)
        unavailable.pop((tenant, index_id), None)
        return {"deleted": index_id}

    @app.get("/v1/indexes/{index_id}/manifest", summary="The manifest of the current generation")
    def get_manifest(index_id: str, tenant: str = Depends(tenant_of)) -> dict:
        """The current generation's manifest: what an enroller appends to."""
        return storage.manifest(tenant, index_id)

    @app.get("/v1/indexes/{index_id}/sealed", summary="The committed sealed label files (opaque)")
    def list_sealed(index_id: str, tenant: str = Depends(tenant_of)) -> dict:
        """Names, sizes and SHA-256 of the sealed label files of the current generation."""
        return {"files": storage.sealed(tenant, index_id)}

    @app.get("/v1/indexes/{index_id}/sealed/{name}", response_class=Response, responses={200: _OCTETS},
             summary="One sealed label file's bytes, as uploaded")
    def get_sealed(index_id: str, name: str, tenant: str = Depends(tenant_of)) -> Response:
        """The bytes of one committed sealed label file (only the key holder can open them)."""
        return Response(storage.sealed_bytes(tenant, index_id, name), media_type="application/octet-stream")

    @app.get("/v1/indexes/{index_id}/groups/{name}", response_class=FileResponse, responses={200: _OCTETS},
             summary="One committed group file's bytes (header X-SHA256)")
    def get_group(index_id: str, name: str, tenant: str = Depends(tenant_of)) -> FileResponse:
        """A group file of the current generation, as committed: what an enroller fills the last,
        partial group from (ciphertexts only)."""
        path, sha = storage.group_file(tenant, index_id, name)
        return FileResponse(path, media_type="application/octet-stream", headers={"X-SHA256": sha})

    @app.put("/v1/indexes/{index_id}/files/{name}", summary="Declare (or resume) the upload of a file")
    def declare_file(index_id: str, name: str, body: DeclareFile, tenant: str = Depends(tenant_of)) -> dict:
        """Declare a file by size and SHA-256; idempotent, answers where to resume."""
        return storage.declare(tenant, index_id, name, body.size, body.sha256)

    @app.get("/v1/indexes/{index_id}/files/{name}", summary="Progress of an upload")
    def file_status(index_id: str, name: str, tenant: str = Depends(tenant_of)) -> dict:
        """How much of a file is received (and whether it is complete or committed)."""
        return storage.upload_status(tenant, index_id, name)

    @app.patch("/v1/indexes/{index_id}/files/{name}", openapi_extra={"requestBody": _OCTETS},
               summary="Append a chunk at `offset`; acknowledged once durable")
    async def upload_chunk(request: Request, index_id: str, name: str,
                           offset: int = Query(..., ge=0, description="byte offset of the chunk in the file"),
                           tenant: str = Depends(tenant_of)) -> dict:
        """Append a chunk (header ``X-Chunk-SHA256``); answered once it is durable.

        The index, the declared upload, the offset and the chunk's
        Content-Length are checked before the body is read."""
        declared = request.headers.get("content-length")
        await run_in_threadpool(storage.check_chunk, tenant, index_id, name, offset,
                                int(declared) if declared and declared.isdigit() else None)
        data = await _read_body(request, config.max_body_bytes)
        return await run_in_threadpool(storage.write_chunk, tenant, index_id, name, offset, data,
                                       request.headers.get("x-chunk-sha256"))

    def _load_commit(gen: Any, manifest: dict) -> Loaded:
        """Load a prepared generation; raise :class:`_Refused` with the core's error and what it blames.

        With ``isolate_commit_check`` a child process first loads the
        new groups with the index's key files, decoding every group record
        (also when ``memory_budget`` would stream them); only then does
        this process load the whole generation. A refusal blames the new uploads, and
        the key files too while no generation with entries has proven them
        (the core loads keys only with at least one group).
        """
        groups = manifest.get("groups") or []
        new = set(gen.new_uploads)
        picked = [i for i, g in enumerate(groups) if g.get("file") in new]
        blame = "uploads" if storage.keys_proven(gen.tenant, gen.index_id) else "all"
        try:
            if config.isolate_commit_check and config.backend is None and picked:
                # no memory budget: a streamed index would not decode its groups at load, the child must
                check_in_subprocess(gen.path, gen.keys_dir, 0, picked)
            return open_generation(gen.path, gen.keys_dir, config.memory_budget, config.backend)
        except EncmatchError as exc:
            raise _Refused(exc, blame) from None

    @app.post("/v1/indexes/{index_id}/commit", summary="Make the uploaded groups the index's next generation")
    def commit(index_id: str, body: Commit, tenant: str = Depends(tenant_of)) -> dict:
        """Load the manifest's groups as the next generation; visible only once the core has loaded it."""
        key = (tenant, index_id)
        with storage.lock(tenant, index_id):
            meta = storage.keys_meta(tenant, index_id)
            if meta.get("insecure") and not config.allow_insecure:
                raise Forbidden(f"preset {meta['preset']!r} is INSECURE; this service refuses it")
            gen = storage.prepare_commit(tenant, index_id, body.manifest, body.sealed)
            try:
                entry = _load_commit(gen, body.manifest)
            except _Refused as refused:
                exc = refused.error
                bad_data = exc.kind in ("corrupt", "mismatch", "invalid_argument")
                dropped = storage.discard(gen, drop_uploads=bad_data)
                if bad_data and refused.blame == "all":
                    dropped += [n for n in storage.drop_keys(tenant, index_id) if n not in dropped]
                served = (f"generation {gen.previous} is still served" if gen.previous is not None
                          else "the index stays pending")
                log.warning("commit of %s/%s refused: %s", tenant, index_id, exc)
                raise type(exc)(f"commit refused, {served}: the core refused the files: {exc.message}"
                                + (f"; deleted {', '.join(dropped[:5])}"
                                   + (f" and {len(dropped) - 5} more" if len(dropped) > 5 else "")
                                   + ": upload them again, corrected" if dropped else ""), kind=exc.kind) from None
            except BaseException:
                storage.discard(gen)
                raise
            entry.generation = gen.number
            storage.publish(gen)
            scheduler.install(key, entry)  # closes the previous generation's handle after its search
            if gen.previous is not None:
                storage.remove_generation(tenant, index_id, gen.previous)
            unavailable.pop(key, None)
        return status_with_load(tenant, index_id)

    @app.post("/v1/indexes/{index_id}/search", openapi_extra={"requestBody": _OCTETS},
              response_class=Response, responses={200: _OCTETS},
              summary="Encrypted search: query bytes in, encrypted result bytes out")
    async def search(request: Request, index_id: str,
                     mode: str = Query("identification", description=" or ".join(SEARCH_MODES)),
                     bound: int | None = Query(None, description="payload mode only: the public bound on the number "
                                               "of matches, 1 to 4096 (default 32); the result's size depends only on it"),
                     delta: str | None = Query(None, description="refused unless it is the index's own threshold: "
                                               "a search cannot choose one (docs/LEAKAGE.md)"),
                     signed: bool = Query(False, description="answer with the result bound to its query and signed "
                                          "with the service's key, for threshold decryptors (docs/THRESHOLD.md)"),
                     tenant: str = Depends(tenant_of)) -> Response:
        """Run an encrypted search behind the bounded queue; the body is the query, the answer the result."""
        if mode not in SEARCH_MODES:
            raise InvalidArgument(f"unknown mode {mode!r}; expected one of {', '.join(SEARCH_MODES)}")
        if bound is not None:
            if mode != "payload":
                raise InvalidArgument(f"bound is the payload mode's, not the {mode} mode's")
            bound = check_bound(bound)
        if signed and config.signing_key is None:
            raise InvalidArgument("this service signs no searches: start it with --signing-key (docs/THRESHOLD.md)")
        key = (tenant, index_id)
        entry = scheduler.loaded(key)
        if entry is None:
            status = await run_in_threadpool(status_with_load, tenant, index_id)  # NotFound if not the tenant's
            if status["state"] == "pending":
                raise Conflict(f"index {index_id} is not committed yet")
            raise Conflict(f"index {index_id} is not served: {status.get('unavailable', 'not loaded')}")
        _check_delta(delta, entry)
        if entry.server is None:
            raise Conflict(f"index {index_id!r} is empty")
        lo, hi = entry.query_bytes
        cap = min(hi, config.max_body_bytes) if hi else config.max_body_bytes
        declared = request.headers.get("content-length")
        length = int(declared) if declared and declared.isdigit() else None
        if length is not None and not lo <= length <= cap:
            # not the size of a query for this index: the header says what it is, the body is not read
            head = await _read_prefix(request, min(length, 1024))
            _check_header(head, entry, what="query")
            raise (Corrupt(f"query: {length} bytes; a query for this index has {lo} to {hi}")
                   if length < lo else TooLarge(f"query: {length} bytes; a query for this index has at most {hi}"))
        scheduler.refuse_if_full()
        query = await _read_body(request, cap)
        _check_query(query, entry)
        result, info = await scheduler.search(key, query, mode, config.signing_key if signed else None, bound=bound)
        headers = {"X-Queue-Seconds": f"{info['queue_seconds']:.6f}",
                   "X-Search-Seconds": f"{info['search_seconds']:.6f}",
                   "X-Generation": str(info["generation"])}
        return Response(result, media_type="application/octet-stream", headers=headers)

    app.state.storage = storage
    app.state.scheduler = scheduler
    app.state.tokens = tokens
    return app


def _check_delta(delta: str | None, entry: Loaded) -> None:
    """Refuse a ``delta`` other than the index's: the threshold is fixed at creation, never per search."""
    if delta is None:
        return
    try:
        value = float(delta)
    except ValueError:
        value = float("nan")
    if value != entry.delta:
        raise InvalidArgument(f"the threshold belongs to the index (delta {entry.delta}, fixed at its creation); "
                              f"a search cannot use delta {delta}")


async def _read_prefix(request: Request, n: int) -> bytes:
    """At most the first ``n`` bytes of the request body (the rest is not read)."""
    head = b""
    async for chunk in request.stream():
        head += chunk
        if len(head) >= n:
            break
    return head[:n]


def _check_header(head: bytes, entry: Loaded, what: str) -> None:
    """Refuse a frame whose header (at the start of ``head``) is not a ``what`` of the index's key set;
    a header that ``head`` does not hold whole passes."""
    try:
        h = parse_header(head)
    except FrameError as exc:
        if exc.truncated:
            return
        raise Corrupt(f"{what}: {exc}") from None
    if h.kind != what:
        raise Mismatch(f"expected a {what}, got a {h.kind[:60]}")
    if h.fingerprint != entry.fingerprint:
        raise Mismatch(f"the {what} was made with other parameters than the index")
    if h.key_id != entry.key_id:
        raise Mismatch(f"the {what} belongs to key set {h.key_id[:64]}, the index to {entry.key_id}")


def _check_query(query: bytes, entry: Loaded) -> None:
    """Refuse, before it is queued, a query that is not a whole frame of kind ``query`` of the index's key set."""
    try:
        h = parse_header(query)
    except FrameError as exc:
        raise Corrupt(f"query: {exc}") from None
    if h.total_length != len(query):
        raise Corrupt(f"query: {len(query)} bytes, its header announces {h.total_length} (truncated or padded)")
    if h.kind != "query":
        raise Mismatch(f"expected a query, got a {h.kind}")
    if h.fingerprint != entry.fingerprint:
        raise Mismatch("the query was made with other parameters than the index")
    if h.key_id != entry.key_id:
        raise Mismatch(f"the query belongs to key set {h.key_id}, the index to {entry.key_id}")


def serve(config: ServiceConfig, host: str = "127.0.0.1", port: int = 8470, *, access_log: bool = True,
          tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
          allow_plaintext: bool = False) -> int:
    """Run the service with uvicorn until SIGINT/SIGTERM; in-flight requests get ``shutdown_grace`` seconds.

    With ``tls_cert`` and ``tls_key`` (PEM files: the certificate chain and
    its private key) it speaks HTTPS only. Plain HTTP is served on a
    loopback address, or on any other (``0.0.0.0`` included) only with
    ``allow_plaintext`` (e.g. behind a TLS-terminating proxy on the same
    host); otherwise :class:`~encmatch.errors.InvalidArgument` is raised
    before anything is opened. Tokens in URLs are refused and query strings
    are redacted in the log (:mod:`~encmatch.service.transport`).

    Returns 0 after a clean shutdown.
    """
    import uvicorn

    from .transport import check_listen, install_log_redaction, is_loopback_host, refuse_url_tokens

    check_listen(host, tls_cert, tls_key, allow_plaintext)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    if tls_cert is None and not is_loopback_host(host):
        log.warning("--allow-plaintext: serving plain HTTP on %s; tokens travel unencrypted unless a TLS proxy "
                    "fronts this address", host)
    app = create_app(config)
    uv_config = uvicorn.Config(
        refuse_url_tokens(app), host=host, port=port, access_log=access_log, log_level="info",
        timeout_graceful_shutdown=int(max(1, config.shutdown_grace)),
        limit_concurrency=config.max_connections or None,  # far above the JSON limits of _Admission
        http=header_deadline_protocol(config.header_timeout),
        ssl_certfile=None if tls_cert is None else str(tls_cert),
        ssl_keyfile=None if tls_key is None else str(tls_key),
    )
    install_log_redaction()  # after uvicorn.Config, which (re)configures its loggers and handlers
    server = uvicorn.Server(uv_config)
    # uvicorn re-raises SIGINT/SIGTERM once it has shut down gracefully; with these handlers in place
    # that re-raise is a no-op and the process exits 0 instead of dying of the signal.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    server.run()
    return 0 if server.started else 1
