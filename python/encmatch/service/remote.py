"""The remote SDK: :class:`RemoteIndex`, the local index's ``add`` and ``search`` over HTTP, on a
:class:`~encmatch.service.client.ServiceClient`.

The key holder keeps its key directory (secret key included) and talks to
a service that holds only evaluation keys and ciphertexts::

    index = RemoteIndex.create("http://127.0.0.1:8470", token, keys="keys", delta=0.541)
    index.add(gallery, labels=names)       # encrypted here, labels sealed here, uploaded, committed
    hits = index.search(probes, mode="identification")
    same = RemoteIndex("http://127.0.0.1:8470", token, index.id, keys="keys")
    far = RemoteIndex("https://host:8470", None, index.id, keys="keys", verify="ca.pem")  # $ENCMATCH_TOKEN

Enrollment runs the ordinary :class:`~encmatch.Enroller` into a local
staging directory that holds the service's current manifest, then uploads
the new group files in checksummed chunks (resuming where the service's
record ends after a dropped connection or a service restart) and commits
the new manifest (as the key owner: seeded encryption under the secret
key, as ``EncryptedIndex.add``). Labels are sealed here under the key
set's public label key (:mod:`encmatch.labels`) and uploaded as opaque
files beside the groups: the service stores them, never reads them, and
hands them back to the key holder, who opens them and joins them to the
decrypted positions; :func:`create_index` and :func:`enroll`
do the same with only a key set's ``server/`` keys, for an enroller that
never holds the secret key. Searches encrypt locally, send the query bytes
(:class:`RemoteBackend`, the service as a
:class:`~encmatch.server.SearchBackend`) and decrypt the answer locally.
Errors arrive as the same exception classes as locally
(:mod:`encmatch.errors`, :mod:`encmatch.service.errors`); connection
failures and TLS are :mod:`~encmatch.service.client`'s.
"""

from __future__ import annotations

import dataclasses
import json
import ssl
import tempfile
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import _core, labels as labels_mod
from .._util.journal import RemoteJournal, batch_digest
from .._util.paths import PathLike
from .._util.progress import progress as progress_bar
from ..enroller import Enroller, EnrollSummary
from ..errors import Mismatch
from ..keyholder import Client
from ..manifest import Manifest
from ..params import check_delta, check_payload_width, check_rule
from ..results import PAYLOAD, PayloadResult, Result, check_search, make_result, require_complete
from .client import DEFAULT_CHUNK, ServiceClient

__all__ = ["RemoteIndex", "RemoteBackend", "create_index", "enroll", "remote_labels", "AlreadyEnrolledWarning"]



def _open_client(keys: PathLike | Client) -> tuple[Client, bool]:
    """``(client, owned)``: an open :class:`Client` for a key directory (owned) or the given one."""
    if isinstance(keys, Client):
        return keys, False
    return Client(keys), True


class RemoteBackend:
    """One index of a service as a :class:`~encmatch.server.SearchBackend`: framed query bytes in,
    encrypted result bytes out, over HTTP. The service holds the index and the evaluation keys; this
    object holds only the connection."""

    #: Groups are the service's business: never streamed on this side.
    streamed = False

    def __init__(self, service: ServiceClient, index_id: str, manifest: dict):
        """The index ``index_id`` of ``service``, whose current manifest is ``manifest``."""
        self.service = service
        self.index_id = index_id
        #: The index's manifest (as last read from the service).
        self.manifest = manifest
        #: The service's timings of the last search (queue and search seconds, generation).
        self.last_search: dict = {}

    def search(self, query: bytes, mode: str = "identification", *, bound: int | None = None) -> bytes:
        """Send one framed query; returns the encrypted result bytes."""
        result, self.last_search = self.service.search(self.index_id, query, mode, bound=bound)
        return result

    def close(self) -> None:
        """Nothing to release (the connection is the :class:`ServiceClient`'s)."""


