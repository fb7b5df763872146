"""The enroller (:class:`Enroller`): encrypts gallery vectors (and their payloads) under the public key,
or as the key owner, into an index directory; labels are sealed for the key holder.
"""

from __future__ import annotations

import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from . import _core, labels as labels_mod
from ._util.journal import Journal, batch_digest
from ._util.paths import PathLike, require_dir
from ._util.progress import progress as progress_bar
from ._util.text import forbidden_char
from .errors import InvalidArgument, PayloadBandWarning
from .manifest import Manifest, index_info
from .params import check_delta, check_payload_width, check_rule

__all__ = ["Enroller", "EnrollSummary", "GroupWrite", "check_labels"]


@dataclass(frozen=True)
class GroupWrite:
    """One group file an enrollment wrote: a ``filled`` last group (rewritten whole) or a new one."""

    group: int  #: the group's number in the index
    filled: bool  #: True: the index's last group, filled and rewritten; False: a new group
    added: int  #: entries this enrollment put in it
    count: int  #: entries it holds now
    bytes: int  #: size of the file written (a filled group counts whole)
    seeded: bool  #: written by the key owner (seeded halves)

    @classmethod
    def of(cls, w: dict) -> GroupWrite:
        """A core ``group_writes`` record as a :class:`GroupWrite`."""
        return cls(group=int(w["group"]), filled=bool(w.get("filled")), added=int(w.get("added", 0)),
                   count=int(w.get("count", 0)), bytes=int(w.get("bytes", 0)), seeded=bool(w.get("seeded")))

    def describe(self, slots: int) -> str:
        """``"filled group 0 (3 entries, now 243 of 16,384)"`` or ``"new group 1 (40 entries of 16,384)"``."""
        of = f" of {slots:,}" if slots else ""
        if self.filled:
            return f"filled group {self.group} ({self.added:,} entries, now {self.count:,}{of})"
        return f"new group {self.group} ({self.added:,} entries{of})"


@dataclass(frozen=True)
class EnrollSummary:
    """What an enrollment did (:meth:`Enroller.enroll`, :meth:`EncryptedIndex.add <encmatch.EncryptedIndex.add>`).

    The counts are summed over the enrollment's core calls. Through the
    service (:func:`encmatch.service.remote.enroll`) it also says what
    crossed the wire, and ``already_enrolled`` when the same vectors were
    committed before (nothing added, ``warnings`` says where).
    """

    added: int  #: vectors enrolled now
    total: int  #: vectors the index holds after it
    skipped: int = 0  #: vectors an earlier (interrupted or repeated) run of the same input had enrolled
    seconds: float = 0.0  #: time in the core
    bytes: int = 0  #: size of the files written (a filled group counts whole)
    growth: int = 0  #: what the index grew on disk
    groups_written: int = 0  #: group files written
    groups_filled: int = 0  #: of which the last group, filled
    groups_new: int = 0  #: of which new groups
    group_slots: int = 0  #: entries a group holds
    group_writes: tuple[GroupWrite, ...] = ()  #: one per group written
    uploaded_bytes: int = 0  #: through the service: bytes uploaded
    downloaded_bytes: int = 0  #: through the service: the last group, downloaded to fill it
    already_enrolled: bool = False  #: through the service: the same vectors were committed before
    warnings: tuple[str, ...] = ()  #: what the enroller should know (an earlier enrollment of the same vectors)
    manifest: dict = field(default_factory=dict, repr=False)  #: through the service: the index's new manifest

    @property
    def report(self) -> list[str]:
        """One line per group written: ``"filled group 0 (3 entries, now 243 of 16,384)"``, ``"new group 1 (...)"``."""
        return [w.describe(self.group_slots) for w in self.group_writes]


