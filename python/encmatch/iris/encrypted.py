"""Encrypted iris matching by role (papers/004's first algorithm on CPU, ``docs/IRIS.md``).

The roles work on files, so that they can run on different machines::

    from encmatch.iris import encrypted as E

    E.keygen("keys", preset="toy")                        # holder/, querier/, server/
    E.Client("keys").enroll(gallery, "db", t=0.34)     # encrypted database (the key holder enrolls)
    E.Querier("keys").encrypt(queries, "q.bin")           # 31 rotations per eye, public key only
    stats = E.Server("keys").search("db", "q.bin", "r.bin")  # one encrypted bit per eye
    values = E.Client("keys").decrypt("r.bin")         # 1.0: the eye matches, 0.0: it does not
    bits, uncertain = E.decide(values)                 # eyes near the threshold are flagged

``keys`` may be a key set's root (with ``holder/``, ``querier/`` and
``server/``) or the role's own directory, as each role receives only its
own. The server never holds a secret: the query public key encrypts, the
bootstrapping and rotation keys evaluate, and only the key holder's
``holder/`` decrypts. Masks travel in the clear (papers/004 §3.1); codes,
inner products, scores and which code or rotation matched do not.

Every eye outside the comparator's guard band decrypts to its plaintext
model bit (:func:`encmatch.iris.match`); :func:`validate` checks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._core import call
from ..errors import InvalidArgument, NotFound
from .encoding import DEFAULT_ROTATION_SHIFT, masked_bits, rotations
from .model import EyeResults
from .templates import Templates

__all__ = ["PRESETS", "DEFAULT_KEY_CACHE_GB", "DECIDED", "keygen", "Client", "Querier", "Server", "Validation", "validate",
           "decide", "role_dir"]

#: Parameter presets of the core (``toy`` is insecure, for tests only).
PRESETS = ("default", "default-dense", "toy")

#: An eye value within this distance of 0 or 1 is a decided bit. Eyes
#: outside the comparator's guard band decrypt to within 10^-4 of their
#: bit (docs/IRIS.md, "What is guaranteed"); a value farther from both is
#: an eye whose best pair lies inside the band, and is flagged, never
#: rounded silently.
DECIDED = 1e-3

#: GiB of the server's Galois keys kept in memory by default (all 39 of the
#: default preset's 0.15 GB keys, 14 of default-dense's 0.43 GB ones; the
#: core's ``iriskeys.DefaultKeyCache``).
DEFAULT_KEY_CACHE_GB = 6.0


def role_dir(keys: str | Path, role: str) -> Path:
    """The directory of ``role`` (``holder``, ``querier``, ``server``) in ``keys``.

    ``keys`` is either a key set's root or that role's directory itself.
    """
    keys = Path(keys)
    if (keys / role / "iris.json").is_file():
        return keys / role
    if (keys / "iris.json").is_file():
        return keys
    raise NotFound(f"{keys}: no iris key set (neither {keys / role / 'iris.json'} nor {keys / 'iris.json'})")


def keygen(keys: str | Path, preset: str = "default", kappa: int | None = None) -> dict:
    """Generate a key set in ``keys``: returns its metadata and the seconds it took."""
    if preset not in PRESETS:
        raise InvalidArgument(f"unknown iris preset {preset!r} (choose from {', '.join(PRESETS)})")
    Path(keys).mkdir(parents=True, exist_ok=True)
    res, _ = call("iris_keygen", {"dir": str(keys), "preset": preset, "kappa": kappa or 0})
    return res


def _codes(templates: Templates) -> np.ndarray:
    """The masked codes ``c' = m (1 - 2c)`` of templates as int8 ``[n, l]``."""
    codes, masks = templates.bits()
    return masked_bits(codes, masks).reshape(len(templates), -1).astype(np.int8)


class Client:
    """The key holder (the iris counterpart of :class:`encmatch.Client`): enrolls databases and decrypts
    results (``holder/``). Its threshold is ``t``, the iris paper's fractional Hamming distance below
    which a pair matches (a distance, where the face search's ``delta`` is a similarity)."""

    def __init__(self, keys: str | Path):
        """Use the key holder's directory in ``keys``."""
        self.dir = role_dir(keys, "holder")

    def enroll(self, gallery: Templates, db: str | Path, t: float) -> dict:
        """Encrypt ``gallery`` into the new database directory ``db`` with threshold ``t``.

        A pair matches when its fractional Hamming distance is below ``t``;
        ``t`` belongs to the database and no query can change it.
        """
        if not 0 < t < 1:
            raise InvalidArgument(f"threshold t = {t}: a fractional Hamming distance in (0, 1)")
        codes = _codes(gallery)
        res, _ = call("iris_enroll", {"holder": str(self.dir), "db": str(db), "t": float(t),
                                      "rows": codes.shape[0], "length": codes.shape[1]}, codes)
        return res

    def decrypt(self, result: str | Path) -> np.ndarray:
        """The value of every eye of an encrypted result: 1 matches, 0 does not."""
        res, _ = call("iris_decrypt", {"holder": str(self.dir), "result": str(result)})
        return np.asarray(res["values"], dtype=np.float64)

    def band(self, t: float) -> float:
        """The comparator's guard band on the normalised margin at threshold ``t`` (this key set's depth)."""
        res, _ = call("iris_band", {"keys": str(self.dir), "t": float(t)})
        return float(res["margin_band"])


