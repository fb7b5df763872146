"""The service's admission control, in front of every route: requests and body bytes in flight
(overall and per tenant), body size and deadlines, a token before any body is read (:class:`Admission`);
and a deadline for a connection's request headers (:func:`header_deadline_protocol`)."""

from __future__ import annotations

import asyncio
from typing import Any

from .config import ServiceConfig
from .errors import Busy, RequestTimeout, TooLarge, Unauthorized
from .http import error_response
from .tenancy import TokenStore

__all__ = ["Admission", "OPEN_PATHS", "header_deadline_protocol"]


#: Routes that answer without a token and always (the OpenAPI pages are static).
OPEN_PATHS = {"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}


def raw_body_route(method: bytes | str, path: str) -> bool:
    """Whether a route reads its body itself (search, chunk upload), checking it before it reads."""
    return method == "PATCH" or (method == "POST" and path.endswith("/search"))


class Admission:
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
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        cfg = self.config
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        has_body = chunked or (declared is not None and declared != b"0")
        if declared is not None and (not declared.isdigit() or int(declared) > cfg.max_body_bytes):
            await error_response(TooLarge(f"request body of {declared.decode(errors='replace')[:40]} bytes; "
                                           f"the limit is {cfg.max_body_bytes}"))(scope, receive, send)
            return
        tenant = self._tenant(scope)
        if has_body and tenant is None:
            await error_response(Unauthorized("missing or unknown token (Authorization: Bearer <token>)"))(
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
            await error_response(Busy(f"busy: {problem}; retry later"))(scope, receive, send)
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
        if raw_body_route(scope.get("method", ""), scope.get("path", "")):
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
                await error_response(RequestTimeout(f"no part of the request body arrived for {timeout:g} s"))(
                    scope, receive, send)
                return
            if message["type"] != "http.request":
                return  # the client is gone
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
            if len(body) > limit:
                await error_response(TooLarge(f"request body over the limit of {limit} bytes"))(
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
