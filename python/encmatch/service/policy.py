"""What the service accepts: index ids and file names, a key set's metadata (checked against the core's
parameters), the envelope kinds each uploaded file may have, and manifests that only append. The
storage (:mod:`~encmatch.service.storage`) applies these rules before anything is written."""

from __future__ import annotations

import re
from typing import Any

from ..errors import InvalidArgument, Mismatch
from ..params import describe
from .errors import Conflict, Forbidden

__all__ = [
    "INDEX_ID",
    "FILE_NAME",
    "RESERVED_NAMES",
    "KEY_KINDS",
    "GALOIS_KIND",
    "SEALED_KIND",
    "GROUP_KIND",
    "PUBLIC_KINDS",
    "KEY_META",
    "APPEND_FIELDS",
    "is_fill_of",
    "check_append_only",
    "check_name",
    "check_key_meta",
    "key_files",
    "allowed_kinds",
    "group_kind",
]

#: Index ids (server-made: 16 hex digits).
INDEX_ID = re.compile(r"^[0-9a-f]{16}$")
#: Names of uploaded files.
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: Names an upload may never take (they are the service's own files, or a secret key's).
RESERVED_NAMES = {"manifest.json", "keys.json", "index.json", "current.json", "secret.key", "client.json"}
#: Envelope kinds of the key files the service accepts, by file name.
KEY_KINDS = {"relin.key": "relinearization-key"}
GALOIS_KIND = "galois-key"
#: Kind of a sealed label file (encmatch.labels): the only kind a ``*.sealed`` upload may have.
SEALED_KIND = "sealed-labels"
#: Kind prefix of a gallery group file (core/face/index KindGroup).
GROUP_KIND = "gallery-group"
#: Public kinds the service knows but never stores as uploads: one of them in the wrong place is a
#: ``mismatch``; every kind outside this set and the allow-list (secret keys, label secret keys,
#: threshold shares and receiver secret keys, unknown kinds) is ``forbidden``.
PUBLIC_KINDS = {"public-key", "relinearization-key", "galois-key", "query", "result", SEALED_KIND,
                 "label-public-key", "threshold-receiver-public", "threshold-ciphertext",
                 "threshold-decryption-share", "threshold-round1", "threshold-round2"}
#: keys.json fields the service needs, with their types.
KEY_META = {"format": int, "key_id": str, "preset": str, "kappa": int, "dim": int, "fingerprint": str,
             "strategy": str, "n1": int, "galois_elements": list}


#: The manifest fields an append changes; every other one is fixed when the
#: index is created (the threshold, the rule, the score scale the gallery
#: was encoded with, the parameters, the strategy, the uid...).
APPEND_FIELDS = ("groups", "count")


def is_fill_of(old: dict, new: dict) -> bool:
    """Whether group entry ``new`` is ``old`` filled: the same start, more entries, the next fill's file
    (the core's file name for it, ``group-<i>.fill-<F>.ct``, checked again when it loads the commit)."""
    fills = int(old.get("fills", 0) or 0)
    return (isinstance(new.get("count"), int) and new.get("start") == old.get("start")
            and new["count"] > int(old.get("count", 0)) and new.get("fills") == fills + 1
            and new.get("file") != old.get("file"))


def check_append_only(old: dict, new: dict) -> None:
    """Refuse (Conflict) a manifest that differs from the committed one in
    any field but :data:`APPEND_FIELDS`, a field added or dropped included:
    a token may grow an index, never move what its answers mean."""
    changed = sorted(k for k in set(old) | set(new)
                     if k not in APPEND_FIELDS and (k not in old or k not in new or old[k] != new[k]))
    if changed:
        raise Conflict(f"a commit can change only the index's groups and count; this one changes "
                       f"{', '.join(changed)}, fixed when the index was created")


def check_name(name: str) -> str:
    """``name`` if it may name an uploaded file, else InvalidArgument."""
    if not FILE_NAME.match(name) or name in RESERVED_NAMES or name.endswith((".part", ".json")):
        raise InvalidArgument(f"{name!r} cannot name an uploaded file")
    return name


