"""What one service instance holds while it runs (:class:`ServiceState`): its settings, the data
directory's storage, the tenants' tokens, the loaded indexes and their search queue, and the indexes
that could not be loaded. The application keeps it as ``app.state.service``; the routes reach it
through :func:`encmatch.service.routes.deps.service_state`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..params import version as core_version
from ..errors import EncmatchError
from .config import ServiceConfig
from .errors import Forbidden
from .scheduler import Scheduler, open_generation
from .storage import Storage
from .tenancy import TokenStore

__all__ = ["ServiceState"]

log = logging.getLogger("encmatch.service")


@dataclass
class ServiceState:
    """The state of one running service (see the module)."""

    #: The settings, every derived limit resolved.
    config: ServiceConfig
    #: The data directory: indexes, generations, uploads.
    storage: Storage
    #: The tenants and their hashed tokens.
    tokens: TokenStore
    #: The loaded indexes and the bounded search queue.
    scheduler: Scheduler
    #: ``(tenant, index id)`` -> why that committed index is not served.
    unavailable: dict[tuple[str, str], str] = field(default_factory=dict)
    #: The core library's version description (``/v1/health``).
    core: dict = field(default_factory=dict)

    @classmethod
    def open(cls, config: ServiceConfig) -> "ServiceState":
        """The state over ``config.data_dir`` (nothing is loaded until :meth:`load_all`)."""
        config = config.resolved()
        storage = Storage(config.data_dir, allow_insecure=config.allow_insecure,
                          max_file_bytes=config.max_file_bytes, quotas=config.quotas)
        scheduler = Scheduler(max_pending=config.max_pending, workers=config.workers,
                              query_timeout=config.query_timeout)
        return cls(config, storage, TokenStore(config.data_dir), scheduler, core=core_version())

    def load_all(self) -> None:
        """Load every committed index (after crash recovery); one that cannot load is reported, not served."""
        report = self.storage.recover()
        if report["removed"] or report["truncated"]:
            log.warning("recovered the data directory: %s", report)
        for key in self.storage.committed():
            try:
                meta = self.storage.keys_meta(*key)
                if meta.get("insecure") and not self.config.allow_insecure:
                    raise Forbidden(f"preset {meta['preset']!r} is INSECURE; start with --allow-insecure to serve it")
                generation, gen_dir, keys_dir = self.storage.current(*key)  # type: ignore[misc]
                entry = open_generation(gen_dir, keys_dir, self.config.memory_budget, self.config.backend)
                entry.generation = generation
                self.scheduler.install(key, entry)
                log.info("loaded index %s/%s: generation %d, %d entries", key[0], key[1], generation, entry.count)
            except EncmatchError as exc:
                self.unavailable[key] = str(exc)
                log.error("index %s/%s is not served: %s", key[0], key[1], exc)

    def status_with_load(self, tenant: str, index_id: str) -> dict:
        """An index's stored status plus whether it is loaded (and why not)."""
        out = self.storage.status(tenant, index_id)
        out["loaded"] = self.scheduler.loaded((tenant, index_id)) is not None
        if (tenant, index_id) in self.unavailable:
            out["unavailable"] = self.unavailable[(tenant, index_id)]
        return out
