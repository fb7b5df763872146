"""Threshold decryption: t-out-of-n key generation among decryptors, decryption shares, a receiver.

No single party can decrypt: the secret key is shared among ``n``
decryptors so that any ``t`` of them can help decrypt and fewer learn
nothing (``docs/THRESHOLD.md``). The roles:

- **Decryptors** (parties ``1..n``) run the dealer-free setup in two rounds
  (:func:`round1`, :func:`round2`), exchanging files: public messages go to
  a shared *bulletin* directory, Shamir shares (``shamir-<i>-to-<j>.share``)
  privately from party ``i`` to party ``j``. Each keeps its threshold secret
  share file ``threshold-share-<i>.key`` and serves as a :class:`Decryptor`.
- Anyone then :func:`finalize` s the bulletin into a server key directory
  (the layout of a key set's ``server/``: public, relinearisation and
  rotation keys) that queriers encrypt with (:func:`encrypt`) and computing
  servers evaluate with.
- The **receiver** makes its own key pair (:meth:`Receiver.generate`) and
  gives ``receiver.pub`` to the decryptors; it alone turns ``t`` decryption
  shares into plaintext (:meth:`Receiver.combine`).

Decryptors decrypt search results only: a result goes to them bound to
its search and signed by the server that computed it
(:meth:`encmatch.Server.search` with ``signing_key``, or
:func:`bind_search`: the query, the result, the index id and generation
under a transcript hash they recompute, signed with the server's key from
:func:`generate_signing_key`). Each decryptor trusts one server key
(``server-signing.pub``), keeps a journal beside its share file and refuses
to share any ciphertext twice (:class:`~encmatch.errors.Exists`). A probe
or any other ciphertext handed to them, and any search not signed by the
trusted server, is refused.

Every decryption share adds noise flooding sized as papers/004 §5 derives,
capped so that the values still decode (the share's ``flooding`` info says
how much statistical hiding that gives). Each function is one core call
(``docs/ABI.md``, "Threshold decryption").
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from . import _core
from .errors import InvalidArgument, NotFound
from ._util.defaults import DEFAULT_KAPPA

__all__ = [
    "init_setup",
    "round1",
    "round2",
    "finalize",
    "encrypt",
    "generate_signing_key",
    "signing_key_public",
    "bind_search",
    "Decryptor",
    "Receiver",
    "share_file",
    "shamir_file",
]

PathLike = str | os.PathLike

_F64 = np.dtype("<f8")


def share_file(party: int) -> str:
    """Name of party ``party``'s threshold secret share file (written by :func:`round2`)."""
    return f"threshold-share-{int(party)}.key"


def shamir_file(sender: int, recipient: int) -> str:
    """Name of the Shamir share that party ``sender`` deals to party ``recipient`` in :func:`round1`."""
    return f"shamir-{int(sender)}-to-{int(recipient)}.share"


def init_setup(
    path: PathLike,
    *,
    parties: int,
    threshold: int,
    dim: int,
    preset: str = "default",
    kappa: int = DEFAULT_KAPPA,
    strategy: str = "auto",
    n1: int = 0,
    rotations: Iterable[int] = (),
    fold: bool | None = None,
) -> dict:
    """Write the public description of a ``threshold``-out-of-``parties`` setup to ``path``.

    ``strategy`` picks the rotation keys of a similarity strategy (as
    :meth:`encmatch.Client.generate`), or ``"none"``; ``rotations`` adds
    more. ``fold``: a folded key set (as ``Client.generate``: half the
    diagonals, plus the collective conjugation key); ``None`` (the default)
    folds, as every threshold preset can; ``False`` keeps the plain layout.
    Every party must use the same file. Returns ``{"setup", "params"}``.
    """
    if fold is not None and not isinstance(fold, bool):
        raise InvalidArgument(f"fold must be True, False or None, got {fold!r}")
    args = {"out": path, "parties": int(parties), "threshold": int(threshold), "preset": preset,
            "kappa": int(kappa), "dim": int(dim), "strategy": strategy, "n1": int(n1),
            "rotations": [int(r) for r in rotations]}
    if fold is not None:
        args["fold"] = fold
    return _core.call("threshold_init", args)[0]


def round1(setup: PathLike, party: int, private_dir: PathLike, bulletin_dir: PathLike) -> dict:
    """Party ``party``'s first round.

    Writes its public key-generation shares to ``bulletin_dir``, and to
    ``private_dir`` its round state and one Shamir share per party
    (:func:`shamir_file`), each to be delivered privately to its recipient.
    """
    return _party_call("threshold_round1", setup, party, private_dir, bulletin_dir)


