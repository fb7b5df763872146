"""The service's routes, one router per resource (all under ``/v1``): :mod:`health`, :mod:`indexes`
(create, list, inspect, delete, manifest, sealed label files, group files), :mod:`uploads` (resumable
file uploads, commits) and :mod:`search`. ``docs/SERVICE.md`` has the protocol."""

from __future__ import annotations

from . import health, indexes, search, uploads

__all__ = ["ROUTERS"]

#: Every router, in the order the application includes them.
ROUTERS = (health.router, indexes.router, uploads.router, search.router)
