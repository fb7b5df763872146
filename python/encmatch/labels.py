"""Sealed labels: names stay with the key holder, or travel encrypted.

The core never sees a label. At key generation the client also makes a
*label key pair* (X25519): the private key ``labels.key`` stays in the key
directory beside ``secret.key``; the public key ``server/labels.pub``
travels with the evaluation keys, so an enroller that holds only
``server/`` can seal labels it cannot read back.

Each enrollment batch's labels are sealed into one file beside the index,
``index_dir/labels/<start>-<end>.sealed`` (positions ``start`` to ``end``,
end excluded), written atomically; the service stores the same bytes as an
opaque upload. Sealing is an ECIES / HPKE-base-mode construction from the
``cryptography`` package's primitives:

- an ephemeral X25519 key pair per file; ``shared = X25519(ephemeral, recipient)``;
- ``HKDF-SHA256(shared, salt = ephemeral_pub || recipient_pub,
  info = "encmatch sealed labels v1")`` gives a 32-byte key and a 12-byte nonce
  (both fresh for every file, since the ephemeral key is);
- AES-256-GCM over the labels (a JSON list, zero-padded to a multiple of
  1 KiB so that name lengths show only coarsely) with associated data
  binding the file's header: the index's key id, parameter fingerprint and
  uid (a random id the core gives every index at creation), and the
  position range.

Reading checks the header against the index it is read for (key id, uid,
range from the file name) and the AEAD tag: a file of another index, moved
to another range, or with any byte changed is refused with
:class:`~encmatch.errors.Corrupt` / :class:`~encmatch.errors.Mismatch`,
never joined to the wrong positions. Every file is also framed like the
core's artefacts (``docs/STORAGE.md``: kind ``sealed-labels``, key id,
fingerprint, SHA-256), which is what the service checks on upload.

What this protects: names at rest on the service and on the wire, and
their integrity against storage corruption or a file swapped by mistake.
It cannot make a hostile server compute on the right ciphertexts; see
``docs/LEAKAGE.md``.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ._util.atomic import write_atomic
from .errors import Corrupt, Exists, Mismatch, NotFound

__all__ = [
    "SECRET_FILE", "PUBLIC_FILE", "LABELS_DIR", "KIND_SEALED", "MissingLabelKey",
    "generate_keys", "ensure_keys", "load_public", "load_secret", "has_public",
    "seal", "open_sealed", "sealed_name", "parse_name", "write_sealed", "local_files",
    "remove_stale", "join",
]

#: The private label key, in the client's key directory (never leaves it).
SECRET_FILE = "labels.key"
#: The public label key, in the key directory's ``server/`` (travels with the evaluation keys).
PUBLIC_FILE = "labels.pub"
#: Sub-directory of an index directory holding its sealed label files.
LABELS_DIR = "labels"
#: Envelope kinds.
KIND_SEALED = "sealed-labels"
KIND_PUBLIC = "label-public-key"
KIND_SECRET = "label-secret-key"

_INFO = b"encmatch sealed labels v1"
_SUITE = "x25519-hkdf-sha256-aes256gcm"
_PAD = 1024
_MAGIC = b"ENCMATCH"
_NAME = re.compile(r"^(\d{10})-(\d{10})\.sealed$")


class MissingLabelKey(NotFound):
    """A key set without a label key (made before sealed labels existed), or not handed to this role."""


# ---- frames (the core's envelope, core/base/envelope) -----------------------------


def _frame(kind: str, fingerprint: str, key_id: str, payload: bytes) -> bytes:
    """Frame ``payload`` as the core does: header, payload, SHA-256 of both."""
    out = bytearray(_MAGIC)
    out += struct.pack("<H", 1)
    for field in (kind, fingerprint, key_id):
        b = field.encode()
        out += struct.pack("<H", len(b)) + b
    out += struct.pack("<Q", len(payload)) + payload
    out += hashlib.sha256(out).digest()
    return bytes(out)


def _unframe(data: bytes, what: str) -> tuple[str, str, str, bytes]:
    """``(kind, fingerprint, key_id, payload)`` of a whole frame; Corrupt if it is not one."""
    try:
        if data[:8] != _MAGIC or struct.unpack_from("<H", data, 8)[0] != 1:
            raise ValueError("not an encmatch frame")
        pos, fields = 10, []
        for _ in range(3):
            (n,) = struct.unpack_from("<H", data, pos)
            fields.append(data[pos + 2 : pos + 2 + n].decode())
            pos += 2 + n
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        if pos + length + 32 != len(data):
            raise ValueError(f"{len(data)} bytes, the header announces {pos + length + 32}")
        if hashlib.sha256(data[: pos + length]).digest() != data[pos + length :]:
            raise ValueError("checksum mismatch")
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        raise Corrupt(f"{what}: {exc}") from None
    return fields[0], fields[1], fields[2], bytes(data[pos : pos + length])


# ---- keys --------------------------------------------------------------------


def _key_meta(server_key_dir: Path) -> dict:
    """The key set's ``keys.json`` (key id and fingerprint)."""
    path = server_key_dir / "keys.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Corrupt(f"cannot read {path}: {exc}") from exc