def check_key_meta(meta: Any, allow_insecure: bool) -> dict:
    """Validate a key set's ``keys.json`` (sent at index creation) against the core's parameters.

    The preset, kappa and dimension must describe a parameter set whose
    fingerprint is the one the keys claim; an insecure preset is Forbidden
    unless ``allow_insecure``. Returns the metadata with ``insecure`` as the
    core says.
    """
    if not isinstance(meta, dict):
        raise InvalidArgument("keys: expected the key set's keys.json object")
    for field, typ in KEY_META.items():
        value = meta.get(field)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise InvalidArgument(f"keys: field {field!r} missing or not a {typ.__name__}")
    gal = meta["galois_elements"]
    if not gal or len(gal) > 4096 or not all(isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in gal):
        raise InvalidArgument("keys: galois_elements must be 1 to 4096 positive integers")
    if not re.match(r"^[0-9a-f]{1,64}$", meta["key_id"]):
        raise InvalidArgument("keys: key_id must be hex")
    if not isinstance(meta.get("payload", False), bool):
        raise InvalidArgument("keys: field 'payload' must be true or false")
    if not isinstance(meta.get("fold", False), bool):
        raise InvalidArgument("keys: field 'fold' must be true or false")
    payload = bool(meta.get("payload", False))  # a payload key set: one more level (issue 18)
    params = describe(meta["preset"], meta["kappa"], meta["dim"], payload=payload, fold=bool(meta.get("fold", False)),
                      fingerprint=meta["fingerprint"])
    # Galois elements live modulo the ring's 2N-th (conjugate-invariant ring: 4N-th) root of unity.
    two_n = (4 if params.get("ring") == "ConjugateInvariant" else 2) << int(params["log_n"])
    if len(set(gal)) != len(gal) or not all(g % 2 == 1 and 1 < g < two_n for g in gal):
        raise InvalidArgument(f"keys: galois_elements must be distinct odd integers between 1 and {two_n} "
                              f"(the ring's Galois group)")
    if meta["strategy"] not in ("dg", "bsgs-diagonal", "bsgs-tbs", "bsgs-tbe") or \
            not 1 <= meta["n1"] <= int(params["padded_dim"]):
        raise InvalidArgument(f"keys: strategy {meta['strategy'][:40]!r} with n1 {meta['n1']} is not one the core "
                              f"makes (n1 from 1 to {params['padded_dim']})")
    if params.get("fingerprint") != meta["fingerprint"]:
        raise Mismatch(
            f"keys: fingerprint {meta['fingerprint']} does not match the parameters they name "
            f"({meta['preset']}, kappa={meta['kappa']}, dim={meta['dim']}{', payload' if payload else ''})"
        )
    if params.get("insecure") and not allow_insecure:
        raise Forbidden(
            f"preset {meta['preset']!r} is INSECURE; this service refuses it "
            "(start it with --allow-insecure for tests)"
        )
    return dict(meta, insecure=bool(params.get("insecure")))


def key_files(meta: dict) -> list[str]:
    """The key files a server needs for a key set: the relinearization key and every Galois key."""
    return ["relin.key"] + [f"gal-{g}.key" for g in meta["galois_elements"]]


def allowed_kinds(name: str, meta: dict) -> set[str]:
    """The envelope kinds an upload named ``name`` may have, for an index whose keys are ``meta``.

    A key file: its key kind; a ``*.sealed`` file: ``sealed-labels``; any
    other name: a gallery group of the index's layout (core/face/index
    ``groupHeader``: ``gallery-group/plain`` or
    ``gallery-group/prerotated-n1=<n1>`` for ``bsgs-tbe``, each with or
    without ``/seeded``; a payload key set's groups also end in
    ``/payload=<W>``, see :func:`group_kind`). Everything else is refused.
    """
    if name in set(key_files(meta)):
        return {KEY_KINDS.get(name, GALOIS_KIND)}
    if name.endswith(".sealed"):
        return {SEALED_KIND}
    layout = f"{GROUP_KIND}/prerotated-n1={meta['n1']}" if meta["strategy"] == "bsgs-tbe" else f"{GROUP_KIND}/plain"
    return {layout, layout + "/seeded"}


_PAYLOAD_SUFFIX = re.compile(r"/payload=([1-9]|[1-5][0-9]|6[0-4])$")


_FILL_SUFFIX = re.compile(r"/fill=[1-9][0-9]{0,6}/count=[1-9][0-9]{0,9}$")


def group_kind(kind: str, meta: dict) -> str:
    """A group's envelope kind without the suffixes :func:`allowed_kinds` does not spell: a filled
    group's ``/fill=<F>/count=<C>``, and ``/payload=<W>`` when the keys are a payload key set (the core
    checks both against the manifest when it loads the commit)."""
    if not kind.startswith(GROUP_KIND + "/"):
        return kind
    kind = _FILL_SUFFIX.sub("", kind)
    return _PAYLOAD_SUFFIX.sub("", kind) if meta.get("payload") else kind
