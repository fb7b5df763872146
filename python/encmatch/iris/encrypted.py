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
model bit (:func:`encmatch.iris.match`); :func:`validate` checks it. The
server discretises every result (docs/IRIS.md, "Discretisation"), so an
eye inside the band decrypts to 0 or 1 too, never a value between (except
at presets without sparse-secret encapsulation, ``default-dense``).

The folding presets (``fold``, 128-bit, and ``toy-fold``) run papers/004's
second algorithm (docs/IRIS.md, "Folding"): the database is enrolled with a
fold design for its threshold (computed by :func:`encmatch.iris.folding.design`
unless one is given), the server's match returns a *sure* and a *maybe* bit
per eye, and :meth:`FoldValues.answers` reads each eye as a match, no
match, or flagged. Flagged eyes go through the pair pass (every pair
classified alone)::

    fold = E.Client("keys").decrypt(E.Server("keys").search("db", "q.bin", "r.bin", product="p.bin"))
    flagged = fold.flagged()                                   # eyes the fold cannot call cleanly
    pairs = E.Client("keys").decrypt(E.Server("keys").search("db", "q.bin", "r2.bin", pair_eyes=flagged,
                                                             product="p.bin"))
    bits, uncertain = E.combine(fold, pairs)

``product`` (optional, the server's own file) keeps the encrypted product
between the two passes, so that the pair pass does not read the database
again (146 MB for four eyes against 2^14 codes at ``fold``).

The pair pass's eye list is seen by the server: it learns which eyes were
flagged (docs/IRIS.md, "What the server learns from the pair pass").
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._core import call
from ..errors import InvalidArgument, NotFound
from .encoding import DEFAULT_ROTATION_SHIFT, masked_bits, rotations
from .model import EyeResults
from .templates import Templates

__all__ = ["PRESETS", "FOLD_PRESETS", "FOLD_DESIGN", "FOLD_GUARD", "DEFAULT_KEY_CACHE_GB", "DECIDED", "MATCH", "NO_MATCH", "FLAGGED",
           "keygen", "Client", "Enroller", "Querier", "Server", "FoldValues", "Validation", "validate", "validate_fold", "decide",
           "combine", "role_dir", "preset_of"]

#: Parameter presets of the core (``toy`` and ``toy-fold`` are insecure, for tests only).
PRESETS = ("default", "default-dense", "fold", "toy", "toy-fold")

#: The presets that run papers/004's second algorithm (folding).
FOLD_PRESETS = ("fold", "toy-fold")

#: The fold design's parameters (:func:`encmatch.iris.folding.design`) that
#: fit the folding presets' comparator at depth 12 (docs/IRIS.md, "Designs
#: that fit"): a second polynomial of degree 31 decides *maybe*.
FOLD_DESIGN = {"maybe_degree": 31, "maybe_top": 2.0, "maybe_clear": -0.10, "sure_tolerance": 7.2, "tolerance": 0.29}

#: The fold design's guard band on the score (:func:`encmatch.iris.folding.design`'s ``guard``): a clean
#: fold answer equals the model for every eye whose best score is farther than this from the threshold.
FOLD_GUARD = 0.005

#: The three answers of a fold pass (:meth:`FoldValues.answers`).
NO_MATCH, MATCH, FLAGGED = 0, 1, 2

#: An eye value within this distance of 0 or 1 is a decided bit. Eyes
#: outside the comparator's guard band decrypt to within 10^-4 of their
#: bit (docs/IRIS.md, "What is guaranteed"); a value farther from both
#: (only from a result that was not discretised: ``default-dense``) is an
#: eye whose best pair lies inside the band, and is flagged, never rounded
#: silently.
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


def preset_of(keys: str | Path, role: str = "holder") -> str:
    """The preset of the key set in ``keys`` (its root or ``role``'s directory)."""
    return json.loads((role_dir(keys, role) / "iris.json").read_text())["preset"]


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

    def enroll(self, gallery: Templates, db: str | Path, t: float, design: dict | None = None) -> dict:
        """Encrypt ``gallery`` into the new database directory ``db`` with threshold ``t``.

        A pair matches when its fractional Hamming distance is below ``t``;
        ``t`` belongs to the database and no query can change it. A folding
        preset enrolls with a fold design for ``t`` (``FoldDesign.to_dict()``,
        or the JSON ``encmatch iris fold -o`` writes); without one it is
        computed with :data:`FOLD_DESIGN` (a few seconds). The core checks it
        against the preset's comparator and refuses one for another ``t``.
        """
        if not 0 < t < 1:
            raise InvalidArgument(f"threshold t = {t}: a fractional Hamming distance in (0, 1)")
        preset = preset_of(self.dir)
        folds = preset in FOLD_PRESETS
        if design is not None and not folds:
            raise InvalidArgument(f"preset {preset} does not fold: it takes no fold design")
        if folds and design is None:
            from .folding import design as fold_design

            design = fold_design(t, **FOLD_DESIGN).to_dict()
        codes = _codes(gallery)
        res, _ = call("iris_enroll", {"holder": str(self.dir), "db": str(db), "t": float(t),
                                      "rows": codes.shape[0], "length": codes.shape[1],
                                      "design": None if design is None else json.dumps(design)}, codes)
        return res

    def decrypt(self, result: str | Path) -> np.ndarray | FoldValues:
        """The value of every eye of an encrypted result: 1 matches, 0 does not; for a folding
        key set, the result's :class:`FoldValues`."""
        res, _ = call("iris_decrypt", {"holder": str(self.dir), "result": str(result)})
        if res["fold"] is not None:
            f = res["fold"]
            return FoldValues(pairs=f["pass"] == "pairs", eyes=f["eyes"], listed=np.asarray(f["listed"], dtype=np.int64),
                              sure=np.asarray(f["sure"], dtype=np.float64),
                              maybe=None if f["maybe"] is None else np.asarray(f["maybe"], dtype=np.float64))
        return np.asarray(res["values"], dtype=np.float64)

    def band(self, t: float) -> float:
        """The comparator's guard band on the normalised margin at threshold ``t`` (this key set's depth)."""
        res, _ = call("iris_band", {"keys": str(self.dir), "t": float(t)})
        return float(res["margin_band"])


class Enroller:
    """A threshold key set's enroller (``enroller/``, from ``encmatch iris setup finalize``): it holds
    public material only. Its enrollment leaves the database pending until every party has sent its
    contribution (:func:`encmatch.iris.setup.contribute`) and :meth:`complete` has added them; only
    then does a server load it."""

    def __init__(self, keys: str | Path):
        """Use the enroller's directory in ``keys``."""
        self.dir = role_dir(keys, "enroller")

    def enroll(self, gallery: Templates, db: str | Path, t: float) -> dict:
        """Start enrolling ``gallery`` into the new database directory ``db`` with threshold ``t``
        (as :meth:`Client.enroll`). Returns ``{"meta", "seconds"}``."""
        if not 0 < t < 1:
            raise InvalidArgument(f"threshold t = {t}: a fractional Hamming distance in (0, 1)")
        codes = _codes(gallery)
        res, _ = call("iris_enroll_public", {"enroller": str(self.dir), "db": str(db), "t": float(t),
                                             "rows": codes.shape[0], "length": codes.shape[1]}, codes)
        return res

    def complete(self, db: str | Path, contributions: list[str | Path]) -> dict:
        """Finish the pending database ``db`` from every party's contribution file (one each)."""
        res, _ = call("iris_complete", {"enroller": str(self.dir), "db": str(db),
                                        "contributions": [str(c) for c in contributions]})
        return res


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

    def search(self, db: str | Path, query: str | Path, out: str | Path, key_cache_gb: float = DEFAULT_KEY_CACHE_GB,
               pair_eyes: list[int] | np.ndarray | None = None, product: str | Path | None = None) -> dict:
        """Search an encrypted database with an encrypted query (every eye against every code, at every
        rotation); the encrypted result goes to ``out``.

        With a folding database this is the fold pass, or with ``pair_eyes``
        (the query's eye indices, e.g. :meth:`FoldValues.flagged`) the pair
        pass on those eyes; its stage timings are under ``fold``. With
        ``product`` (a folding database), the fold pass keeps its encrypted
        product in that file and the pair pass reads it instead of
        multiplying again (``product_from_file``); a product of another
        query or database is refused.

        ``key_cache_gb`` bounds the memory of the Galois keys (GiB; the rest
        stay on disk and are read when needed: 5.5 GiB of them at the
        default preset, which the default budget holds whole; 16 GiB at
        default-dense). Returns the stage timings (``stage_wall_seconds``: each
        stage runs on all cores), counts (half-bootstraps, bootstraps) and the
        key cache's loads.
        """
        if not key_cache_gb > 0:
            raise InvalidArgument(f"key cache of {key_cache_gb} GiB: give a positive size")
        eyes = None
        if pair_eyes is not None:
            eyes = sorted({int(e) for e in pair_eyes})
            if not eyes:
                raise InvalidArgument("the pair pass needs at least one eye")
        res, _ = call("iris_match", {"server": str(self.dir), "db": str(db), "query": str(query), "out": str(out),
                                     "key_cache_gb": float(key_cache_gb), "pair_eyes": eyes,
                                     "product": "" if product is None else str(product)})
        return res


@dataclass
class FoldValues:
    """A decrypted folding result: the fold pass's sure and maybe bits of every eye, or the pair pass's
    bit (in ``sure``) of each listed eye."""

    pairs: bool  # the pair pass
    eyes: int  # eyes of the query
    listed: np.ndarray  # the query's indices of the eyes below
    sure: np.ndarray
    maybe: np.ndarray | None  # None for the pair pass

    def answers(self) -> np.ndarray:
        """Each listed eye's answer of a fold pass: :data:`MATCH` (a decided sure bit),
        :data:`NO_MATCH` (both bits decided 0) or :data:`FLAGGED` (anything else: a bit inside its
        comparator's band can only flag an eye, never answer it)."""
        if self.pairs:
            raise InvalidArgument("a pair pass's result has bits, not fold answers: use combine")
        out = np.full(len(self.sure), FLAGGED, dtype=np.int8)
        out[self.sure >= 1 - DECIDED] = MATCH
        out[(self.sure <= DECIDED) & (self.maybe <= DECIDED)] = NO_MATCH
        return out

    def flagged(self) -> list[int]:
        """The query's eyes a fold pass flagged: the pair pass's list."""
        return [int(self.listed[i]) for i in np.flatnonzero(self.answers() == FLAGGED)]

    def pair_eyes(self, pad_to: int = 0) -> list[int]:
        """The pair pass's list, padded: the flagged eyes and, while the list is shorter than ``pad_to``,
        unflagged eyes drawn uniformly at random (the operating system's randomness), sorted.

        The server sees the list. Padded to ``pad_to``, it learns whether more than ``pad_to`` eyes
        were flagged, not which (``pad_to`` = the query's eyes hides even that); each padded eye costs
        a pair pass. :func:`combine` keeps a padded eye's fold answer.
        """
        if not 0 <= pad_to <= self.eyes:
            raise InvalidArgument(f"pad_to = {pad_to}: between 0 and the query's {self.eyes} eyes")
        flagged = self.flagged()
        others = sorted(set(range(self.eyes)) - set(flagged))
        extra = secrets.SystemRandom().sample(others, max(0, pad_to - len(flagged)))
        return sorted(flagged + extra)


def combine(fold: FoldValues, pairs: FoldValues | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every eye's bit from a fold pass and the pair pass on its flagged eyes (and any padding,
    :meth:`FoldValues.pair_eyes`).

    Returns ``(bits, undecided)``: ``undecided`` lists the eyes without a
    decided bit: flagged eyes when ``pairs`` is None, eyes whose pair bit
    lies inside the comparator's band (:func:`decide`), and padded eyes
    whose decided pair bit contradicts their fold answer (one of the two
    lies in its band). A padded eye keeps its fold answer. Refuses a pair
    pass that does not cover every flagged eye.
    """
    if fold.pairs or (pairs is not None and not pairs.pairs) or (pairs is not None and pairs.eyes != fold.eyes):
        raise InvalidArgument("combine takes a fold pass's result and a pair pass's on the same query")
    answers = fold.answers()
    bits = answers == MATCH
    flagged = fold.flagged()
    if pairs is None:
        return bits, np.asarray(flagged, dtype=np.int64)
    listed = pairs.listed.tolist()
    if not set(flagged) <= set(listed):
        raise InvalidArgument(f"the pair pass covers eyes {listed}, the fold flagged {flagged}")
    pbits, uncertain = decide(pairs.sure)
    undecided = set(pairs.listed[uncertain].tolist())
    for e, b in zip(listed, pbits):
        if answers[e] == FLAGGED:
            bits[e] = b
        elif e not in undecided and b != bits[e]:
            undecided.add(e)
    return bits, np.array(sorted(undecided), dtype=np.int64)


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


def validate_fold(fold: FoldValues, pairs: FoldValues | None, model: EyeResults, guard: float, band: float) -> Validation:
    """Compare a folding result with the model: every clean fold answer outside the design's guard
    ``guard`` (on the score) and every pair bit outside ``band`` (the pair comparator's, on the score).

    ``values`` of the returned :class:`Validation` are the combined bits (a
    flagged eye without a pair bit reads 0.5 and counts as undecided).
    """
    bits, undecided = combine(fold, pairs)
    values = bits.astype(np.float64)
    answers = fold.answers()
    if pairs is None:
        values[answers == FLAGGED] = 0.5
    else:
        values[pairs.listed] = np.where(answers[pairs.listed] == FLAGGED, pairs.sure, values[pairs.listed])
    clean_guard = np.zeros(len(values), dtype=bool)
    clean_guard[model.guard_band(guard, unit="score")] = True
    pair_guard = np.zeros(len(values), dtype=bool)
    pair_guard[model.guard_band(band, unit="score")] = True
    guard_eyes = np.where(answers == FLAGGED, pair_guard, clean_guard)
    skip = set(undecided.tolist())
    wrong = [int(e) for e in np.flatnonzero((bits != model.bits) & ~guard_eyes) if e not in skip]
    return Validation(values=values, bits=model.bits.astype(bool), guard=guard_eyes, band=band, disagreements=wrong,
                      uncertain=[int(e) for e in undecided])


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