class Querier:
    """A querier: encrypts query eyes under the public key (``querier/``)."""

    def __init__(self, keys: str | Path):
        """Use the querier's directory in ``keys``."""
        self.dir = role_dir(keys, "querier")

    def encrypt(self, queries: Templates, out: str | Path, rotation_shift: int = DEFAULT_ROTATION_SHIFT) -> dict:
        """Encrypt every eye of ``queries`` at its ``2 * rotation_shift + 1`` rotations into ``out``."""
        if len(queries) == 0:
            raise InvalidArgument("no query eye to encrypt")
        codes, masks = queries.bits()
        rc, rm = rotations(codes, masks, rotation_shift)
        rows = masked_bits(rc, rm).reshape(-1, queries.bit_length).astype(np.int8)
        res, _ = call("iris_encrypt_query", {"querier": str(self.dir), "out": str(out), "rows": rows.shape[0],
                                             "length": rows.shape[1], "rotations": 2 * rotation_shift + 1}, rows)
        return res


class Server:
    """The matching server: evaluation keys only (``server/``)."""

    def __init__(self, keys: str | Path):
        """Use the server's directory in ``keys``."""
        self.dir = role_dir(keys, "server")

    def search(self, db: str | Path, query: str | Path, out: str | Path, key_cache_gb: float = DEFAULT_KEY_CACHE_GB) -> dict:
        """Search an encrypted database with an encrypted query (every eye against every code, at every
        rotation); the encrypted result goes to ``out``.

        ``key_cache_gb`` bounds the memory of the Galois keys (GiB; the rest
        stay on disk and are read when needed: 5.5 GiB of them at the
        default preset, which the default budget holds whole; 16 GiB at
        default-dense). Returns the stage timings (``stage_wall_seconds``: each
        stage runs on all cores), counts (half-bootstraps, bootstraps) and the
        key cache's loads.
        """
        if not key_cache_gb > 0:
            raise InvalidArgument(f"key cache of {key_cache_gb} GiB: give a positive size")
        res, _ = call("iris_match", {"server": str(self.dir), "db": str(db), "query": str(query), "out": str(out),
                                     "key_cache_gb": float(key_cache_gb)})
        return res


@dataclass
class Validation:
    """Encrypted values against the plaintext model (:func:`validate`)."""

    values: np.ndarray  # decrypted value per eye
    bits: np.ndarray  # the model's bit per eye
    guard: np.ndarray  # eyes inside the guard band (the model's best margin within the band)
    band: float  # the band on the normalised margin
    disagreements: list[int]  # eyes outside the guard band whose rounded value differs from the model
    uncertain: list[int]  # eyes whose value is not decided (see decide)

    @property
    def ok(self) -> bool:
        """True when every eye outside the guard band agrees with the model
        and only eyes inside it are undecided."""
        return not self.disagreements and not any(not self.guard[e] for e in self.uncertain)

    def to_dict(self) -> dict:
        """A JSON-ready summary."""
        return {
            "eyes": len(self.bits), "matches": int(self.bits.sum()), "guard_band_eyes": np.flatnonzero(self.guard).tolist(),
            "band": self.band, "disagreements": self.disagreements, "uncertain": self.uncertain, "ok": self.ok,
            "values": [round(float(v), 6) for v in self.values],
        }


def decide(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each eye's bit (value >= 0.5) and the eyes whose value is not
    decided: farther than :data:`DECIDED` from both 0 and 1 (an eye whose
    best pair lies inside the comparator's guard band). Returns
    ``(bits, uncertain)``, uncertain as sorted eye indices."""
    values = np.asarray(values, dtype=np.float64)
    near = np.minimum(np.abs(values), np.abs(values - 1))
    return values >= 0.5, np.flatnonzero(~(near <= DECIDED))


def validate(values: np.ndarray, model: EyeResults, band: float) -> Validation:
    """Compare decrypted eye values with the model's bits outside the guard band ``band``.

    An eye agrees when its value rounds to the model's bit; eyes whose
    best margin lies within ``band`` of 0 may read anything in [0, 1].
    """
    values = np.asarray(values, dtype=np.float64)
    if values.shape != model.bits.shape:
        raise InvalidArgument(f"{values.shape[0]} decrypted eyes, the model has {model.bits.shape[0]}")
    guard = np.zeros(len(values), dtype=bool)
    guard[model.guard_band(band)] = True
    wrong = [int(e) for e in np.flatnonzero((np.rint(values) != model.bits) & ~guard)]
    uncertain = [int(e) for e in decide(values)[1]]
    return Validation(values=values, bits=model.bits.astype(bool), guard=guard, band=band, disagreements=wrong,
                      uncertain=uncertain)
