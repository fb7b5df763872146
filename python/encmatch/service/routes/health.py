"""``GET /v1/health``: liveness, versions, queue, load and limits, for anyone (no token)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ... import __version__
from ..admission import Admission

__all__ = ["router"]

router = APIRouter(prefix="/v1")


def _admission(request: Request) -> Admission | None:
    """The admission middleware of the built middleware stack (``None`` before the first request)."""
    layer = request.app.middleware_stack
    while layer is not None and not isinstance(layer, Admission):
        layer = getattr(layer, "app", None)
    return layer


@router.get("/health", summary="Liveness, queue and load (no token needed; answers under load)")
async def health(request: Request) -> dict:
    """Liveness, versions, queue state, load and limits; needs no token, runs in the event loop
    (no thread) and passes every admission bound, so it answers while the service is saturated."""
    state = request.app.state.service
    config = state.config
    stats = state.scheduler.stats()
    adm = _admission(request)
    load = dict(adm.stats() if adm is not None else {}, index_locks=state.storage.lock_count())
    return {"status": "shutting_down" if stats["closing"] else "ok", "version": __version__,
            "core": state.core, "queue": stats, "load": load, "insecure_allowed": config.allow_insecure,
            "limits": {"max_body_bytes": config.max_body_bytes, "max_file_bytes": config.max_file_bytes,
                       "max_queue": config.max_pending, "query_timeout": config.query_timeout,
                       "max_requests": config.max_requests, "max_tenant_requests": config.max_tenant_requests,
                       "max_body_inflight": config.max_body_inflight,
                       "max_tenant_body_inflight": config.max_tenant_body_inflight,
                       "body_timeout": config.body_timeout}}
