"""What every route depends on: the running service's state and the tenant of the request's token."""

from __future__ import annotations

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..errors import Unauthorized
from ..state import ServiceState

__all__ = ["OCTETS", "service_state", "tenant_of"]

#: The OpenAPI description of a raw bytes body or answer.
OCTETS = {"content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}

_bearer = HTTPBearer(auto_error=False, description="a tenant token (encmatch tenant add)")


def service_state(request: Request) -> ServiceState:
    """The state of the service answering ``request``."""
    return request.app.state.service


def tenant_of(state: ServiceState = Depends(service_state),
              creds: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> str:
    """The tenant of the request's bearer token (401 without a valid one)."""
    tenant = state.tokens.authenticate(creds.credentials if creds else None)
    if tenant is None:
        raise Unauthorized("missing or unknown token (Authorization: Bearer <token>)")
    return tenant