class RemoteIndex:
    """An encrypted index held by an encmatch service, searched like :class:`~encmatch.EncryptedIndex`.

    ``RemoteIndex(url, token, index_id, keys)`` opens an existing index
    (``token`` ``None``: ``$ENCMATCH_TOKEN``); :meth:`create` makes one.
    ``url`` is ``https://host:port`` (``verify=`` the CA file of a
    self-signed certificate) or, on this machine only, ``http://127.0.0.1:port``.
    ``keys`` is the key holder's key directory (or an open
    :class:`~encmatch.Client`); its secret key never leaves this process.
    """

    def __init__(self, url: str, token: str | None, index_id: str, keys: PathLike | Client, *,
                 timeout: float = 600.0, retries: int = 8, chunk_size: int = DEFAULT_CHUNK,
                 verify: bool | PathLike | ssl.SSLContext | None = None, insecure_http: bool = False):
        """Open index ``index_id`` of the token's tenant (NotFound if it is not one of them).

        ``verify``: the CA certificate file (PEM) of an ``https://`` service
        with a self-signed certificate (see :func:`tls_verify`);
        ``insecure_http`` as :class:`ServiceClient` takes it.
        """
        self.id = index_id
        self.service = ServiceClient(url, token, timeout=timeout, retries=retries, chunk_size=chunk_size,
                                     verify=verify, insecure_http=insecure_http)
        try:
            self.client, self._own_client = _open_client(keys)
        except BaseException:
            self.service.close()
            raise
        self._manifest: dict | None = None
        #: The service's timings of the last search (``queue_seconds``, ``search_seconds``).
        self.last_search: dict = {}
        try:
            status = self.service.index(index_id)
            if status["key_id"] != self.client.key_id:
                raise Mismatch(f"index {index_id} was made for key set {status['key_id']}, "
                               f"these keys are {self.client.key_id}")
        except BaseException:
            self.close()
            raise

    @classmethod
    def create(cls, url: str, token: str | None, keys: PathLike | Client, delta: float, *, label: str = "",
               progress: bool | None = None, payload_width: int = 0, rule: str | None = None,
               **kwargs: Any) -> "RemoteIndex":
        """Create an empty index on the service for the key set ``keys`` with threshold ``delta``.

        ``delta`` (required, a cosine similarity in the open interval
        (-1, 1), refused before anything is sent) is fixed for good: the
        service refuses a commit that changes it and a search that names
        another.

        Uploads the evaluation keys the service needs (relinearization and
        rotation keys: not the public key, never the secret key) and
        commits an empty manifest. ``payload_width`` and ``rule`` are the
        index's, as in :meth:`encmatch.Enroller.create_index` (a width above
        0 needs a payload key set). ``kwargs`` go to the constructor.
        """
        delta = check_delta(delta)
        client, owned = _open_client(keys)
        try:
            with ServiceClient(url, token, **kwargs) as service:
                index_id = create_index(service, client.server_key_dir, delta, label=label, progress=progress,
                                        payload_width=payload_width, rule=rule)
            index = cls(url, token, index_id, client, **kwargs)
        except BaseException:
            if owned:
                client.close()
            raise
        index._own_client = owned  # the new index closes the key set it was handed by path
        return index

    # ---- properties --------------------------------------------------------------

    @property
    def manifest(self) -> dict:
        """The service's manifest of the index (fetched once, refreshed by :meth:`add` and :meth:`refresh`)."""
        if self._manifest is None:
            self._manifest = self.service.manifest(self.id)
        return self._manifest

    def refresh(self) -> None:
        """Forget the cached manifest (another enroller may have added to the index)."""
        self._manifest = None

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self.client.dim

    @property
    def delta(self) -> float:
        """Match threshold (cosine similarity)."""
        return Manifest.of(self.manifest).delta

    @property
    def labels(self) -> list[str] | None:
        """Labels of every position (``""`` where none was given), or ``None`` if nothing is labelled.

        The service's sealed copies are fetched and opened here with the
        key holder's label key; a tampered or foreign file raises.
        """
        return remote_labels(self.service, self.id, self.client, self.manifest)

    def __len__(self) -> int:
        """Number of enrolled vectors."""
        return Manifest.of(self.manifest).total

    def info(self) -> dict:
        """The service's state of the index (``state``, ``generation``, ``count``, ``loaded``...)."""
        return self.service.index(self.id)

    # ---- operations ----------------------------------------------------------------

    def add(self, vectors: Any, labels: Sequence[Any] | None = None, payloads: Any = None, *,
            progress: bool | None = None) -> EnrollSummary:
        """Encrypt ``vectors`` here (``[n, dim]``; with their ``payloads`` for an index with payloads) as the
        key owner, upload the new groups and commit them.

        Returns the :class:`~encmatch.EnrollSummary`, with ``uploaded_bytes`` (see :func:`enroll`).
        """
        owner = Enroller(self.client.server_key_dir, owner_key_dir=self.client.key_dir)
        summary = enroll(self.service, self.id, owner, vectors, labels, progress=progress, payloads=payloads)
        self._manifest = summary.manifest
        return summary

    def search(self, queries: Any, mode: str = "identification", *,
               progress: bool | None = None, bound: int | None = None, strict: bool = True) -> Result | list[Result]:
        """Search one query (``[dim]``: one result) or several (``[q, dim]``: a list), as
        :meth:`EncryptedIndex.search <encmatch.EncryptedIndex.search>` does (``bound`` and ``strict``:
        the payload mode's)."""
        bound = check_search(mode, bound)
        single = np.ndim(queries) == 1
        qs = _core.as_matrix(queries, self.dim, "queries")
        if len(self) == 0:
            width = int(self.manifest.get("payload_width") or 0)
            out = [PayloadResult(count=0, positions=np.zeros(0, np.int64), payloads=np.zeros((0, width), np.int16),
                                 bound=bound, width=width) if mode == PAYLOAD else
                   make_result(mode, count=0, positions=[]) for _ in qs]
            return out[0] if single else out
        labels = self.labels
        backend = RemoteBackend(self.service, self.id, self.manifest)
        out = []
        show = progress if progress is not None else len(qs) > 8
        for i, q in enumerate(progress_bar(qs, desc=mode, unit="query", show=bool(show))):
            result = backend.search(self.client.encrypt_query(q), mode, bound=bound)
            self.last_search = backend.last_search
            res = self.client.decrypt(result, delta=self.delta, labels=labels)
            if strict:
                require_complete(res, None if single else i)
            out.append(res)
        return out[0] if single else out

    def delete(self) -> None:
        """Delete the index on the service."""
        self.service.delete(self.id)

    def close(self) -> None:
        """Close the connection and (when this object opened it) the key set."""
        try:
            self.service.close()
        finally:
            if self._own_client:
                self.client.close()

    def __enter__(self) -> "RemoteIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteIndex({self.service.url!r}, id={self.id!r}, dim={self.dim})"


