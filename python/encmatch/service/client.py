"""The service's HTTP client (:class:`ServiceClient`: one call per route), its TLS trust
(:func:`tls_verify`) and how failures are reported.

A service that cannot be reached, does not answer in time or refuses the
caller raises :class:`~encmatch.errors.Unavailable` (the command line
exits 3): connection refused, a host name that does not resolve, a TLS
failure (a certificate that does not verify: :class:`CertificateError`,
also an ``ssl.SSLCertVerificationError``), no answer within ``timeout``,
a bad or revoked token (``Unauthorized``), an overload that outlasts the
retries (``Busy``). A service that was never reached fails fast: a
refused connection is tried ``connect_retries`` more times within about
1.5 s, each retry reported to ``on_retry`` (the command line prints it),
then ``cannot reach the encmatch service at URL: connection refused``.
Once the service has answered, a dropped connection (a restart in the
middle of an upload) is retried ``retries`` times with a growing pause;
a ``busy`` answer is retried after the service's ``Retry-After``.

The token comes from the ``token`` argument or ``$ENCMATCH_TOKEN`` and
travels only in the ``Authorization`` header. Use ``https://`` for any
service that is not on this machine: a :class:`ServiceClient` warns
(:class:`~encmatch.service.transport.PlaintextTokenWarning`, once, when it
is made) before a token would go over ``http://`` to a host that is not
loopback. ``verify`` (default ``$ENCMATCH_CA_FILE``, else the system's
trust store) names the CA certificate (PEM) that signed a self-signed
deployment's certificate.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import socket
import ssl
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from .._util.extras import require

require("service", "httpx")
import httpx  # noqa: E402

from ..errors import Corrupt, EncmatchError, InvalidArgument, Unavailable
from ..results import check_bound
from .errors import Busy, Conflict, ShuttingDown, Unauthorized, error_from_response
from .transport import PlaintextTokenWarning, is_loopback_host

__all__ = ["ServiceClient", "tls_verify", "CertificateError", "TOKEN_ENV", "CA_FILE_ENV", "DEFAULT_CHUNK",
           "CONNECT_RETRIES", "CONNECT_TIMEOUT", "PlaintextTokenWarning", "sha256_file"]

#: Environment variable holding the bearer token when none is passed.
TOKEN_ENV = "ENCMATCH_TOKEN"
#: Environment variable naming a CA certificate file (PEM) to trust when ``verify`` is not given.
CA_FILE_ENV = "ENCMATCH_CA_FILE"
#: Upload chunk size (bytes); smaller when the service's body limit is smaller.
DEFAULT_CHUNK = 8 << 20
#: Further tries of a refused connection to a service not reached yet (pauses 0.5 s, then 1 s).
CONNECT_RETRIES = 2
#: Seconds to wait for a TCP (and TLS) connection to be made, at most (the ``timeout`` if smaller).
CONNECT_TIMEOUT = 10.0

log = logging.getLogger(__name__)


class CertificateError(Unavailable, ssl.SSLCertVerificationError):
    """The service's certificate does not verify (not retried): an :class:`~encmatch.errors.Unavailable`
    that is also the ``ssl.SSLCertVerificationError`` earlier versions raised."""

    kind = "unavailable"

PathLike = str | os.PathLike


def tls_verify(verify: bool | PathLike | ssl.SSLContext | None = None) -> bool | ssl.SSLContext:
    """What to verify a service's certificate against, as httpx takes it.

    ``None``: the CA file named by ``$ENCMATCH_CA_FILE`` if set, else the
    system's trust store; a path: that CA certificate file (PEM), e.g. the
    self-signed certificate of a deployment (NotFound if it does not exist);
    an ``SSLContext`` as given; ``False`` turns verification off (anyone on
    the path can then read the token: for experiments only).
    """
    if verify is None:
        verify = os.environ.get(CA_FILE_ENV) or True
    if isinstance(verify, (bool, ssl.SSLContext)):
        return verify
    path = Path(verify)
    if not path.is_file():
        from ..errors import NotFound

        raise NotFound(f"no CA certificate file {path}")
    try:
        return ssl.create_default_context(cafile=str(path))
    except (ssl.SSLError, ValueError) as exc:
        raise InvalidArgument(f"{path} is not a PEM CA certificate file: {exc}") from None


class ServiceClient:
    """HTTP calls of the service with a bearer token, retries and byte counters.

    A service that cannot be reached, does not answer in time or refuses
    the caller raises :class:`~encmatch.errors.Unavailable` (or one of its
    subclasses: ``Unauthorized``, ``Busy``, :class:`CertificateError`...);
    an unknown index raises :class:`~encmatch.errors.NotFound`.

    Retries. Until the service has answered once, a failed connection is
    tried ``connect_retries`` more times (pauses of 0.5 s, then 1 s), and
    not at all when trying again cannot help (a host name that does not
    resolve, a TLS failure, a connect timeout): a service that is down
    fails within seconds. Once it has answered, connection failures and
    ``busy``/``shutting_down`` answers are retried ``retries`` times with a
    growing pause (the service's ``Retry-After`` at least), so a restart
    in the middle of an upload is waited for; except where a retry could
    act twice (``safe_retry=False``: index creation is retried only when
    the connection failed before the request was sent). A request that got
    no answer within ``timeout`` is not retried. Every retry is reported as
    one line to ``on_retry`` (the command line prints it on stderr) and
    logged at INFO.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 600.0, retries: int = 8,
                 chunk_size: int = DEFAULT_CHUNK, verify: bool | PathLike | ssl.SSLContext | None = None,
                 connect_retries: int = CONNECT_RETRIES, connect_timeout: float = CONNECT_TIMEOUT,
                 on_retry: Callable[[str], None] | None = None, insecure_http: bool = False):
        """Talk to the service at ``url`` (``https://...``, or ``http://`` on loopback) with ``token``
        (default ``$ENCMATCH_TOKEN``); ``verify`` as :func:`tls_verify` takes it.

        ``timeout``: seconds to wait for an answer; ``connect_timeout``:
        for a connection (at most ``timeout``); ``retries`` and
        ``connect_retries`` as the class says; ``on_retry(line)`` is told
        of each retry. A bearer token is never sent over plain HTTP to a
        host that is not loopback (InvalidArgument) unless ``insecure_http``
        (``--insecure-http``), and then with a :class:`PlaintextTokenWarning`
        here, before any request; ``verify=False`` (no certificate check)
        warns the same way.
        """
        token = token or os.environ.get(TOKEN_ENV)
        if not token:
            raise InvalidArgument(f"a token is needed: pass one or set ${TOKEN_ENV}")
        if chunk_size < 1:
            raise InvalidArgument("chunk_size must be positive")
        if retries < 0 or connect_retries < 0 or not timeout > 0 or not connect_timeout > 0:
            raise InvalidArgument("retries and connect_retries must be >= 0, timeout and connect_timeout > 0")
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise InvalidArgument(f"{url!r} is not a service URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise InvalidArgument(f"{url!r} is not a service URL (https://host:port or http://127.0.0.1:port)")
        if parsed.query:
            raise InvalidArgument(f"the service URL carries a query ({parsed.scheme}://{parsed.host}/...?...): "
                                  "give the bare URL; tokens travel only in the Authorization header")
        self.url = url.rstrip("/")
        #: Whether a bearer token goes to a remote host over plain HTTP (warned about once, here).
        self.plaintext = parsed.scheme == "http" and not is_loopback_host(parsed.host)
        if self.plaintext:
            if not insecure_http:
                raise InvalidArgument(
                    f"refusing to send a bearer token over plain HTTP to {parsed.host}, which is not loopback: "
                    f"anyone on the path could read it and act as this tenant. Use https:// (encmatch serve "
                    f"--tls-cert/--tls-key), or insecure_http=True (--insecure-http) to send it anyway")
            warnings.warn(
                f"sending a bearer token over plain HTTP to {parsed.host}, which is not loopback: anyone on the "
                f"path can read it and act as this tenant; use https:// (encmatch serve --tls-cert/--tls-key)",
                PlaintextTokenWarning, stacklevel=2)
        if verify is False and parsed.scheme == "https":
            warnings.warn(
                f"certificate verification is OFF for {parsed.host}: anyone on the path can pose as the service "
                f"and read the bearer token; pass the service's CA certificate instead (verify=PATH, --ca-file)",
                PlaintextTokenWarning, stacklevel=2)
        self.retries = retries
        self.connect_retries = connect_retries
        self.timeout = float(timeout)
        self.connect_timeout = min(float(connect_timeout), self.timeout)
        #: Called with one line for every retry (``None``: only logged).
        self.on_retry = on_retry
        self.chunk_size = chunk_size
        self._http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
                                  verify=tls_verify(verify), headers={"Authorization": f"Bearer {token}"})
        #: Request body bytes sent so far.
        self.bytes_sent = 0
        #: Response body bytes received so far.
        self.bytes_received = 0
        self._max_body: int | None = None  # the service's body limit, asked once before the first upload
        self._reached = False  # whether the service has answered this client yet

    def _retry(self, line: str, wait: float) -> None:
        """Report one retry (``on_retry``, the log), then wait ``wait`` seconds."""
        log.info("%s", line)
        if self.on_retry is not None:
            self.on_retry(line)
        time.sleep(wait)

    def request(self, method: str, path: str, *, json_body: Any = None, content: bytes | None = None,
                params: dict | None = None, headers: dict | None = None, safe_retry: bool = True) -> httpx.Response:
        """Send one request (retrying as the class says); return the response, or raise the error it
        carries (:class:`~encmatch.errors.Unavailable` when the service cannot be reached or refuses)."""
        body = content
        hdrs = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        pause = 0.2  # the growing pause once the service has answered
        retried = 0
        t0 = time.monotonic()
        while True:
            budget = self.retries if self._reached else self.connect_retries
            wait = pause if self._reached else 0.5 * 2 ** retried
            try:
                resp = self._http.request(method, path, content=body, params=params, headers=hdrs)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent: always safe to retry
                reason, hopeful = _connect_failure(exc, self.url, self.connect_timeout)
                if not hopeful or retried >= budget:
                    tries = f" (tried {retried + 1} times in {time.monotonic() - t0:.1f} s)" if retried else ""
                    raise Unavailable(f"cannot reach the encmatch service at {self.url}: {reason}{tries}") from None
                retried += 1
                self._retry(f"service at {self.url} not reachable ({reason}); retrying in {wait:g} s "
                            f"({retried}/{budget})", wait)
                pause = min(pause * 2, 5.0) if self._reached else pause
                continue
            except httpx.TimeoutException:  # sent (or sending), no answer in time: trying again will not help
                raise Unavailable(f"the encmatch service at {self.url} did not answer {method} {path} within "
                                  f"{self.timeout:g} s") from None
            except httpx.TransportError as exc:  # the connection broke; the request may have been acted on
                reason = _describe_transport(exc)
                if safe_retry and retried < budget:
                    retried += 1
                    self._retry(f"connection to {self.url} lost ({reason}); retrying in {wait:g} s "
                                f"({retried}/{budget})", wait)
                    pause = min(pause * 2, 5.0) if self._reached else pause
                    continue
                if not self._reached:
                    msg = (f"cannot reach the encmatch service at {self.url}: {reason} (is it the right URL? "
                           f"an https:// service does not answer http://)")
                else:
                    msg = f"lost the connection to the encmatch service at {self.url} during {method} {path}: {reason}"
                if not safe_retry:
                    msg += " (it may have been acted on: look before trying again, e.g. `encmatch index list`)"
                raise Unavailable(msg) from None
            except httpx.RequestError as exc:  # too many redirects, an undecodable body...
                raise Unavailable(f"the answer of {self.url} to {method} {path} is not usable "
                                  f"({type(exc).__name__}: {exc}): is it an encmatch service?") from None
            self._reached = True
            self.bytes_sent += len(body or b"")
            self.bytes_received += len(resp.content)
            if resp.status_code < 400:
                _check_answer(resp, self.url)
                return resp
            err = _response_error(resp)
            if isinstance(err, (Busy, ShuttingDown)) and safe_retry and retried < self.retries:
                retried += 1
                wait = max(pause, _retry_after(resp))
                self._retry(f"service at {self.url} {err.kind.replace('_', ' ')} ({err}); retrying in {wait:g} s "
                            f"({retried}/{self.retries})", wait)
                pause = min(pause * 2, 5.0)
                continue
            raise _in_context(err, self.url, retried)

    # ---- routes --------------------------------------------------------------

    def health(self) -> dict:
        """``GET /v1/health``."""
        return self.request("GET", "/v1/health").json()

    def create_index(self, keys_meta: dict, label: str = "") -> dict:
        """``POST /v1/indexes``: a pending index for a key set; returns its status."""
        return self.request("POST", "/v1/indexes", json_body={"keys": keys_meta, "label": label},
                            safe_retry=False).json()

    def indexes(self) -> list[dict]:
        """``GET /v1/indexes``: the tenant's committed indexes."""
        return self.request("GET", "/v1/indexes").json()["indexes"]

    def index(self, index_id: str) -> dict:
        """``GET /v1/indexes/{id}``: the index's state."""
        return self.request("GET", f"/v1/indexes/{index_id}").json()

    def delete(self, index_id: str) -> None:
        """``DELETE /v1/indexes/{id}``."""
        self.request("DELETE", f"/v1/indexes/{index_id}")

    def manifest(self, index_id: str) -> dict:
        """``GET /v1/indexes/{id}/manifest``: the current generation's manifest."""
        return self.request("GET", f"/v1/indexes/{index_id}/manifest").json()

    def commit(self, index_id: str, manifest: dict, sealed: Sequence[str] = ()) -> dict:
        """``POST /v1/indexes/{id}/commit``: the index's next generation, with the uploaded
        ``sealed`` label files it adds; returns its state.

        The service refuses a commit that adds nothing (a replay, 409); when
        that refusal answers a retry of this very commit (the first attempt
        was acted on but its answer lost), the index's manifest is this
        commit's and the commit is reported done."""
        try:
            return self.request("POST", f"/v1/indexes/{index_id}/commit",
                                json_body={"manifest": manifest, "sealed": list(sealed)}).json()
        except Conflict as exc:
            if "adds nothing" in str(exc) and self.manifest(index_id) == manifest:
                return self.index(index_id)
            raise

    def download_group(self, index_id: str, name: str, dest: Path) -> int:
        """``GET /v1/indexes/{id}/groups/{name}``: one committed group file, streamed to ``dest`` and
        checked against the SHA-256 the service committed it with (Corrupt otherwise; nothing is left at
        ``dest`` then). Returns its size."""
        digest = hashlib.sha256()
        size = 0
        try:
            with self._http.stream("GET", f"/v1/indexes/{index_id}/groups/{name}") as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise _response_error(resp)
                want = resp.headers.get("x-sha256", "")
                with open(dest, "wb") as f:
                    for chunk in resp.iter_bytes(1 << 20):
                        f.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
        except httpx.RequestError as exc:
            dest.unlink(missing_ok=True)
            raise Unavailable(f"downloading {name} from {self.url} failed: {_describe_transport(exc)}") from None
        self.bytes_received += size
        if digest.hexdigest() != want:
            dest.unlink(missing_ok=True)
            raise Corrupt(f"{name} from {self.url} does not hash to the SHA-256 it was committed with")
        return size

    def sealed(self, index_id: str) -> list[dict]:
        """``GET /v1/indexes/{id}/sealed``: the committed sealed label files (``name``, ``size``, ``sha256``)."""
        return self.request("GET", f"/v1/indexes/{index_id}/sealed").json()["files"]

    def sealed_file(self, index_id: str, name: str, sha256: str | None = None) -> bytes:
        """``GET /v1/indexes/{id}/sealed/{name}``: a sealed label file's bytes (checked against ``sha256``)."""
        data = self.request("GET", f"/v1/indexes/{index_id}/sealed/{name}").content
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise Corrupt(f"sealed file {name}: the bytes received differ from the service's checksum")
        return data

    def search(self, index_id: str, query: bytes, mode: str, *, signed: bool = False,
               bound: int | None = None) -> tuple[bytes, dict]:
        """``POST /v1/indexes/{id}/search``: result bytes and the service's timings (seconds).

        The search runs at the index's own threshold; there is no other.
        ``signed``: the result comes back bound to its query and signed by
        the service, the input threshold decryptors share (the service must
        run with ``--signing-key``).
        """
        params: dict[str, Any] = {"mode": mode}
        if bound is not None:  # the payload mode's public bound on the matches (the service's default: 32)
            params["bound"] = str(check_bound(bound))
        if signed:
            params["signed"] = "true"
        resp = self.request("POST", f"/v1/indexes/{index_id}/search", content=bytes(query), params=params,
                            headers={"Content-Type": "application/octet-stream"})
        timings = {k: float(resp.headers.get(h, "nan")) for k, h in
                   (("queue_seconds", "X-Queue-Seconds"), ("search_seconds", "X-Search-Seconds"))}
        return resp.content, timings

    def upload_file(self, index_id: str, path: PathLike, name: str | None = None,
                    on_bytes: Callable[[int], None] | None = None) -> dict:
        """Upload one file (declare, then chunks from where the service's record ends); returns its status.

        Idempotent and resumable: a file the service already holds whole
        is not sent again; after a failure, calling again continues.
        """
        path = Path(path)
        name = name or path.name
        size = path.stat().st_size
        digest = sha256_file(path)
        status = self.request("PUT", f"/v1/indexes/{index_id}/files/{name}",
                              json_body={"size": size, "sha256": digest}).json()
        if self._max_body is None:
            self._max_body = int(self.health()["limits"]["max_body_bytes"])
        chunk_size = min(self.chunk_size, self._max_body)
        with open(path, "rb") as f:
            while not status["complete"]:
                offset = int(status["received"])
                f.seek(offset)
                chunk = f.read(chunk_size)
                try:
                    status = self.request(
                        "PATCH", f"/v1/indexes/{index_id}/files/{name}", content=chunk, params={"offset": offset},
                        headers={"X-Chunk-SHA256": hashlib.sha256(chunk).hexdigest(),
                                 "Content-Type": "application/octet-stream"},
                    ).json()
                except Conflict:  # our idea of the offset is stale (an earlier try was stored): ask
                    status = self.request("GET", f"/v1/indexes/{index_id}/files/{name}").json()
                    continue
                if on_bytes is not None:
                    on_bytes(int(status["received"]) - offset)
        return status

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> "ServiceClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _raise_if_certificate(exc: BaseException, url: str) -> None:
    """Raise :class:`CertificateError` (never retried) if ``exc`` was caused by a certificate that
    does not verify."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            raise CertificateError(
                f"the certificate of {url} does not verify ({cause.verify_message or cause}); for a self-signed "
                f"deployment pass its CA certificate: verify=PATH, ${CA_FILE_ENV} or --ca-file PATH") from None
        cause = cause.__cause__ or cause.__context__
    return None


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first."""
    out: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in out:
        out.append(cause)
        cause = cause.__cause__ or cause.__context__
    return out


def _connect_failure(exc: BaseException, url: str, connect_timeout: float) -> tuple[str, bool]:
    """Why a connection to the service at ``url`` could not be made, and whether trying again soon
    may help. Raises :class:`CertificateError` for a certificate that does not verify."""
    _raise_if_certificate(exc, url)
    if isinstance(exc, httpx.TimeoutException):
        return f"no connection within {connect_timeout:g} s", False
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLError):
            hint = " (is it an http:// service?)" if "WRONG_VERSION" in str(cause) else ""
            return f"TLS handshake failed: {cause.reason or cause}{hint}", False
        if isinstance(cause, socket.gaierror):
            host = httpx.URL(url).host
            return f"host name {host!r} not resolved ({cause.strerror or cause})", cause.errno == socket.EAI_AGAIN
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused", True
        if isinstance(cause, OSError) and cause.errno is not None:
            known = {errno.ENETUNREACH: "network unreachable", errno.EHOSTUNREACH: "no route to host",
                     errno.ETIMEDOUT: "connection timed out", errno.ECONNRESET: "connection reset"}
            return known.get(cause.errno, cause.strerror or str(cause)), True
    return _describe_transport(exc), True


