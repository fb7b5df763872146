"""The service's frame-header reader under mutated input: a FrameError or a consistent header, nothing else.

The Go decoders have native fuzz targets (docs/FUZZ.md); this is the
Python side's, run as a seeded mutation loop (no extra dependency).
"""

from __future__ import annotations

import hashlib
import io
import random
import struct

import pytest

from encmatch.service.frames import MAGIC, VERSION, FrameError, parse_header, verify_file


def _frame(kind: str = "galois-key", fingerprint: str = "f" * 16, key_id: str = "k" * 16,
           payload: bytes = b"\x01\x02\x03") -> bytes:
    """A frame laid out as core/base/envelope.Seal writes it."""
    b = MAGIC + struct.pack("<H", VERSION)
    for s in (kind, fingerprint, key_id):
        raw = s.encode()
        b += struct.pack("<H", len(raw)) + raw
    b += struct.pack("<Q", len(payload)) + payload
    return b + hashlib.sha256(b).digest()


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    op = rng.randrange(4)
    if op == 0 and b:  # flip bytes
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif op == 1:  # truncate
        del b[rng.randrange(len(b) + 1):]
    elif op == 2:  # insert
        at = rng.randrange(len(b) + 1)
        b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    else:  # a length field set to an extreme
        at = rng.randrange(len(MAGIC), max(len(MAGIC) + 1, len(b) - 1))
        b[at:at + 2] = rng.choice([b"\xff\xff", b"\x00\x00", b"\x00\x10"])
    return bytes(b)


def test_valid_frame_round_trips():
    data = _frame()
    h = parse_header(data)
    assert (h.kind, h.fingerprint, h.key_id, h.payload_length) == ("galois-key", "f" * 16, "k" * 16, 3)
    assert h.total_length == len(data)
    header, digest = verify_file(io.BytesIO(data), len(data))
    assert header == h and digest == hashlib.sha256(data).hexdigest()


def test_every_prefix_is_truncated_not_wrong():
    data = _frame()
    h = parse_header(data)
    for n in range(h.payload_offset):
        with pytest.raises(FrameError) as err:
            parse_header(data[:n])
        assert err.value.truncated, n


def test_mutated_frames_give_frame_errors_only():
    rng = random.Random(14)
    seeds = [_frame(), _frame("secret-key", "", "", b""), _frame("query", "x" * 300, "é" * 5, bytes(100))]
    parsed = refused = 0
    for i in range(20_000):
        data = _mutate(rng, rng.choice(seeds))
        if rng.random() < 0.3:
            data = _mutate(rng, data)
        try:
            h = parse_header(data)
        except FrameError:
            refused += 1
        else:
            parsed += 1
            assert h.payload_offset <= len(data) and 0 <= h.payload_length <= 1 << 36
            assert data[:len(MAGIC)] == MAGIC
        try:
            header, _ = verify_file(io.BytesIO(data), len(data))
        except FrameError:
            pass
        else:  # only an intact frame (its own checksum) passes
            assert hashlib.sha256(data[:-32]).digest() == data[-32:] and header.total_length == len(data)
    assert parsed > 1000 and refused > 1000  # the loop reached both sides