def create_index(service: ServiceClient, server_key_dir: PathLike, delta: float, *, label: str = "",
                 progress: bool | None = None, payload_width: int = 0, rule: str | None = None) -> str:
    """Create an empty index on the service for the key set whose evaluation keys are in ``server_key_dir``.

    Uploads the keys the service needs (relinearization and rotation
    keys: not the public key, never the secret key) and commits an empty
    manifest with threshold ``delta``. Needs only the ``server/`` keys, so
    an enroller without the secret key can do it. Returns the index id.
    """
    delta = check_delta(delta)  # before anything reaches the service
    payload_width, rule = check_payload_width(payload_width), check_rule(rule)
    server_keys = Path(server_key_dir)
    meta = json.loads((server_keys / "keys.json").read_text())
    status = service.create_index(meta, label)
    index_id = status["id"]
    _upload_all(service, index_id, [server_keys / n for n in status["missing_key_files"]], "keys", progress)
    with tempfile.TemporaryDirectory(prefix="encmatch-remote-") as tmp:
        Enroller(server_keys).create_index(Path(tmp) / "index", delta, payload_width=payload_width, rule=rule)
        service.commit(index_id, json.loads((Path(tmp) / "index" / "manifest.json").read_text()))
    return index_id


def enroll(service: ServiceClient, index_id: str, enroller: Enroller, vectors: Any,
           labels: Sequence[Any] | None = None, *, progress: bool | None = None,
           payloads: Any = None) -> EnrollSummary:
    """Encrypt ``vectors`` here with ``enroller``, upload the new groups, commit.

    ``enroller`` is an :class:`~encmatch.Enroller`: with only the public
    key (any enroller), or the key owner's (``owner_key_dir``: seeded
    encryption under the secret key, half the bytes to upload). It writes
    into a staging directory that holds the service's current manifest, so
    the new groups continue its positions; only they are uploaded. The
    service makes the new entries visible all at once, after it has loaded
    them. Returns the :class:`~encmatch.EnrollSummary` with ``uploaded_bytes``,
    ``downloaded_bytes`` and the new ``manifest``.

    When the index's last group has room, its file is downloaded into the
    staging directory first and filled there (the core adds the new
    entries' encryption to its diagonals and writes the group whole, to
    its next file name, as a local enrollment does); the commit replaces it,
    so small appends do not cost a group each. The enrollment is journalled
    on this side (:class:`~encmatch._util.journal.RemoteJournal`): a rerun of the
    same vectors adds nothing.
    """
    manifest = service.manifest(index_id)
    old = {g["file"] for g in manifest.get("groups", [])}
    journal = RemoteJournal.open(service.url, index_id, manifest)
    digest = _batch_digest(vectors, labels, payloads)
    if (prior := journal.done(digest)) is not None:
        span = (prior.groups[0]["start"], prior.groups[-1]["start"] + prior.groups[-1]["count"]) if prior.groups else (0, 0)
        note = (f"these vectors were enrolled in index {index_id} before (positions {span[0]} to {span[1] - 1}, "
                f"journal {journal.path}): nothing added")
        warnings.warn(AlreadyEnrolledWarning(note), stacklevel=2)
        return EnrollSummary(added=0, total=Manifest.of(manifest).total, manifest=manifest, warnings=(note,),
                             already_enrolled=True)
    with tempfile.TemporaryDirectory(prefix="encmatch-remote-") as tmp:
        stage = Path(tmp) / "index"
        stage.mkdir()
        (stage / "manifest.json").write_text(json.dumps(manifest))
        groups = manifest.get("groups") or []
        slots = int((manifest.get("params") or {}).get("group_size") or 0)
        fill = bool(groups) and 0 < int(groups[-1].get("count", 0)) < slots
        downloaded = service.download_group(index_id, groups[-1]["file"], stage / groups[-1]["file"]) if fill else 0
        summary = enroller.enroll(stage, vectors, labels, progress=progress, fill=fill, payloads=payloads)
        new_manifest = json.loads((stage / "manifest.json").read_text())
        files = [stage / g["file"] for g in new_manifest["groups"] if g["file"] not in old]  # filled and new
        sealed = sorted((stage / labels_mod.LABELS_DIR).glob("*.sealed"))  # this enrollment's only
        sent = _upload_all(service, index_id, files + sealed, "upload", progress)
        batch = journal.begin(digest, [g for g in new_manifest["groups"] if g["file"] not in old])
        service.commit(index_id, new_manifest, [p.name for p in sealed])
        journal.finish(batch)
    return dataclasses.replace(summary, uploaded_bytes=sent, downloaded_bytes=downloaded, manifest=new_manifest)


