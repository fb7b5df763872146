"""The index resource: create, list, inspect and delete a tenant's indexes, and read what an
enroller appends to (the manifest, the sealed label files, a committed group file)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ..state import ServiceState
from .deps import OCTETS, service_state, tenant_of

__all__ = ["router", "Strict", "CreateIndex"]

router = APIRouter(prefix="/v1/indexes")


class Strict(BaseModel):
    """A request body whose fields keep their JSON types: no ``true`` taken as 1, no ``"12"`` as 12."""

    model_config = ConfigDict(strict=True, extra="forbid")


class CreateIndex(Strict):
    """Body of ``POST /v1/indexes``."""

    keys: dict[str, Any] = Field(description="the key set's server/keys.json")
    label: str = Field("", max_length=200, description="a name for people; not unique")


@router.post("", status_code=201, summary="Create a pending index from a key set's keys.json")
def create_index(body: CreateIndex, tenant: str = Depends(tenant_of),
                 state: ServiceState = Depends(service_state)) -> dict:
    """Create a pending index bound to a key set; its key files are then uploaded like any file."""
    return dict(state.storage.create_index(tenant, body.keys, body.label), loaded=False)


@router.get("", summary="The tenant's committed indexes")
def list_indexes(tenant: str = Depends(tenant_of), state: ServiceState = Depends(service_state)) -> dict:
    """The committed indexes of the token's tenant."""
    return {"indexes": [dict(s, loaded=state.scheduler.loaded((tenant, s["id"])) is not None)
                        for s in state.storage.list(tenant)]}


@router.get("/{index_id}", summary="State of an index (pending or ready), entries, uploads")
def get_index(index_id: str, tenant: str = Depends(tenant_of), state: ServiceState = Depends(service_state)) -> dict:
    """State of one index: pending or ready, generation, entries, parameters, uploads in progress."""
    return state.status_with_load(tenant, index_id)


@router.delete("/{index_id}", summary="Delete an index and its files")
def delete_index(index_id: str, tenant: str = Depends(tenant_of),
                 state: ServiceState = Depends(service_state)) -> dict:
    """Delete an index (after its running search); its queued searches fail as not found."""
    with state.storage.lock(tenant, index_id):
        state.storage.status(tenant, index_id)  # NotFound for another tenant's id
        state.scheduler.remove((tenant, index_id))
        state.storage.delete(tenant, index_id)
    state.unavailable.pop((tenant, index_id), None)
    return {"deleted": index_id}


@router.get("/{index_id}/manifest", summary="The manifest of the current generation")
def get_manifest(index_id: str, tenant: str = Depends(tenant_of), state: ServiceState = Depends(service_state)) -> dict:
    """The current generation's manifest: what an enroller appends to."""
    return state.storage.manifest(tenant, index_id)


@router.get("/{index_id}/sealed", summary="The committed sealed label files (opaque)")
def list_sealed(index_id: str, tenant: str = Depends(tenant_of), state: ServiceState = Depends(service_state)) -> dict:
    """Names, sizes and SHA-256 of the sealed label files of the current generation."""
    return {"files": state.storage.sealed(tenant, index_id)}


@router.get("/{index_id}/sealed/{name}", response_class=Response, responses={200: OCTETS},
            summary="One sealed label file's bytes, as uploaded")
def get_sealed(index_id: str, name: str, tenant: str = Depends(tenant_of),
               state: ServiceState = Depends(service_state)) -> Response:
    """The bytes of one committed sealed label file (only the key holder can open them)."""
    return Response(state.storage.sealed_bytes(tenant, index_id, name), media_type="application/octet-stream")


@router.get("/{index_id}/groups/{name}", response_class=FileResponse, responses={200: OCTETS},
            summary="One committed group file's bytes (header X-SHA256)")
def get_group(index_id: str, name: str, tenant: str = Depends(tenant_of),
              state: ServiceState = Depends(service_state)) -> FileResponse:
    """A group file of the current generation, as committed: what an enroller fills the last,
    partial group from (ciphertexts only)."""
    path, sha = state.storage.group_file(tenant, index_id, name)
    return FileResponse(path, media_type="application/octet-stream", headers={"X-SHA256": sha})