def round2(setup: PathLike, party: int, private_dir: PathLike, bulletin_dir: PathLike,
           shares_dir: PathLike) -> dict:
    """Party ``party``'s second round, once every party's first round is on the bulletin.

    Reads the Shamir shares addressed to it from ``shares_dir``; writes its
    second-round message to ``bulletin_dir`` and its threshold secret share
    (:func:`share_file`) to ``private_dir``.
    """
    return _party_call("threshold_round2", setup, party, private_dir, bulletin_dir, shares_dir)


def _party_call(method: str, setup: PathLike, party: int, private_dir: PathLike, bulletin_dir: PathLike,
                shares_dir: PathLike | None = None) -> dict:
    """One setup round of a party, its directories created if needed."""
    for d in (private_dir, bulletin_dir):
        Path(d).mkdir(parents=True, exist_ok=True)
    Path(private_dir).chmod(0o700)
    args = {"setup": setup, "party": int(party), "private_dir": private_dir, "bulletin_dir": bulletin_dir}
    if shares_dir is not None:
        args["shares_dir"] = shares_dir
    return _core.call(method, args)[0]


def finalize(setup: PathLike, bulletin_dir: PathLike, key_dir: PathLike) -> dict:
    """Aggregate every party's messages into a server key directory ``key_dir`` (must not exist or be empty)."""
    return _core.call("threshold_finalize", {"setup": setup, "bulletin_dir": bulletin_dir, "key_dir": key_dir})[0]