def generate_keys(key_dir: Path) -> None:
    """Make the label key pair of the key set in ``key_dir`` (Exists if it has one)."""
    key_dir = Path(key_dir)
    server = key_dir / "server"
    meta = _key_meta(server)
    sk_path, pk_path = key_dir / SECRET_FILE, server / PUBLIC_FILE
    if sk_path.exists() or pk_path.exists():
        raise Exists(f"{key_dir} already has a label key")
    sk = X25519PrivateKey.generate()
    raw_sk = sk.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                              serialization.NoEncryption())
    raw_pk = sk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    write_atomic(sk_path, _frame(KIND_SECRET, meta["fingerprint"], meta["key_id"], raw_sk), 0o600)
    write_atomic(pk_path, _frame(KIND_PUBLIC, meta["fingerprint"], meta["key_id"], raw_pk))


def ensure_keys(key_dir: Path) -> None:
    """Make the label key pair of an older key set that has none (the key holder's own directory)."""
    key_dir = Path(key_dir)
    if not (key_dir / SECRET_FILE).exists() and not (key_dir / "server" / PUBLIC_FILE).exists():
        generate_keys(key_dir)


def _load_key(path: Path, kind: str, meta: dict) -> bytes:
    """The raw 32 bytes of a label key file, checked against the key set."""
    k, fp, key_id, raw = _unframe(path.read_bytes(), str(path))
    if k != kind or len(raw) != 32:
        raise Corrupt(f"{path} is not a {kind}")
    if key_id != meta["key_id"] or fp != meta["fingerprint"]:
        raise Mismatch(f"{path} belongs to key set {key_id}, not {meta['key_id']}")
    return raw


def has_public(server_key_dir: Path) -> bool:
    """True when ``server_key_dir`` holds a public label key."""
    return (Path(server_key_dir) / PUBLIC_FILE).is_file()


def load_public(server_key_dir: Path) -> tuple[X25519PublicKey, dict]:
    """The public label key of ``server_key_dir`` and its key set's metadata (MissingLabelKey if absent)."""
    server_key_dir = Path(server_key_dir)
    path = server_key_dir / PUBLIC_FILE
    if not path.is_file():
        raise MissingLabelKey(
            f"the keys in {server_key_dir} have no label key ({PUBLIC_FILE}): they were made before labels were "
            "sealed. The key holder makes one by enrolling with labels from its own key directory (as the key "
            f"owner) and then hands the enroller the new server/{PUBLIC_FILE}; or enroll without labels"
        )
    meta = _key_meta(server_key_dir)
    return X25519PublicKey.from_public_bytes(_load_key(path, KIND_PUBLIC, meta)), meta


