"""HTTP plumbing shared by the admission middleware and the routes: an error's JSON answer and
request bodies read within a bound."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from ..errors import EncmatchError
from .errors import TooLarge, status_for

__all__ = ["error_response", "read_body", "read_prefix"]


def error_response(exc: EncmatchError) -> JSONResponse:
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


async def read_body(request: Request, cap: int) -> bytes:
    """The request body, read as it streams in, refused (413) as soon as it passes ``cap`` bytes."""
    parts: list[bytes] = []
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > cap:
            raise TooLarge(f"request body over {cap} bytes, the most this request can carry")
        parts.append(chunk)
    return b"".join(parts)


async def read_prefix(request: Request, n: int) -> bytes:
    """At most the first ``n`` bytes of the request body (the rest is not read)."""
    head = b""
    async for chunk in request.stream():
        head += chunk
        if len(head) >= n:
            break
    return head[:n]
