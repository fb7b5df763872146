"""encmatch as a service: an HTTP server for encrypted galleries and queries, and its remote SDK.

In deployment the key holder, the enroller and the server are different
machines (papers/000, Fig. 2). This package is the server and the
network between them:

- :mod:`~encmatch.service.app` - the FastAPI application and ``encmatch serve``, assembled from
  :mod:`~encmatch.service.config` (settings), :mod:`~encmatch.service.state` (what it holds while it
  runs), :mod:`~encmatch.service.admission` (limits in front of every route) and
  :mod:`~encmatch.service.routes` (one router per resource: health, indexes, uploads, search);
- :mod:`~encmatch.service.storage` - durable on-disk indexes, resumable uploads, atomic commits, under the
  rules of :mod:`~encmatch.service.policy` (file names, key metadata, file kinds, append-only manifests);
- :mod:`~encmatch.service.tenancy` - tenants and their (hashed) bearer tokens;
- :mod:`~encmatch.service.scheduler` - loaded indexes and the bounded search queue;
- :mod:`~encmatch.service.remote` - :class:`RemoteIndex` and :class:`RemoteBackend` (a service's index as a
  :class:`~encmatch.server.SearchBackend`);
- :mod:`~encmatch.service.client` - :class:`ServiceClient` (one call per route), TLS trust, connection failures;
- :mod:`~encmatch.service.transport` - TLS and token hygiene: the listen check, URL tokens refused, log redaction;
- :mod:`~encmatch.service.frames` - the core's frame header, read in Python;
- :mod:`~encmatch.service.errors` - the service's error kinds and HTTP statuses;
- :mod:`~encmatch.cli.service` - the command-line subcommands;
- :mod:`~encmatch.service.measure` - a server process helper, the load test and the overhead measurement.

``docs/SERVICE.md`` describes the HTTP API and the measured figures.
Importing this package does not import the web framework (only
:mod:`~encmatch.service.app` does).
"""

from .errors import Busy, Conflict, Forbidden, ServiceError, ShuttingDown, Timeout, TooLarge, Unauthorized
from .client import ServiceClient
from .remote import RemoteBackend, RemoteIndex
from .transport import PlaintextTokenWarning

__all__ = [
    "RemoteIndex",
    "RemoteBackend",
    "ServiceClient",
    "PlaintextTokenWarning",
    "ServiceError",
    "Unauthorized",
    "Forbidden",
    "Conflict",
    "TooLarge",
    "Busy",
    "Timeout",
    "ShuttingDown",
]
