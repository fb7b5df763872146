"""Uploads and commits: declare, inspect and append to a resumable file upload (key files and
gallery group files), and commit the uploaded groups as an index's next generation, loaded by the
core before anyone sees it."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from ...errors import EncmatchError
from ..errors import Forbidden
from ..http import read_body
from ..scheduler import Loaded, check_in_subprocess, open_generation
from ..state import ServiceState
from .deps import OCTETS, service_state, tenant_of
from .indexes import Strict

__all__ = ["router", "DeclareFile", "Commit"]

log = logging.getLogger("encmatch.service")

router = APIRouter(prefix="/v1/indexes/{index_id}")


class DeclareFile(Strict):
    """Body of ``PUT /v1/indexes/{id}/files/{name}``."""

    size: int = Field(description="bytes of the whole file")
    sha256: str = Field(description="hex SHA-256 of the whole file")


class Commit(Strict):
    """Body of ``POST /v1/indexes/{id}/commit``."""

    manifest: dict[str, Any] = Field(description="the enroller's manifest.json naming every group file")
    sealed: list[str] = Field([], max_length=100000,
                              description="uploaded sealed label files this commit adds (opaque to the service)")


@router.put("/files/{name}", summary="Declare (or resume) the upload of a file")
def declare_file(index_id: str, name: str, body: DeclareFile, tenant: str = Depends(tenant_of),
                 state: ServiceState = Depends(service_state)) -> dict:
    """Declare a file by size and SHA-256; idempotent, answers where to resume."""
    return state.storage.declare(tenant, index_id, name, body.size, body.sha256)


@router.get("/files/{name}", summary="Progress of an upload")
def file_status(index_id: str, name: str, tenant: str = Depends(tenant_of),
                state: ServiceState = Depends(service_state)) -> dict:
    """How much of a file is received (and whether it is complete or committed)."""
    return state.storage.upload_status(tenant, index_id, name)


@router.patch("/files/{name}", openapi_extra={"requestBody": OCTETS},
              summary="Append a chunk at `offset`; acknowledged once durable")
async def upload_chunk(request: Request, index_id: str, name: str,
                       offset: int = Query(..., ge=0, description="byte offset of the chunk in the file"),
                       tenant: str = Depends(tenant_of), state: ServiceState = Depends(service_state)) -> dict:
    """Append a chunk (header ``X-Chunk-SHA256``); answered once it is durable.

    The index, the declared upload, the offset and the chunk's
    Content-Length are checked before the body is read."""
    declared = request.headers.get("content-length")
    await run_in_threadpool(state.storage.check_chunk, tenant, index_id, name, offset,
                            int(declared) if declared and declared.isdigit() else None)
    data = await read_body(request, state.config.max_body_bytes)
    return await run_in_threadpool(state.storage.write_chunk, tenant, index_id, name, offset, data,
                                   request.headers.get("x-chunk-sha256"))


class _Refused(Exception):
    """A commit the core refused: its error, and what it blames (``uploads``: the new uploads;
    ``all``: those and the key files)."""

    def __init__(self, error: EncmatchError, blame: str):
        """``error`` from the core; ``blame`` what is deleted."""
        super().__init__(str(error))
        self.error = error
        self.blame = blame


def _load_commit(state: ServiceState, gen: Any, manifest: dict) -> Loaded:
    """Load a prepared generation; raise :class:`_Refused` with the core's error and what it blames.

    With ``isolate_commit_check`` a child process first loads the
    new groups with the index's key files, decoding every group record
    (also when ``memory_budget`` would stream them); only then does
    this process load the whole generation. A refusal blames the new uploads, and
    the key files too while no generation with entries has proven them
    (the core loads keys only with at least one group).
    """
    config = state.config
    groups = manifest.get("groups") or []
    new = set(gen.new_uploads)
    picked = [i for i, g in enumerate(groups) if g.get("file") in new]
    blame = "uploads" if state.storage.keys_proven(gen.tenant, gen.index_id) else "all"
    try:
        if config.isolate_commit_check and config.backend is None and picked:
            # no memory budget: a streamed index would not decode its groups at load, the child must
            check_in_subprocess(gen.path, gen.keys_dir, 0, picked)
        return open_generation(gen.path, gen.keys_dir, config.memory_budget, config.backend)
    except EncmatchError as exc:
        raise _Refused(exc, blame) from None


@router.post("/commit", summary="Make the uploaded groups the index's next generation")
def commit(index_id: str, body: Commit, tenant: str = Depends(tenant_of),
           state: ServiceState = Depends(service_state)) -> dict:
    """Load the manifest's groups as the next generation; visible only once the core has loaded it."""
    key = (tenant, index_id)
    storage = state.storage
    with storage.lock(tenant, index_id):
        meta = storage.keys_meta(tenant, index_id)
        if meta.get("insecure") and not state.config.allow_insecure:
            raise Forbidden(f"preset {meta['preset']!r} is INSECURE; this service refuses it")
        gen = storage.prepare_commit(tenant, index_id, body.manifest, body.sealed)
        try:
            entry = _load_commit(state, gen, body.manifest)
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
        state.scheduler.install(key, entry)  # closes the previous generation's handle after its search
        if gen.previous is not None:
            storage.remove_generation(tenant, index_id, gen.previous)
        state.unavailable.pop(key, None)
    return state.status_with_load(tenant, index_id)