def _describe_transport(exc: BaseException) -> str:
    """A short human description of an httpx transport failure."""
    text = str(exc).strip()
    if isinstance(exc, httpx.RemoteProtocolError) and "without sending" in text:
        return "the connection was closed without an answer"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_after(resp: httpx.Response) -> float:
    """The response's ``Retry-After`` in seconds (0 when absent or not a number of seconds)."""
    try:
        return max(0.0, float(resp.headers.get("Retry-After", "0") or 0))
    except ValueError:
        return 0.0


#: Content types the service answers with (a successful answer of any other is not the service's).
_SERVICE_TYPES = ("application/json", "application/octet-stream")


def _check_answer(resp: httpx.Response, url: str) -> None:
    """Raise :class:`~encmatch.errors.Unavailable` if a successful answer is not one the service gives
    (an HTML page of a web server at a wrong URL, say)."""
    ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype not in _SERVICE_TYPES:
        raise Unavailable(f"{url} answered {resp.request.method} {resp.request.url.path} with "
                          f"{ctype or 'no content type'}, not as an encmatch service does: is it the right URL?")


def _response_error(resp: httpx.Response) -> EncmatchError:
    """The exception an error response carries (an answer that is not the service's JSON error names
    the URL that gave it)."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if not (isinstance(body, dict) and "kind" in body):
        try:
            where = f"{resp.request.method} {resp.request.url}"
        except RuntimeError:  # a response made without a request
            where = "the request"
        text = resp.text[:200].strip()
        body = {"error": f"HTTP {resp.status_code} {resp.reason_phrase} to {where}, not an encmatch service's "
                         f"answer{': ' + text if text else ''}"}
    return error_from_response(resp.status_code, body)


def _in_context(err: EncmatchError, url: str, retried: int) -> EncmatchError:
    """``err`` (an error answer) with the context a user needs: which service refused the token, how
    long an overload lasted. Same class."""
    if isinstance(err, Unauthorized):
        return Unauthorized(f"the encmatch service at {url} refused the token ({err}): it may be mistyped, "
                            f"rotated or revoked; check ${TOKEN_ENV} or --token-file")
    if isinstance(err, (Busy, ShuttingDown)) and retried:
        return type(err)(f"the encmatch service at {url} is {err.kind.replace('_', ' ')}: {err} "
                         f"(gave up after {retried} retries)")
    return err


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
