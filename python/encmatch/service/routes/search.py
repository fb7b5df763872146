"""The search resource: an encrypted query in, an encrypted result out, at the index's own threshold,
behind the bounded queue. The query is checked (size, frame header, key set) before it is read whole
and before it is queued."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ...errors import Corrupt, InvalidArgument, Mismatch
from ...results import SEARCH_MODES, check_bound
from ..errors import Conflict, TooLarge
from ..frames import FrameError, parse_header
from ..http import read_body, read_prefix
from ..scheduler import Loaded
from ..state import ServiceState
from .deps import OCTETS, service_state, tenant_of

__all__ = ["router", "check_delta", "check_header", "check_query"]

router = APIRouter()


@router.post("/v1/indexes/{index_id}/search", openapi_extra={"requestBody": OCTETS},
             response_class=Response, responses={200: OCTETS},
             summary="Encrypted search: query bytes in, encrypted result bytes out")
async def search(request: Request, index_id: str,
                 mode: str = Query("identification", description=" or ".join(SEARCH_MODES)),
                 bound: int | None = Query(None, description="payload mode only: the public bound on the number "
                                           "of matches, 1 to 4096 (default 32); the result's size depends only on it"),
                 delta: str | None = Query(None, description="refused unless it is the index's own threshold: "
                                           "a search cannot choose one (docs/LEAKAGE.md)"),
                 signed: bool = Query(False, description="answer with the result bound to its query and signed "
                                      "with the service's key, for threshold decryptors (docs/THRESHOLD.md)"),
                 tenant: str = Depends(tenant_of), state: ServiceState = Depends(service_state)) -> Response:
    """Run an encrypted search behind the bounded queue; the body is the query, the answer the result."""
    if mode not in SEARCH_MODES:
        raise InvalidArgument(f"unknown mode {mode!r}; expected one of {', '.join(SEARCH_MODES)}")
    if bound is not None:
        if mode != "payload":
            raise InvalidArgument(f"bound is the payload mode's, not the {mode} mode's")
        bound = check_bound(bound)
    if signed and state.config.signing_key is None:
        raise InvalidArgument("this service signs no searches: start it with --signing-key (docs/THRESHOLD.md)")
    key = (tenant, index_id)
    entry = state.scheduler.loaded(key)
    if entry is None:
        status = await run_in_threadpool(state.status_with_load, tenant, index_id)  # NotFound if not the tenant's
        if status["state"] == "pending":
            raise Conflict(f"index {index_id} is not committed yet")
        raise Conflict(f"index {index_id} is not served: {status.get('unavailable', 'not loaded')}")
    check_delta(delta, entry)
    if entry.server is None:
        raise Conflict(f"index {index_id!r} is empty")
    lo, hi = entry.query_bytes
    cap = min(hi, state.config.max_body_bytes) if hi else state.config.max_body_bytes
    declared = request.headers.get("content-length")
    length = int(declared) if declared and declared.isdigit() else None
    if length is not None and not lo <= length <= cap:
        # not the size of a query for this index: the header says what it is, the body is not read
        head = await read_prefix(request, min(length, 1024))
        check_header(head, entry, what="query")
        raise (Corrupt(f"query: {length} bytes; a query for this index has {lo} to {hi}")
               if length < lo else TooLarge(f"query: {length} bytes; a query for this index has at most {hi}"))
    state.scheduler.refuse_if_full()
    query = await read_body(request, cap)
    check_query(query, entry)
    result, info = await state.scheduler.search(key, query, mode, state.config.signing_key if signed else None, bound=bound)
    headers = {"X-Queue-Seconds": f"{info['queue_seconds']:.6f}",
               "X-Search-Seconds": f"{info['search_seconds']:.6f}",
               "X-Generation": str(info["generation"])}
    return Response(result, media_type="application/octet-stream", headers=headers)


def check_delta(delta: str | None, entry: Loaded) -> None:
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


def check_header(head: bytes, entry: Loaded, what: str) -> None:
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


def check_query(query: bytes, entry: Loaded) -> None:
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