def load_secret(key_dir: Path) -> X25519PrivateKey:
    """The private label key of ``key_dir`` (MissingLabelKey if absent)."""
    key_dir = Path(key_dir)
    path = key_dir / SECRET_FILE
    if not path.is_file():
        raise MissingLabelKey(f"the key directory {key_dir} has no label key ({SECRET_FILE}): "
                              "it cannot open sealed labels")
    return X25519PrivateKey.from_private_bytes(_load_key(path, KIND_SECRET, _key_meta(key_dir / "server")))


# ---- sealing -----------------------------------------------------------------


def _derive(shared: bytes, epk: bytes, pk: bytes) -> tuple[bytes, bytes]:
    """AES-256 key and 12-byte nonce from the X25519 secret (HKDF-SHA256)."""
    okm = HKDF(algorithm=hashes.SHA256(), length=44, salt=epk + pk, info=_INFO).derive(shared)
    return okm[:32], okm[32:]


def _raw(pk: X25519PublicKey) -> bytes:
    return pk.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def seal(public_key: X25519PublicKey, labels: Sequence[str], *, key_id: str, fingerprint: str, uid: str,
         start: int) -> bytes:
    """Seal ``labels`` (positions ``start`` to ``start + len(labels)``) for the holder of the label key."""
    end = start + len(labels)
    eph = X25519PrivateKey.generate()
    epk, pk = _raw(eph.public_key()), _raw(public_key)
    header = {"format": 1, "suite": _SUITE, "key_id": key_id, "fingerprint": fingerprint, "uid": uid,
              "start": int(start), "end": int(end), "epk": epk.hex()}
    aad = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    plain = json.dumps([str(x) for x in labels], ensure_ascii=False).encode()
    plain += b" " * (-len(plain) % _PAD)
    key, nonce = _derive(eph.exchange(public_key), epk, pk)
    ct = AESGCM(key).encrypt(nonce, plain, aad)
    return _frame(KIND_SEALED, fingerprint, key_id, struct.pack("<I", len(aad)) + aad + ct)


def open_sealed(secret_key: X25519PrivateKey, data: bytes, *, key_id: str, fingerprint: str, uid: str,
                start: int, end: int, what: str = "sealed labels") -> list[str]:
    """The labels of a sealed file expected to cover ``start`` to ``end`` of the index ``uid``.

    Mismatch when the file was sealed for another key set, index or range;
    Corrupt when any byte was changed (frame checksum or AEAD tag).
    """
    kind, fp, kid, payload = _unframe(data, what)
    if kind != KIND_SEALED:
        raise Corrupt(f"{what} is a {kind}, not sealed labels")
    try:
        (n,) = struct.unpack_from("<I", payload, 0)
        aad = payload[4 : 4 + n]
        header = json.loads(aad)
        if not isinstance(header, dict) or header.get("suite") != _SUITE:
            raise ValueError("unknown sealing suite")
        epk = bytes.fromhex(header["epk"])
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise Corrupt(f"{what}: bad header: {exc}") from None
    if kid != key_id or header.get("key_id") != key_id or fp != fingerprint or header.get("fingerprint") != fingerprint:
        raise Mismatch(f"{what} was sealed for key set {header.get('key_id')}, the index is {key_id}'s")
    if header.get("uid") != uid:
        raise Mismatch(f"{what} was sealed for another index (uid {header.get('uid')!r}, this one {uid!r})")
    if (header.get("start"), header.get("end")) != (start, end):
        raise Mismatch(f"{what} labels positions {header.get('start')}..{header.get('end')}, "
                       f"expected {start}..{end}")
    try:
        pk = _raw(secret_key.public_key())
        key, nonce = _derive(secret_key.exchange(X25519PublicKey.from_public_bytes(epk)), epk, pk)
        plain = AESGCM(key).decrypt(nonce, payload[4 + n :], aad)
    except (InvalidTag, ValueError):
        raise Corrupt(f"{what}: authentication failed (tampered, or not sealed for this label key)") from None
    labels = json.loads(plain.decode().rstrip(" "))
    if not isinstance(labels, list) or len(labels) != end - start:
        raise Corrupt(f"{what}: holds {len(labels)} labels for {end - start} positions")
    return [str(x) for x in labels]


