"""Embedding files and test scenarios built from real faces.

- :func:`find_data_dir` locates the shared face data (``shared/data`` next
  to the repository; ``$ENCMATCH_DATA`` overrides). The data is not part of
  the project and is never redistributed with it.
- :func:`load_faces` reads one embedding set (``lfw``/``orl``, ``mfn``/``dlib``).
- :func:`load_vectors` / :func:`load_labels` read user ``.npy``/``.npz`` files;
  :func:`load_records` reads records with payloads (a ``.npz`` of
  ``vectors`` and ``payloads``, or a ``.npy`` of vectors and one of payloads).
- :func:`build_scenario` makes a gallery (one image per enrolled identity,
  padded to a full group with impostors) and queries (other images of
  enrolled people, and people who are not enrolled), as the demo and
  :mod:`encmatch.evaluation.validate` use.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from .errors import Corrupt, EncmatchError, InvalidArgument, NotFound

__all__ = [
    "find_data_dir",
    "separated_gallery",
    "FaceSet",
    "load_faces",
    "load_vectors",
    "load_labels",
    "load_records",
    "is_records_file",
    "Scenario",
    "build_scenario",
]

#: Environment variable naming the data directory (the one holding ``lfw/`` and ``orl/``).
DATA_ENV = "ENCMATCH_DATA"


def find_data_dir(required: bool = True) -> Path | None:
    """Locate the shared face data directory.

    ``$ENCMATCH_DATA`` wins; otherwise the first ``shared/data`` found
    walking up from the current directory, then from this package (the
    repository sits beside ``shared/``). Raises NotFound (or returns
    ``None`` when not ``required``) if there is none.
    """
    env = os.environ.get(DATA_ENV)
    if env:
        path = Path(env).expanduser()
        if path.is_dir():
            return path
        if required:
            raise NotFound(f"${DATA_ENV} points to {path}, which is not a directory")
        return None
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for base in (start, *start.parents):
            candidate = base / "shared" / "data"
            if candidate.is_dir():
                return candidate
    if required:
        raise NotFound(f"cannot find the face data (shared/data next to the repository); set ${DATA_ENV}")
    return None


@dataclass(frozen=True)
class FaceSet:
    """Labelled face embeddings: ``emb`` float32 ``[n, d]`` (L2-normalised), ``label`` int ``[n]``, ``names``."""

    emb: np.ndarray
    label: np.ndarray
    names: np.ndarray
    source: str = ""

    @property
    def name(self) -> np.ndarray:
        """Identity name of every face."""
        return self.names[self.label]

    def __len__(self) -> int:
        """Number of faces."""
        return len(self.emb)


#: The file-name tag of a face model's embeddings in the data directory (``embeddings_<tag>.npz``).
_FILE_TAGS = {"mobilefacenet": "mfn"}


def load_faces(dataset: str = "lfw", model: str = "mfn", data_dir: Path | None = None) -> FaceSet:
    """Load ``<data>/<dataset>/embeddings_<model>.npz`` (e.g. ``lfw``/``mfn``: 13,233 faces, 192-d);
    ``model`` is a face model's name (``mobilefacenet``, ``dlib``) or its file tag (``mfn``)."""
    tag = _FILE_TAGS.get(model, model)
    path = Path(data_dir or find_data_dir()) / dataset / f"embeddings_{tag}.npz"
    return load_faceset_file(path)


