"""Transport security of the service: which addresses are loopback, tokens kept out of URLs and logs.

- :func:`is_loopback_host` decides whether plain HTTP is acceptable without
  an explicit opt-in: ``encmatch serve`` refuses to listen in plaintext on
  any other address unless ``--allow-plaintext`` is given, and the SDK warns
  (:class:`PlaintextTokenWarning`) before it sends a bearer token over
  ``http://`` to any other host.
- :func:`refuse_url_tokens` wraps the ASGI application: a request that
  carries a token-like query parameter (``?token=``, ``?access_token=``...)
  is refused with ``401 unauthorized`` whatever else it carries, so a
  client that puts its token in the URL (where proxies and logs keep it)
  fails at once instead of working by accident. Tokens are accepted only
  in the ``Authorization: Bearer`` header.
- :class:`RedactingFilter` rewrites uvicorn's access log lines: query
  parameter values are replaced by ``[redacted]`` except those of the
  service's own harmless parameters (``mode``, ``offset``, ``delta``), and
  anything that looks like an encmatch token (``em_...``) is redacted from
  every log record of the server.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any, Awaitable, Callable

__all__ = ["is_loopback_host", "check_listen", "PlaintextTokenWarning", "RedactingFilter", "install_log_redaction",
           "refuse_url_tokens", "URL_TOKEN_PARAMS", "REDACTED"]

#: Query parameter names refused as carrying a credential (compared case-insensitively).
URL_TOKEN_PARAMS = frozenset({"token", "access_token", "auth", "authorization", "bearer", "api_key", "apikey",
                              "key", "secret", "password"})
#: Query parameters of the service whose values are kept in the access log.
_SHOWN_PARAMS = frozenset({"mode", "offset", "delta"})
#: What a redacted value is replaced with.
REDACTED = "[redacted]"
#: An encmatch token anywhere in a log line (``em_`` + 43 URL-safe base64 characters).
_TOKEN_RE = re.compile(r"em_[A-Za-z0-9_\-]{16,}")


class PlaintextTokenWarning(UserWarning):
    """A bearer token is about to be sent over plain HTTP to a host that is not loopback."""


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an address or name, IPv6 optionally in brackets) is this machine's loopback.

    ``localhost`` (and ``*.localhost``) and addresses in 127.0.0.0/8 or
    ``::1`` are; the wildcard addresses ``0.0.0.0`` and ``::`` (every
    interface) and every other name are not. Names are not resolved: a
    name that happens to resolve to loopback still counts as remote.
    """
    host = host.strip().strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _redact_query(query: str) -> str:
    """``query`` with every value redacted except those of the service's own harmless parameters
    (and a parameter name that is long or looks like a token redacted whole)."""
    if not query:
        return query
    parts = []
    for item in query.split("&"):
        name, sep, value = item.partition("=")
        plain = urllib.parse.unquote_plus(name).lower()
        if len(plain) > 32 or _TOKEN_RE.search(plain):
            parts.append(REDACTED)
        elif not sep or (plain in _SHOWN_PARAMS and not _TOKEN_RE.search(urllib.parse.unquote_plus(value))):
            parts.append(item)
        else:
            parts.append(name + "=" + REDACTED)
    return "&".join(parts)


def redact_path(path: str) -> str:
    """A request target (``/path?query``) fit for a log line (see :class:`RedactingFilter`)."""
    path, sep, query = path.partition("?")
    return _TOKEN_RE.sub(REDACTED, path) + sep + _redact_query(query)


class RedactingFilter(logging.Filter):
    """Keeps credentials out of the server's log records (never drops a record).

    On uvicorn's access records (``'%s - "%s %s HTTP/%s" %d'``) the request
    target's query values are redacted (:func:`redact_path`); on every
    record, any ``em_...`` token in the message or its string arguments is.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record`` in place; always keep it."""
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5 \
                and isinstance(args[2], str):
            args = (args[0], args[1], redact_path(args[2]), args[3], args[4])
        if isinstance(args, tuple):
            args = tuple(_TOKEN_RE.sub(REDACTED, a) if isinstance(a, str) else a for a in args)
        record.args = args
        if isinstance(record.msg, str):
            record.msg = _TOKEN_RE.sub(REDACTED, record.msg)
        return True


def install_log_redaction() -> RedactingFilter:
    """Attach one :class:`RedactingFilter` to the loggers and handlers that write the server's
    lines (``uvicorn``, ``uvicorn.access``, ``uvicorn.error``, ``encmatch``, the root logger).

    Call it after uvicorn has configured logging (its ``Config``), which
    replaces the handlers. Filters on handlers also see records that
    propagate from child loggers. Returns the filter.
    """
    flt = RedactingFilter()
    for name in ("", "uvicorn", "uvicorn.access", "uvicorn.error", "encmatch"):
        logger = logging.getLogger(name)
        logger.addFilter(flt)
        for handler in logger.handlers:
            handler.addFilter(flt)
    return flt


def check_listen(host: str, tls_cert: str | os.PathLike | None, tls_key: str | os.PathLike | None,
                 allow_plaintext: bool) -> None:
    """Refuse (:class:`~encmatch.errors.InvalidArgument`) a listening setup that would expose tokens.

    TLS needs both files, readable and holding a certificate and its
    private key (PEM); without TLS, ``host`` must be loopback
    (:func:`is_loopback_host`) unless ``allow_plaintext``.
    """
    import ssl

    from ..errors import InvalidArgument

    if (tls_cert is None) != (tls_key is None):
        raise InvalidArgument("TLS needs both --tls-cert and --tls-key")
    if tls_cert is not None:
        for what, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
            if not Path(path).is_file():
                raise InvalidArgument(f"{what}: no such file {path}")
        try:  # refuse an unusable pair now, with a clear message, not from inside uvicorn
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(str(tls_cert), str(tls_key))
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise InvalidArgument(f"--tls-cert {tls_cert} / --tls-key {tls_key}: not a usable PEM certificate "
                                  f"and private key: {exc}") from None
    elif not is_loopback_host(host) and not allow_plaintext:
        raise InvalidArgument(
            f"refusing to serve plain HTTP on {host}: bearer tokens would cross the network unencrypted. "
            "Give --tls-cert FILE --tls-key FILE, or --allow-plaintext if a TLS-terminating proxy "
            "fronts this address")


ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def url_token_params(query_string: bytes) -> list[str]:
    """The names of credential-like parameters (:data:`URL_TOKEN_PARAMS`) in a raw query string."""
    try:
        pairs = urllib.parse.parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    except ValueError:
        return []
    return sorted({k for k, _ in pairs if k.lower() in URL_TOKEN_PARAMS})


def refuse_url_tokens(app: ASGIApp) -> ASGIApp:
    """Wrap the ASGI ``app``: an HTTP request with a credential-like query parameter
    (:data:`URL_TOKEN_PARAMS`) is answered ``401 unauthorized`` (the service's error body) without
    reaching ``app``, even when it also carries a valid ``Authorization`` header."""

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        """The ASGI entry point."""
        if scope.get("type") == "http":
            names = url_token_params(scope.get("query_string", b""))
            if names:
                body = json.dumps({
                    "error": f"a token in the URL ({', '.join(names)}=) is never accepted (URLs land in logs "
                             "and proxies): send it as 'Authorization: Bearer <token>'",
                    "kind": "unauthorized",
                }).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return wrapped