def encrypt(key_dir: PathLike, values: np.ndarray | Sequence[float]) -> bytes:
    """Encrypt real values under a (collective) public key: one ciphertext per row of ``values``.

    ``values`` is 1-D (one ciphertext) or 2-D ``[rows, cols]`` with at most
    one value per slot. Returns the framed ciphertexts (for tests and
    measurements: decryptors share only bound search results, so they
    refuse these).
    """
    arr = np.asarray(values, dtype=_F64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.size == 0:
        raise InvalidArgument(f"values: expected a non-empty 1-D or 2-D array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InvalidArgument("values: NaN or infinite values")
    arr = np.ascontiguousarray(arr)
    _, out = _core.call("threshold_encrypt", {"key_dir": key_dir, "rows": arr.shape[0], "cols": arr.shape[1]}, arr)
    return out or b""


def generate_signing_key(directory: PathLike) -> dict:
    """Make the server's signing key pair in ``directory``: ``server-signing.key`` (the server's only) and ``server-signing.pub``.

    Give ``server-signing.pub`` to every decryptor (:class:`Decryptor`):
    they share only searches signed with this key. An existing key pair is
    never overwritten (:class:`~encmatch.errors.Exists`). Returns
    ``{"key", "public", "public_hex"}``.
    """
    info, _ = _core.call("threshold_signing_keygen", {"dir": directory})
    return info


def signing_key_public(signing_key: PathLike) -> str:
    """The public key (hex) of the server signing key ``signing_key``, loaded and checked."""
    info, _ = _core.call("threshold_signing_public", {"signing_key": signing_key})
    return str(info["public_hex"])


def _check_bytes(**values: object) -> None:
    """InvalidArgument unless every value is bytes-like."""
    for name, v in values.items():
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"{name} must be bytes, not {type(v).__name__}")


def bind_search(key_dir: PathLike, query: bytes, result: bytes, *, signing_key: PathLike, index: str,
                generation: int = 0) -> tuple[bytes, dict]:
    """Bind a search ``result`` to its ``query`` and sign it for the decryptors: the only input they share.

    The server's step, for a result it computed itself (a sharded search's
    merged result; a single server signs in :meth:`encmatch.Server.search`
    directly). Never sign bytes someone else hands you: a querier can make
    a "result" from its own probe with public operations, and the
    signature is all that tells the decryptors it is not one.

    ``key_dir`` is the server key directory (from :func:`finalize`);
    ``query`` the bytes the querier sent, ``result`` the complete result
    computed for it; ``signing_key`` the server's ``server-signing.key``;
    ``index`` and ``generation`` name the index searched. The core checks
    that the query is a query and the result a complete result of the key
    set at the result level, frames both with a transcript hash over them,
    the index, generation, mode and key set, and signs the transcript.
    Returns ``(bound bytes, info)``, info ``{"transcript", "mode", "index",
    "generation", "signer", "bytes"}``.
    """
    _check_bytes(query=query, result=result)
    if not isinstance(index, str) or not index:
        raise InvalidArgument("index: a non-empty index id is required")
    buf = struct.pack("<Q", len(query)) + bytes(query) + struct.pack("<Q", len(result)) + bytes(result)
    info, out = _core.call("threshold_bind", {"key_dir": key_dir, "signing_key": signing_key, "index": index,
                                              "generation": int(generation)}, buf)
    return out or b"", info


def _flooding_args(flooding_bits: float | None, noise_bits: float | None, precision_bits: float | None) -> dict:
    """The optional flooding choices as core arguments (absent = the core's default)."""
    args = {}
    for name, v in (("flooding_bits", flooding_bits), ("noise_bits", noise_bits), ("precision_bits", precision_bits)):
        if v is not None:
            if not v > 0:
                raise InvalidArgument(f"{name} must be positive, got {v}")
            args[name] = float(v)
    return args


class Decryptor:
    """Decryptor ``party``: holds its threshold secret share and makes decryption shares.

    Its journal (``decryption-journal-<i>.bin`` beside the share file)
    records every search it has shared, durably, before the share is
    returned; keep it with the share file.
    """

    def __init__(self, share_path: PathLike, server_public: PathLike):
        """Use the threshold secret share file ``share_path`` (``threshold-share-<i>.key``).

        ``server_public`` is the public signing key (``server-signing.pub``)
        of the server this decryptor trusts: it shares only searches that
        server signed.
        """
        self.share_path = Path(share_path)
        if not self.share_path.is_file():
            raise NotFound(f"threshold secret share {self.share_path} not found")
        self.server_public = Path(server_public)
        if not self.server_public.is_file():
            raise NotFound(f"the trusted server's public signing key {self.server_public} not found")

    def decrypt_share(
        self,
        ciphertext: bytes,
        parties: Iterable[int],
        receiver_public: PathLike,
        *,
        flooding_bits: float | None = None,
        noise_bits: float | None = None,
        precision_bits: float | None = None,
    ) -> tuple[bytes, dict]:
        """This decryptor's share of ``ciphertext``, a search result bound to its search and signed by the trusted server.

        Anything else (a threshold ciphertext, an unbound result, an encrypted
        probe however framed) is refused with
        :class:`~encmatch.errors.InvalidArgument`; a search signed by another
        key with :class:`~encmatch.errors.Mismatch`; a bound search that repeats
        a ciphertext (query or result) this decryptor has shared before, in
        this process or any earlier one, with
        :class:`~encmatch.errors.Exists`. ``parties`` are the ids of exactly ``t`` participants, this one among
        them; ``receiver_public`` is the receiver's ``receiver.pub``. The
        flooding is ``2**flooding_bits`` per decryptor (default: the secure
        size of papers/004 §5 if it fits, else the largest that still decodes
        within ``2**-precision_bits``); ``noise_bits`` states log2 of the
        ciphertext's noise bound. Returns ``(share bytes, info)``, info
        ``{"party", "parties", "flooding", "transcript", "journal", "index",
        "generation", "mode", "ciphertexts", "bytes", "seconds"}``.
        """
        args = {"share": self.share_path, "receiver_public": receiver_public, "server_public": self.server_public,
                "parties": [int(p) for p in parties], **_flooding_args(flooding_bits, noise_bits, precision_bits)}
        info, out = _core.call("threshold_decrypt_share", args, bytes(ciphertext))
        return out or b"", info


class Receiver:
    """The receiver: its own key pair, to which decryption shares switch the ciphertext."""

    def __init__(self, receiver_dir: PathLike):
        """Use the receiver directory ``receiver_dir`` (``receiver.key``, ``receiver.pub``)."""
        self.dir = Path(receiver_dir)
        if not (self.dir / "receiver.key").is_file():
            raise NotFound(f"no receiver key in {self.dir} (make one with Receiver.generate)")

    @classmethod
    def generate(cls, setup: PathLike, receiver_dir: PathLike) -> "Receiver":
        """Make a receiver key pair for ``setup`` in ``receiver_dir`` (must not exist or be empty)."""
        _core.call("threshold_receiver_keygen", {"setup": setup, "receiver_dir": receiver_dir})
        return cls(receiver_dir)

    @property
    def public_key(self) -> Path:
        """The file to give the decryptors."""
        return self.dir / "receiver.pub"

    def combine(self, ciphertext: bytes, shares: Sequence[bytes]) -> tuple[np.ndarray, dict]:
        """Decrypt ``ciphertext`` (the bound search the decryptors shared) from the shares of its ``t`` participants.

        Refuses fewer than ``t`` shares, two shares of one party, shares of
        other participants, ciphertexts, receivers or key sets. Returns
        ``(values, info)``: ``values`` float64 ``[ciphertexts, slots]``, info
        ``{"kind", "ciphertexts", "slots", "parties", "flooding", "seconds"}``
        and, for an encmatch search result, ``"answer"``: what
        :meth:`encmatch.Client.decrypt` returns (``mode``, ``count``,
        ``raw_count``, ``matches``...; a result that misses any gallery
        entry is refused).
        """
        buf = bytearray()
        for part in (ciphertext, *shares):
            buf += struct.pack("<Q", len(part)) + bytes(part)
        info, out = _core.call("threshold_combine", {"receiver_dir": self.dir}, bytes(buf))
        values = np.frombuffer(out or b"", dtype=_F64).reshape(info["ciphertexts"], info["slots"])
        return values, info
