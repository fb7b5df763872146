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

The application is assembled here from :mod:`~encmatch.service.config`
(settings), :mod:`~encmatch.service.state` (what it holds while it runs),
:mod:`~encmatch.service.admission` (limits in front of every route) and
:mod:`~encmatch.service.routes` (one router per resource).

Limits (:class:`~encmatch.service.admission.Admission`, in front of every route but ``/v1/health``,
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
import signal
import sys
from pathlib import Path

from .._util.extras import require

require("service", "fastapi", "uvicorn")
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402
from starlette.requests import ClientDisconnect  # noqa: E402

from .. import __version__  # noqa: E402
from ..errors import EncmatchError, IOError  # noqa: E402
from .admission import Admission, header_deadline_protocol  # noqa: E402
from .config import ServiceConfig  # noqa: E402
from .errors import InsufficientStorage, status_for  # noqa: E402
from .http import error_response  # noqa: E402
from .routes import ROUTERS  # noqa: E402
from .state import ServiceState  # noqa: E402

__all__ = ["ServiceConfig", "create_app", "serve"]

log = logging.getLogger("encmatch.service")


def create_app(config: ServiceConfig) -> FastAPI:
    """The service application over ``config.data_dir`` (recovered and loaded when it starts)."""
    state = ServiceState.open(config)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        """Recover and load the data directory before serving; stop the search queue after the last request."""
        await asyncio.to_thread(state.load_all)
        yield
        result = await asyncio.to_thread(state.scheduler.shutdown)
        log.info("search queue stopped: %s", result)

    app = FastAPI(
        title="encmatch",
        version=__version__,
        description="Encrypted 1:N face search: encrypted galleries and queries in, encrypted results out. "
                    "The service holds evaluation keys and ciphertexts only, never a secret key.",
        lifespan=lifespan,
    )
    app.add_middleware(Admission, config=state.config, tokens=state.tokens)
    _add_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.state.service = state
    app.state.storage = state.storage
    app.state.scheduler = state.scheduler
    app.state.tokens = state.tokens
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every failure answered as JSON ``{"error", "kind"}`` with its status, never with a traceback."""

    @app.exception_handler(EncmatchError)
    async def on_error(_request: Request, exc: EncmatchError) -> JSONResponse:
        """Every encmatch error as ``{"error", "kind"}`` with its status."""
        if status_for(exc) >= 500 and exc.kind not in ("busy", "shutting_down", "timeout"):
            log.error("internal error: %s", exc)
        return error_response(exc)

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
            return error_response(InsufficientStorage("the service's storage is full; nothing was changed: "
                                                       "retry later"))
        log.error("storage error: %s", exc)
        return error_response(IOError(f"storage error on the service ({exc.strerror or type(exc).__name__})"))

    @app.exception_handler(Exception)
    async def on_crash(_request: Request, exc: Exception) -> JSONResponse:
        """A bug: logged with its traceback, answered 500 ``internal`` without one."""
        log.exception("unexpected error")
        return JSONResponse({"error": f"internal error: {type(exc).__name__}", "kind": "internal"}, status_code=500)


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
        limit_concurrency=config.max_connections or None,  # far above the JSON limits of Admission
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