class Enroller:
    """Encrypts gallery vectors into an index directory.

    ``Enroller(server_key_dir)`` is any enroller: it encrypts under the
    public key of a key directory's ``server/``. ``Enroller(server_key_dir,
    owner_key_dir=key_dir)`` is the key owner (who holds the secret key): it
    encrypts under the secret key with seeded uniform halves, which halves
    the index on disk and on the wire (60 KB instead of 120 KB per 512-d
    entry at kappa 8). The server never needs the secret key either way.
    """

    #: Vectors per core call when the index's group size is unknown.
    DEFAULT_BATCH = 4096

    def __init__(self, server_key_dir: PathLike, *, owner_key_dir: PathLike | None = None):
        """Use the keys in ``server_key_dir``; with ``owner_key_dir``, the owner's secret key."""
        self.server_key_dir = require_dir(server_key_dir, "server key directory")
        self.owner_key_dir = None if owner_key_dir is None else require_dir(owner_key_dir, "client key directory")

    @property
    def seeded(self) -> bool:
        """True when enrolling as the key owner (secret key, seeded halves)."""
        return self.owner_key_dir is not None

    def create_index(self, index_dir: PathLike, delta: float, payload_width: int = 0,
                     rule: str | None = None) -> dict:
        """Create an empty index in ``index_dir`` with match threshold ``delta``; returns its manifest.

        The threshold is the index's for good: every search of it uses
        ``delta`` and no other (``docs/LEAKAGE.md``); so is ``rule``, how a
        score is compared with it: ``">"`` (strict) or ``">="`` (``None``,
        the default). Every answer is right or flagged: a score within the
        comparator's value band of delta (``index_info``'s ``guard_band``)
        is reported as uncertain, never as a clean wrong bit
        (docs/COMPARATOR.md). A payload index whose band is wider than
        +-0.02 (kappa below 12) warns (:class:`PayloadBandWarning`).
        ``payload_width`` (0 to 64; 0: none) is the number of int16 payload
        values every record carries, fetched by ``search(mode="payload")``;
        it needs a payload key set (:meth:`Client.generate` with
        ``payload=True``).
        """
        delta = check_delta(delta)
        width = check_payload_width(payload_width)
        rule = check_rule(rule)
        args: dict = {"index_dir": Path(index_dir), "server_key_dir": self.server_key_dir, "delta": delta}
        if width:
            args["payload_width"] = width
        if rule is not None:
            args["rule"] = rule
        manifest = _core.call("create_index", args)[0]
        for message in manifest.pop("warnings", None) or []:
            warnings.warn(message, PayloadBandWarning, stacklevel=2)
        return manifest

    def enroll(
        self,
        index_dir: PathLike,
        vectors: Any,
        labels: Sequence[Any] | None = None,
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        fill: bool = True,
        payloads: Any = None,
    ) -> EnrollSummary:
        """Append ``vectors`` (``[n, dim]``, optionally with one label each) to the index.

        ``payloads`` (``[n, W]`` integers within int16, ``[W]`` for one
        vector) is required by an index with payloads (``payload_width`` W
        > 0 in its manifest) and refused by one without; each row is
        encrypted with its vector, in the same batch.

        Labels never reach the core or the index's manifest: each batch's
        are sealed under the key set's public label key into
        ``index_dir/labels/`` (:mod:`encmatch.labels`); only the key holder
        opens them. The key owner's enroller makes the label key of an
        older key set that has none; an enroller with only ``server/``
        keys without one gets MissingLabelKey before anything is written.

        Vectors first fill the index's last group while it has room (the
        core rewrites that group whole, to a new file, and then the
        manifest: docs/STORAGE.md), then go to new groups. They are sent
        at most one group per core call, cut at group boundaries (the
        first batch is the room left in the last group), with a progress
        bar (log lines off a terminal) when there is more than one batch
        (``progress`` forces it on or off); a ``batch_size`` below the
        group size rewrites the filled group at every call. ``fill=False``
        starts new groups instead (an enroller that does not hold the
        group files: the service path). A batch whose content an earlier
        run already enrolled (a rerun after a crash or Ctrl-C) is skipped,
        not added twice (:mod:`encmatch._util.journal`). Returns an
        :class:`EnrollSummary` (``added``, ``total``, ``skipped``, the
        bytes written and grown, the groups written, each as a
        :class:`GroupWrite`, and a ``report`` line for each).
        """
        index_dir = Path(index_dir)
        manifest = index_info(index_dir)
        dim = Manifest.of(manifest).dim
        vecs = _core.as_matrix(vectors, dim, "vectors")
        n = len(vecs)
        pays = _check_payloads(payloads, n, Manifest.of(manifest).payload_width)
        labels_list = None
        if labels is not None:
            labels_list = [str(x) for x in (labels.tolist() if isinstance(labels, np.ndarray) else labels)]
            if len(labels_list) != n:
                raise InvalidArgument(f"labels: {len(labels_list)} labels for {n} vectors")
            check_labels(labels_list)
        seal_key = None
        if labels_list is not None:
            if self.owner_key_dir is not None:
                labels_mod.ensure_keys(self.owner_key_dir)
            seal_key, key_meta = labels_mod.load_public(self.server_key_dir)
            labels_mod.remove_stale(index_dir, Manifest.of(manifest).total)
        group_size = int(Manifest.of(manifest).params.get("group_size") or 0)
        group = int(batch_size or group_size or self.DEFAULT_BATCH)
        if group <= 0:
            raise InvalidArgument(f"batch_size must be positive, got {group}")
        if group_size > 0:
            # One group per core call: the core commits a group whole, so the
            # journal can tell after a crash whether a batch is in.
            group = min(group, group_size)
        journal = Journal.open(index_dir, Manifest.of(manifest).total)

        def seal(start: int, batch_labels: list[str]) -> None:
            labels_mod.seal_batches(index_dir, seal_key, key_meta, str(manifest.get("uid", "")),
                                    [(start, batch_labels)])

        plan = _plan_batches(vecs, labels_list, journal, group, group_size,
                             _last_group_count(manifest, group_size) if fill else 0, pays)
        show = progress if progress is not None else len(plan) > 1
        total = Manifest.of(manifest).total
        slots = group_size
        added = skipped = 0
        seconds = 0.0
        stored = growth = 0
        counts = {"groups_written": 0, "groups_filled": 0, "groups_new": 0}
        writes: list[dict] = []
        with progress_bar(total=n, unit="vec", desc="enroll", show=bool(show)) as bar:
            for lo, hi, digest, kept in plan:
                batch_labels = None if labels_list is None else labels_list[lo:hi]
                if kept is not None:  # enrolled by an earlier (interrupted) run of the same input
                    skipped += hi - lo
                    if seal_key is not None and not labels_mod.has_sealed(index_dir, kept.start, kept.count):
                        seal(kept.start, batch_labels)
                    bar.update(hi - lo)
                    continue
                args: dict = {"index_dir": index_dir, "n": hi - lo, "dim": dim}
                if self.owner_key_dir is not None:
                    args["client_key_dir"] = self.owner_key_dir
                else:
                    args["server_key_dir"] = self.server_key_dir
                if not fill:
                    args["new_groups"] = True
                batch = journal.begin(digest, total, hi - lo)
                data = vecs[lo:hi] if pays is None else _with_payloads(vecs[lo:hi], pays[lo:hi])
                summary, _ = _core.call("enroll", args, data)
                total = int(summary["total"])
                slots = int(summary.get("group_slots") or slots or 0)
                start = total - int(summary["added"])
                journal.finish(batch, start)
                if seal_key is not None:  # after the groups are in: a crash leaves entries unlabelled, never mislabelled
                    seal(start, batch_labels)
                added += int(summary.get("added", hi - lo))
                seconds += float(summary.get("seconds", 0.0))
                stored += int(summary.get("bytes", 0))
                growth += int(summary.get("growth", summary.get("bytes", 0)))
                for key in counts:
                    counts[key] += int(summary.get(key, 0))
                writes += list(summary.get("group_writes") or [])
                bar.update(hi - lo)
        return EnrollSummary(added=added, total=total, skipped=skipped, seconds=seconds, bytes=stored,
                             growth=growth, group_slots=slots, **counts,
                             group_writes=tuple(GroupWrite.of(w) for w in _merge_writes(writes)))