def load_faceset_file(path: str | os.PathLike) -> FaceSet:
    """Load a labelled ``.npz`` (``emb``, and ``label``+``names`` or ``name``; unlabelled rows become their own identity)."""
    path = Path(path)
    if path.suffix.lower() != ".npz":
        raise InvalidArgument(f"{path}: a labelled set is a .npz file (emb, and label + names or name)")
    with _reading(path), np.load(path, allow_pickle=False) as z:
        if "emb" not in z.files:
            raise InvalidArgument(f"{path}: no 'emb' array (found {', '.join(z.files) or 'none'})")
        emb = np.asarray(z["emb"], dtype=np.float32)
        if "label" in z.files and "names" in z.files:
            label, names = np.asarray(z["label"], dtype=np.int64), np.asarray(z["names"]).astype(str)
        elif "name" in z.files:
            names, label = np.unique(np.asarray(z["name"]).astype(str), return_inverse=True)
        else:
            label = np.arange(len(emb))
            names = np.array([f"row-{i}" for i in range(len(emb))])
    if emb.ndim != 2 or len(label) != len(emb):
        raise InvalidArgument(f"{path}: 'emb' must be [n, d] with one label per row")
    return FaceSet(emb=emb, label=label, names=names, source=str(path))


def load_vectors(path: str | os.PathLike, field: str = "emb") -> np.ndarray:
    """Read vectors from a ``.npy`` file or from array ``field`` of a ``.npz`` file."""
    return _load_array(path, field)


def load_optional(path: str | os.PathLike, field: str) -> np.ndarray | None:
    """Array ``field`` of a ``.npz``, or ``None`` when the file has no such array; the errors of
    :func:`load_vectors` for a file that cannot be read."""
    path = Path(path)
    with _reading(path), np.load(path, allow_pickle=False) as z:
        return np.asarray(z[field]) if field in z.files else None


def load_labels(path: str | os.PathLike, field: str) -> list[str]:
    """Read per-row labels from array ``field`` of a ``.npz`` (int labels are mapped through ``names`` when present)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise InvalidArgument(f"labels can only be read from a .npz file, not {path.name}")
    values = _load_array(path, field)
    if np.issubdtype(values.dtype, np.integer) and field == "label":
        with np.load(path, allow_pickle=False) as z:
            if "names" in z.files:
                values = np.asarray(z["names"])[values]
    return [str(x) for x in values.tolist()]


#: The arrays of a records ``.npz``: the vectors (``emb`` is accepted too) and their int16 payloads.
RECORD_VECTORS = ("vectors", "emb")
RECORD_PAYLOADS = "payloads"


def is_records_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a ``.npz`` holding a ``payloads`` array (records with payloads); the errors of
    :func:`load_vectors` for a file that cannot be read."""
    path = Path(path)
    if path.suffix.lower() != ".npz":
        return False
    with _reading(path), np.load(path, allow_pickle=False) as z:
        return RECORD_PAYLOADS in z.files