# ---- files beside an index ---------------------------------------------------


def sealed_name(start: int, end: int) -> str:
    """File name of the sealed labels of positions ``start`` to ``end`` (also the service's upload name)."""
    return f"{start:010d}-{end:010d}.sealed"


def parse_name(name: str) -> tuple[int, int] | None:
    """``(start, end)`` of a sealed label file name, or ``None`` for another name."""
    m = _NAME.match(name)
    if not m:
        return None
    start, end = int(m.group(1)), int(m.group(2))
    return (start, end) if end > start else None


def write_sealed(index_dir: Path, name: str, data: bytes) -> Path:
    """Write a sealed file into ``index_dir/labels/`` atomically; returns its path."""
    d = Path(index_dir) / LABELS_DIR
    d.mkdir(exist_ok=True)
    path = d / name
    write_atomic(path, data)
    return path


def has_sealed(index_dir: Path, start: int, count: int) -> bool:
    """True when ``index_dir/labels/`` holds the sealed file of positions ``[start, start + count)``."""
    return (Path(index_dir) / LABELS_DIR / sealed_name(start, start + count)).is_file()


def local_files(index_dir: Path) -> dict[str, Callable[[], bytes]]:
    """The sealed label files of a local index, by name, each with a reader."""
    d = Path(index_dir) / LABELS_DIR
    if not d.is_dir():
        return {}
    return {p.name: p.read_bytes for p in sorted(d.iterdir()) if parse_name(p.name) is not None}


def remove_stale(index_dir: Path, count: int) -> None:
    """Remove sealed files (and temporaries) beyond the index's ``count`` entries, left by an interrupted enrollment."""
    d = Path(index_dir) / LABELS_DIR
    if not d.is_dir():
        return
    for p in d.iterdir():
        rng = parse_name(p.name)
        if (rng is not None and rng[1] > count) or ".tmp-" in p.name:
            p.unlink(missing_ok=True)


def join(files: dict[str, Callable[[], bytes]], manifest: dict, secret_key: Any) -> list[str] | None:
    """Labels of every position of the index ``manifest`` describes, from its sealed files.

    ``None`` when no position has a label; positions without one are
    ``""``. Files beyond the index's count (an interrupted enrollment) are
    ignored; overlapping, tampered or foreign files raise.
    """
    count = int(manifest.get("count", 0))
    ranges = sorted((rng, name) for name in files if (rng := parse_name(name)) is not None and rng[1] <= count)
    if not ranges:
        return None
    if secret_key is None:
        raise MissingLabelKey("this index has sealed labels, but no label key was given to open them")
    out = [""] * count
    last = 0
    for (start, end), name in ranges:
        if start < last:
            raise Corrupt(f"sealed label files overlap at {name}")
        out[start:end] = open_sealed(secret_key, files[name](), key_id=manifest["key_id"],
                                     fingerprint=manifest["fingerprint"], uid=str(manifest.get("uid", "")),
                                     start=start, end=end, what=f"sealed labels {name}")
        last = end
    return out


def seal_batches(index_dir: Path, public_key: X25519PublicKey, meta: dict, uid: str,
                 batches: Iterable[tuple[int, Sequence[str]]]) -> list[str]:
    """Seal each ``(start, labels)`` batch into ``index_dir/labels/``; returns the file names."""
    names = []
    for start, labels in batches:
        name = sealed_name(start, start + len(labels))
        write_sealed(index_dir, name, seal(public_key, labels, key_id=meta["key_id"],
                                           fingerprint=meta["fingerprint"], uid=uid, start=start))
        names.append(name)
    return names