def _check_payloads(payloads: Any, n: int, width: int) -> np.ndarray | None:
    """The payloads of ``n`` vectors for an index of ``width`` payload values (int16 ``[n, width]``), or
    ``None`` for an index without payloads; InvalidArgument when they are missing, unwanted or bad."""
    if width == 0:
        if payloads is not None:
            raise InvalidArgument("this index holds no payloads (created with payload_width 0): create one with "
                                  "payload_width > 0 to store payloads")
        return None
    if payloads is None:
        raise InvalidArgument(f"this index stores {width} int16 payload value(s) per record: give payloads "
                              f"[{n}, {width}] with the vectors")
    return _core.as_payloads(payloads, n, width)


def _with_payloads(vecs: np.ndarray, pays: np.ndarray) -> np.ndarray:
    """The core's input of an enrollment with payloads: the float32 vectors, then their int16 payloads (LE)."""
    return np.concatenate([np.ascontiguousarray(vecs, dtype=_core.FLOAT32).view(np.uint8).ravel(),
                           np.ascontiguousarray(pays, dtype=_core.INT16).view(np.uint8).ravel()])


def _last_group_count(manifest: dict, group_size: int) -> int:
    """Entries in the index's last group when it has room (the core fills it first), else 0."""
    groups = manifest.get("groups") or []
    count = int(groups[-1].get("count", 0)) if groups else 0
    return count if 0 < count < group_size else 0


