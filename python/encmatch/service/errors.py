"""Errors of the service, and how they travel over HTTP.

Every failure answer of the service is JSON ``{"error": message, "kind":
kind}`` (plus details for some kinds) with an HTTP status chosen by
:data:`STATUS`. The core's error kinds (``invalid_argument``,
``mismatch``, ``corrupt``, ``not_found``, ``exists``...) keep their
meaning; the service adds its own: ``unauthorized`` (401), ``forbidden``
(403: a secret key, an insecure preset), ``conflict`` (409: an upload
offset or a commit that does not fit the stored state), ``too_large``
(413), ``quota`` (429: a tenant's quota of indexes or uploads in flight),
``insufficient_storage`` (507: a tenant's storage quota, or a full disk),
``busy`` (503: the query queue is full; retry later),
``timeout`` (504), ``request_timeout`` (408: a request body that stopped
arriving) and ``shutting_down`` (503).

:func:`error_from_response` turns an answer back into the same exception
class on the client side, so a caller of :class:`~encmatch.service.remote.RemoteIndex`
catches exactly what a caller of the local index does.

The answers that mean "not now" or "not you" rather than "bad input"
(:class:`Unauthorized`, :class:`Forbidden`, :class:`Busy`,
:class:`Timeout`, :class:`RequestTimeout`, :class:`ShuttingDown`, and a
shard the service cannot serve, :class:`RemoteShardUnavailable`) are also
subclasses of :class:`~encmatch.errors.Unavailable`, like the network
failures the client raises itself (connection refused, a name that does
not resolve, a TLS failure, no answer in time): ``except Unavailable``
catches all of them, and the command line exits 3 on them. An unknown
index stays :class:`~encmatch.errors.NotFound` (bad input, exit 2).
"""

from __future__ import annotations

from ..errors import EncmatchError, ShardUnavailable, Unavailable, error_for

__all__ = [
    "ServiceError",
    "Unauthorized",
    "Forbidden",
    "Conflict",
    "QuotaExceeded",
    "InsufficientStorage",
    "TooLarge",
    "Busy",
    "Timeout",
    "RequestTimeout",
    "ShuttingDown",
    "RemoteShardUnavailable",
    "STATUS",
    "status_for",
    "error_from_response",
]


class ServiceError(EncmatchError):
    """Base class of the errors only the service raises."""

    kind = "service"


class Unauthorized(ServiceError, Unavailable):
    """No token, or a token no tenant holds."""

    kind = "unauthorized"


class Forbidden(ServiceError, Unavailable):
    """Something the service refuses to hold: a secret key, an index at an insecure preset."""

    kind = "forbidden"


class Conflict(ServiceError):
    """The request does not fit the stored state (upload offset, incomplete files, changed groups)."""

    kind = "conflict"


class TooLarge(ServiceError):
    """The request body exceeds the service's limit."""

    kind = "too_large"


class QuotaExceeded(ServiceError, Unavailable):
    """A tenant's quota (indexes, uploads in flight) would be exceeded (429)."""

    kind = "quota"


class InsufficientStorage(ServiceError, Unavailable):
    """A tenant's storage quota would be exceeded, or the service's disk is full (507)."""

    kind = "insufficient_storage"


class Busy(ServiceError, Unavailable):
    """The bounded query queue is full; retry after a short wait."""

    kind = "busy"


class Timeout(ServiceError, Unavailable):
    """The query did not finish (or start) within the service's time limit."""

    kind = "timeout"


class RequestTimeout(ServiceError, Unavailable):
    """A request body stopped arriving (the service's per-piece deadline passed)."""

    kind = "request_timeout"


class ShuttingDown(ServiceError, Unavailable):
    """The service is stopping and takes no new work."""

    kind = "shutting_down"


class RemoteShardUnavailable(ShardUnavailable, Unavailable):
    """A shard of a service's scaled-out index could not be served (``503 shard_unavailable``): a
    :class:`~encmatch.errors.ShardUnavailable` that is also :class:`~encmatch.errors.Unavailable`."""

    kind = "shard_unavailable"


_SERVICE: dict[str, type[EncmatchError]] = {
    cls.kind: cls for cls in (Unauthorized, Forbidden, Conflict, TooLarge, Busy, Timeout, RequestTimeout, ShuttingDown,
                              RemoteShardUnavailable, QuotaExceeded, InsufficientStorage)
}

#: HTTP status of every error kind.
STATUS: dict[str, int] = {
    "invalid_argument": 422,
    "mismatch": 422,
    "corrupt": 422,
    "not_found": 404,
    "exists": 409,
    "conflict": 409,
    "unauthorized": 401,
    "forbidden": 403,
    "too_large": 413,
    "quota": 429,
    "insufficient_storage": 507,
    "busy": 503,
    "shard_unavailable": 503,
    "shutting_down": 503,
    "timeout": 504,
    "request_timeout": 408,
    "io": 500,
    "internal": 500,
    "library": 500,
}


def status_for(exc: EncmatchError) -> int:
    """The HTTP status that reports ``exc``."""
    return STATUS.get(exc.kind, 500)


def error_from_response(status: int, body: object) -> EncmatchError:
    """The exception an error answer stands for (by its ``kind``; by its status when it has none).

    Without a ``kind`` (an answer of something in front of the service, a
    proxy or another server), 429 and 503 read as ``busy``, 502 as
    ``unavailable`` and 504 as ``timeout``: all
    :class:`~encmatch.errors.Unavailable`.
    """
    message = f"HTTP {status}"
    kind = None
    if isinstance(body, dict):
        message = str(body.get("error") or message)
        kind = body.get("kind")
    if kind is None:
        kind = {401: "unauthorized", 403: "forbidden", 404: "not_found", 408: "request_timeout", 409: "conflict",
                413: "too_large", 429: "busy",
                502: "unavailable", 503: "busy", 504: "timeout"}.get(status, "invalid_argument" if 400 <= status < 500 else "internal")
    if kind in _SERVICE:
        return _SERVICE[kind](message)
    return error_for(kind, message)
