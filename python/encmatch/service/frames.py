"""Reading the core's frame header (``core/base/envelope``) in Python.

Every binary artefact of encmatch (keys, gallery groups, queries, results)
starts with the same header::

    magic "ENCMATCH" | u16 version | u16 len kind | kind | u16 len fingerprint | fingerprint |
    u16 len key id | key id | u64 payload length | payload | 32-byte SHA-256 of everything before it

The service reads it to refuse what it must never hold (a secret key), to
reject bytes of another parameter set or key set before they reach a
search worker, and to check a whole file's own checksum on upload. The
core checks the same header again when it decodes anything.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["MAGIC", "VERSION", "KIND_SECRET_KEY", "FrameError", "Header", "parse_header", "verify_file"]

#: The first eight bytes of every frame.
MAGIC = b"ENCMATCH"
#: The frame version this reader understands.
VERSION = 1
#: Envelope kind of a secret key: never accepted by the service.
KIND_SECRET_KEY = "secret-key"
#: Size of the trailing SHA-256.
_SUM = 32
#: Largest payload the core accepts (core/base/envelope MaxPayload).
_MAX_PAYLOAD = 1 << 36


class FrameError(ValueError):
    """The bytes are not a well-formed frame; ``truncated`` when more bytes could complete the header."""

    def __init__(self, message: str, truncated: bool = False):
        """``message`` for humans; ``truncated`` if the header is incomplete rather than wrong."""
        super().__init__(message)
        self.truncated = truncated


@dataclass(frozen=True)
class Header:
    """A frame header: what the payload is, for which parameters and key set, and its size."""

    kind: str
    fingerprint: str
    key_id: str
    payload_offset: int
    payload_length: int

    @property
    def total_length(self) -> int:
        """Length of the whole frame: header, payload and checksum."""
        return self.payload_offset + self.payload_length + _SUM


def parse_header(data: bytes | memoryview) -> Header:
    """Parse the header at the start of ``data`` (the payload need not be present).

    Raises :class:`FrameError` for a bad magic, version or length, with
    ``truncated=True`` when ``data`` simply ends inside the header.
    """
    buf = memoryview(data)
    if len(buf) < len(MAGIC):
        if bytes(buf) != MAGIC[: len(buf)]:
            raise FrameError("not an encmatch artefact (bad magic)")
        raise FrameError("truncated header", truncated=True)
    if bytes(buf[: len(MAGIC)]) != MAGIC:
        raise FrameError("not an encmatch artefact (bad magic)")
    pos = len(MAGIC)

    def take(n: int) -> memoryview:
        """The next ``n`` bytes of the header (FrameError, truncated, when they are missing)."""
        nonlocal pos
        if len(buf) < pos + n:
            raise FrameError("truncated header", truncated=True)
        out = buf[pos : pos + n]
        pos += n
        return out

    (version,) = struct.unpack("<H", take(2))
    if version != VERSION:
        raise FrameError(f"unsupported frame version {version}")
    fields = []
    for _ in range(3):
        (n,) = struct.unpack("<H", take(2))
        try:
            fields.append(bytes(take(n)).decode("utf-8"))
        except UnicodeDecodeError:
            raise FrameError("header field is not UTF-8") from None
    (length,) = struct.unpack("<Q", take(8))
    if length > _MAX_PAYLOAD:
        raise FrameError(f"payload length {length} out of range")
    return Header(kind=fields[0], fingerprint=fields[1], key_id=fields[2], payload_offset=pos, payload_length=length)


def verify_file(f: BinaryIO, size: int, block: int = 1 << 20) -> tuple[Header, str]:
    """Check a whole framed file of ``size`` bytes; return its header and the SHA-256 (hex) of all its bytes.

    Reads ``f`` from its start once: the header's announced length must
    equal ``size`` and the frame's own trailing SHA-256 must match.
    Raises :class:`FrameError` otherwise.
    """
    f.seek(0)
    head = f.read(min(size, 1 << 16))
    header = parse_header(head)
    if header.total_length != size:
        raise FrameError(f"file has {size} bytes, its header announces {header.total_length}")
    frame_sum = hashlib.sha256()
    file_sum = hashlib.sha256()
    body = size - _SUM
    f.seek(0)
    left = body
    while left > 0:
        chunk = f.read(min(block, left))
        if not chunk:
            raise FrameError("file ended early")
        frame_sum.update(chunk)
        file_sum.update(chunk)
        left -= len(chunk)
    trailer = f.read(_SUM)
    file_sum.update(trailer)
    if trailer != frame_sum.digest():
        raise FrameError("frame checksum mismatch (corrupt file)")
    return header, file_sum.hexdigest()