def check_labels(labels: Sequence[str]) -> None:
    """Refuse (InvalidArgument) labels that are not printable text: an empty label is allowed; one with a
    control or format character (NUL, newline, ANSI escapes, right-to-left overrides...) or over 1,000
    characters is not, since every place that shows a label would show something else than it says."""
    for i, text in enumerate(labels):
        if len(text) > 1000:
            raise InvalidArgument(f"label {i} has {len(text)} characters (at most 1,000)")
        bad = forbidden_char(text)
        if bad is not None:
            raise InvalidArgument(f"label {i} holds the character U+{ord(bad):04X} "
                                  f"({unicodedata.name(bad, unicodedata.category(bad))}): labels are printable text")


def _plan_batches(vecs: np.ndarray, labels: list[str] | None, journal: Journal, group: int, group_size: int,
                  last: int, payloads: np.ndarray | None = None) -> list[tuple[int, int, str, Any]]:
    """Cut ``vecs`` into core calls: ``(lo, hi, digest, kept)``, ``kept`` the journal's record of a batch
    an earlier run already enrolled (skipped), else None.

    A new batch holds at most ``group`` vectors and never crosses a group boundary: the first
    fills the ``group_size - last`` free slots of the last group, so that each core call writes
    one group (filled or new) and commits it whole. Since the cuts depend on the index when a run
    starts, a rerun after a crash first looks, at each position, for a batch the journal has
    done, of any size it records, before cutting anew.
    """
    n = len(vecs)

    def digest(lo: int, hi: int) -> str:
        return batch_digest(vecs[lo:hi], None if labels is None else labels[lo:hi],
                            None if payloads is None else payloads[lo:hi])

    sizes = sorted({b.count for b in journal.batches if b.done and b.count > 0}, reverse=True)
    plan: list[tuple[int, int, str, Any]] = []
    lo = 0
    while lo < n:
        hit = None
        for k in sizes:
            if lo + k <= n:
                d = digest(lo, lo + k)
                kept = journal.done(d)
                if kept is not None:
                    hit = (lo, lo + k, d, kept)
                    break
        if hit is None:
            size = min(group, n - lo)
            if group_size > 0:
                size = min(size, group_size - last)
                last = (last + size) % group_size
            d = digest(lo, lo + size)
            hit = (lo, lo + size, d, journal.done(d))
        plan.append(hit)
        lo = hit[1]
    return plan


def _merge_writes(writes: list[dict]) -> list[dict]:
    """One record per group from the core calls' ``group_writes``: a group filled by several calls
    (batches smaller than a group) is reported once, with the entries they added together."""
    out: list[dict] = []
    for w in writes:
        if out and out[-1]["group"] == w["group"]:
            out[-1] = dict(w, added=out[-1]["added"] + w["added"], filled=out[-1]["filled"])
        else:
            out.append(dict(w))
    return out