class AlreadyEnrolledWarning(UserWarning):
    """An enrollment through the service found the same vectors committed by an earlier run (its journal)."""


def _batch_digest(vectors: Any, labels: Sequence[Any] | None, payloads: Any) -> str:
    """The journal's digest of one enrollment's content (as given: vectors, labels, payloads)."""
    v = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    p = None if payloads is None else np.atleast_2d(np.asarray(payloads)).astype("<i2")
    return batch_digest(v, None if labels is None else [str(x) for x in labels], p)


def remote_labels(service: ServiceClient, index_id: str, client: Client, manifest: dict | None = None) -> list[str] | None:
    """Labels of every position of a remote index, from the service's sealed files opened with ``client``'s label key.

    ``None`` when the index has no sealed labels. Each file is checked
    against the service's SHA-256, then opened (AEAD: another index's,
    range's or tampered bytes raise).
    """
    if manifest is None:
        manifest = service.manifest(index_id)
    listed = service.sealed(index_id)
    files = {f["name"]: (lambda f=f: service.sealed_file(index_id, f["name"], f["sha256"])) for f in listed}
    return client.open_labels(manifest, files)


def _upload_all(service: ServiceClient, index_id: str, files: list[Path], desc: str,
                progress: bool | None) -> int:
    """Upload ``files`` to index ``index_id`` with one progress bar; returns their total size."""
    total = sum(p.stat().st_size for p in files)
    show = progress if progress is not None else total > (64 << 20)
    with progress_bar(total=total, unit="B", unit_scale=True, desc=desc, show=bool(show)) as bar:
        for p in files:
            service.upload_file(index_id, p, on_bytes=bar.update)
    return total