def load_records(path: str | os.PathLike, payloads: str | os.PathLike | None = None,
                 field: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read records: ``(vectors [n, d], payloads [n, W])``, as stored (checked by the enroller).

    Either a ``.npz`` holding ``vectors`` (or ``field``, or ``emb``) and
    ``payloads``, or a ``.npy``/``.npz`` of vectors with ``payloads`` naming
    a ``.npy`` of the payloads (or a ``.npz`` with a ``payloads`` array).
    A file that cannot be read is Corrupt/NotFound, as for
    :func:`load_vectors`; arrays that do not pair up (another number of
    rows) are InvalidArgument.
    """
    path = Path(path)
    vectors = None
    names = (field,) if field else RECORD_VECTORS
    if path.suffix.lower() == ".npz":
        for name in names:
            vectors = load_optional(path, name)
            if vectors is not None:
                break
        if vectors is None:
            raise InvalidArgument(f"{path}: no array {' or '.join(repr(n) for n in names)} holding the vectors")
    else:
        vectors = load_vectors(path)
    if payloads is None:
        pays = load_optional(path, RECORD_PAYLOADS) if path.suffix.lower() == ".npz" else None
        if pays is None:
            raise InvalidArgument(f"{path}: no payloads (a .npz with 'vectors' and 'payloads' arrays, or "
                                  "--payloads FILE.npy)")
    else:
        pays = load_vectors(payloads, RECORD_PAYLOADS)
    vectors = np.asarray(vectors)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    pays = np.asarray(pays)
    if pays.ndim == 1 and len(vectors) == 1:
        pays = pays[None, :]
    if pays.ndim != 2 or len(pays) != len(vectors):
        raise InvalidArgument(f"{payloads or path}: payloads of shape {pays.shape} for {len(vectors)} vectors "
                              "(want one row of payload values per vector)")
    return vectors, pays


#: The first bytes of a NumPy ``.npy`` file and of a zip archive (``.npz``).
_MAGIC = {".npy": (b"\x93NUMPY",), ".npz": (b"PK\x03\x04", b"PK\x05\x06")}


def _load_array(path: str | os.PathLike, field: str) -> np.ndarray:
    """One array from a ``.npy`` or from ``field`` of a ``.npz``, with user-facing errors (:func:`_reading`)."""
    path = Path(path)
    with _reading(path):
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if field not in z.files:
                    raise InvalidArgument(f"{path}: no array {field!r} (found: {', '.join(z.files) or 'none'})")
                return np.asarray(z[field])
        return np.load(path, allow_pickle=False)


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Check that ``path`` is a ``.npy``/``.npz`` file by its name and first bytes, then run the block,
    turning every read failure into a user-facing error.

    A file that is not what its name says, truncated, corrupt, or holding
    pickled Python objects raises :class:`Corrupt` (never a zipfile or
    pickle error): encmatch reads plain numeric and string arrays only.
    """
    if not path.is_file():
        raise NotFound(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix not in _MAGIC:
        raise InvalidArgument(f"{path}: expected a .npy or .npz file")
    try:
        with open(path, "rb") as f:
            head = f.read(6)
        if not head.startswith(_MAGIC[suffix]):
            raise Corrupt(f"{path} is not a {suffix} file (empty, or its first bytes are not "
                          f"{'NumPy' if suffix == '.npy' else 'a zip archive'}'s)")
        yield
    except EncmatchError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc):
            raise Corrupt(f"{path} holds Python objects (pickled data), which encmatch does not load: "
                          "save plain numeric arrays (np.save / np.savez)") from None
        raise Corrupt(f"cannot read {path}: {exc} (truncated or corrupt?)") from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:
        raise Corrupt(f"cannot read {path}: {exc or type(exc).__name__} (truncated or corrupt?)") from None


def separated_gallery(rng: np.random.Generator, dim: int, n: int, people: int,
                      noise: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A gallery whose scores to the queries are far from any threshold in (0.3, 0.8).

    ``people`` orthogonal identities (``people <= dim``); each gallery
    entry is one identity plus a little noise; the queries are the
    identities themselves plus noise. Returns ``(gallery [n, dim],
    identity of each entry [n], queries [people, dim])``.
    """
    if people > dim:
        raise ValueError("people must be <= dim")
    basis = np.linalg.qr(rng.standard_normal((dim, dim)))[0][:people]
    who = rng.integers(0, people, n)
    gallery = basis[who] + noise * rng.standard_normal((n, dim)) / np.sqrt(dim)
    queries = basis + noise * rng.standard_normal((people, dim)) / np.sqrt(dim)
    return gallery.astype(np.float32), who, queries.astype(np.float32)


@dataclass
class Scenario:
    """A gallery and queries with known ground truth about who is enrolled.

    ``gallery_labels`` names each gallery position (identity name, or
    ``synthetic-NNNNN`` for random padding); ``query_enrolled[i]`` tells
    whether query ``i``'s identity has an image in the gallery.
    """

    gallery: np.ndarray
    gallery_labels: list[str]
    queries: np.ndarray
    query_names: list[str]
    query_enrolled: list[bool]
    counts: dict = field(default_factory=dict)

    def describe(self) -> str:
        """One-paragraph summary of the scenario."""
        c = self.counts
        return (
            f"gallery {len(self.gallery):,} vectors: {c.get('enrolled', 0):,} enrolled identities (one face each), "
            f"{c.get('padding_real', 0):,} other real faces, {c.get('padding_synthetic', 0):,} synthetic unit vectors; "
            f"queries: {sum(self.query_enrolled)} of enrolled people (other images), "
            f"{len(self.query_enrolled) - sum(self.query_enrolled)} of people not enrolled"
        )


def build_scenario(
    faces: FaceSet,
    size: int,
    n_known: int = 4,
    n_unknown: int = 4,
    n_enrolled: int | None = None,
    seed: int = 0,
) -> Scenario:
    """Build a gallery of ``size`` vectors and ``n_known + n_unknown`` queries from ``faces``.

    ``n_enrolled`` identities (default ``min(3000, size // 2)``) each get
    one image in the gallery; ``n_known`` of them (identities with at least
    two images) are queried with another image. ``n_unknown`` queries come
    from identities with no image in the gallery. The rest of the gallery is
    filled with other real faces not of any query identity, then synthetic
    random unit vectors. The gallery order is shuffled.
    """
    if size <= 0:
        raise InvalidArgument(f"gallery size must be positive, got {size}")
    rng = np.random.default_rng(seed)
    labels = faces.label
    ids, counts = np.unique(labels, return_counts=True)
    multi = ids[counts >= 2]
    n_known = min(n_known, len(multi), size)
    known = rng.choice(multi, n_known, replace=False) if n_known else np.array([], dtype=ids.dtype)
    others = np.setdiff1d(ids, known)
    n_unknown = min(n_unknown, len(others))
    unknown = rng.choice(others, n_unknown, replace=False) if n_unknown else np.array([], dtype=ids.dtype)

    by_id: dict[int, np.ndarray] = {}
    order = np.argsort(labels, kind="stable")
    splits = np.split(order, np.cumsum(counts)[:-1])
    for i, rows in zip(ids, splits):
        by_id[int(i)] = rows

    gallery_rows: list[int] = []
    query_rows: list[int] = []
    for i in known:
        rows = rng.permutation(by_id[int(i)])
        gallery_rows.append(int(rows[0]))
        query_rows.append(int(rows[1]))
    for i in unknown:
        query_rows.append(int(rng.choice(by_id[int(i)])))

    query_ids = set(int(i) for i in np.concatenate([known, unknown]))
    if n_enrolled is None:
        n_enrolled = min(3000, size // 2)
    n_enrolled = max(min(n_enrolled, size), n_known)
    candidates = rng.permutation(np.array([i for i in ids if int(i) not in query_ids], dtype=ids.dtype))
    for i in candidates[: max(0, n_enrolled - n_known)]:
        gallery_rows.append(int(rng.choice(by_id[int(i)])))
    n_enrolled_real = len(gallery_rows)

    taken = set(gallery_rows)
    pad = [
        int(r)
        for r in rng.permutation(len(labels))
        if int(labels[r]) not in query_ids and int(r) not in taken
    ][: max(0, size - len(gallery_rows))]
    gallery_rows.extend(pad)
    gallery = faces.emb[np.array(gallery_rows, dtype=np.int64)] if gallery_rows else np.zeros((0, faces.emb.shape[1]))
    gallery_labels = [str(faces.names[labels[r]]) for r in gallery_rows]

    n_synth = size - len(gallery_rows)
    if n_synth > 0:
        synth = rng.standard_normal((n_synth, faces.emb.shape[1]))
        synth /= np.linalg.norm(synth, axis=1, keepdims=True)
        gallery = np.vstack([gallery, synth])
        gallery_labels.extend(f"synthetic-{i:05d}" for i in range(n_synth))

    perm = rng.permutation(size)
    return Scenario(
        gallery=np.ascontiguousarray(gallery[perm], dtype=np.float32),
        gallery_labels=[gallery_labels[p] for p in perm],
        queries=np.ascontiguousarray(faces.emb[np.array(query_rows, dtype=np.int64)], dtype=np.float32),
        query_names=[str(faces.names[labels[r]]) for r in query_rows],
        query_enrolled=[True] * len(known) + [False] * len(unknown),
        counts={"enrolled": n_enrolled_real, "padding_real": len(pad), "padding_synthetic": max(0, n_synth)},
    )
