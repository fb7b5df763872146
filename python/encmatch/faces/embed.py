"""From photos to embeddings, a batch at a time, with a report of what was skipped.

:func:`embed_photos` runs every photo through :mod:`~encmatch.faces.images`
(reading), :mod:`~encmatch.faces.detect` (detection, alignment) and a model
(:mod:`~encmatch.faces.models`), with a progress bar. A photo that cannot be
used (unreadable, not an image, too large, no face, several faces under
``multiple="skip"``) is reported as a :class:`Problem` and the batch goes
on. :func:`collect` does the same for a mix of photos and ``.npy``/``.npz``
embedding files, as ``encmatch enroll`` and ``query`` take them.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from .._util.progress import progress as progress_bar

from .. import data as data_mod
from ..errors import EncmatchError, InvalidArgument
from .images import BadPhoto, Photo, find_photos, is_photo_path, load_image
from .models import DEFAULT_MODEL, FaceModel, load_model, model_spec
from .store import check_dim, check_model, file_model, save_embeddings

__all__ = ["MULTIPLE", "Problem", "Embedded", "embed_photos", "Collected", "collect"]

#: What to do with a photo showing several faces: embed the one nearest the centre, or skip the photo.
MULTIPLE = ("central", "skip")

#: Faces prepared before the model runs on them as a batch.
_CHUNK = 32


@dataclass(frozen=True)
class Problem:
    """Something wrong with one input: ``skipped`` inputs gave nothing, the others are notes."""

    path: str
    reason: str
    skipped: bool = True

    def __str__(self) -> str:
        return f"{'skipped' if self.skipped else 'note'}: {self.path}: {self.reason}"


@dataclass
class Embedded:
    """The embeddings of a batch of photos and what happened to each photo.

    ``emb`` (float32 ``[n, d]``, L2-normalised), ``ids``, ``files`` (as
    :attr:`Photo.name`), ``det`` (``hog``/``cnn``), ``faces`` (faces found
    in each photo), ``box`` (``[n, 4]`` left, top, right, bottom) and
    ``norm`` (raw model output norms) describe the embedded photos, one row
    each; ``problems`` the others and the notes; ``photos`` is how many
    photos were tried, ``seconds`` the wall time.
    """

    model: str
    emb: np.ndarray
    ids: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    det: list[str] = field(default_factory=list)
    faces: list[int] = field(default_factory=list)
    box: list[tuple[int, int, int, int]] = field(default_factory=list)
    norm: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    problems: list[Problem] = field(default_factory=list)
    photos: int = 0
    seconds: float = 0.0

    def __len__(self) -> int:
        """Number of embedded photos."""
        return len(self.ids)

    @property
    def skipped(self) -> list[Problem]:
        """The inputs that gave no embedding."""
        return [p for p in self.problems if p.skipped]

    def save(self, path: str | os.PathLike) -> Path:
        """Write the embeddings as an ``.npz`` (:func:`~encmatch.faces.store.save_embeddings`) to ``path``."""
        if not len(self):
            raise InvalidArgument("no face was embedded; nothing to write")
        return save_embeddings(
            path, self.emb, self.ids, self.model, file=np.array(self.files, dtype=str),
            det=np.array(self.det, dtype=str), faces=np.array(self.faces, dtype=np.int32),
            box=np.array(self.box, dtype=np.int32).reshape(-1, 4), norm=self.norm.astype(np.float32),
        )

    def summary(self) -> str:
        """One to three lines: how many photos were embedded, skipped and why (``skipped 2 input(s) (no face
        found: 2)``), the speed."""
        n, tried = len(self), self.photos
        per_face = f", {1000 * self.seconds / n:.0f} ms per photo" if n else ""
        lines = [f"embedded {n:,} of {tried:,} photo(s) with {self.model} ({self.emb.shape[1]}-d) "
                 f"in {self.seconds:.1f} s{per_face}"]
        several = sum(1 for p in self.problems if not p.skipped)
        if several:
            lines.append(f"{several} photo(s) showed several faces: the face nearest the centre was used")
        if self.skipped:
            why = Counter(_kind(p.reason) for p in self.skipped)
            lines.append(f"skipped {len(self.skipped)} input(s) (" + ", ".join(f"{k}: {v}" for k, v in why.most_common())
                         + ")")
        return "\n".join(lines)


def _kind(reason: str) -> str:
    """A reason shortened to its kind, for the summary's counts."""
    return reason.split(":")[0].split(" (")[0]


def embed_photos(
    inputs: Iterable[str | os.PathLike] | Sequence[Photo],
    model: str | FaceModel = DEFAULT_MODEL,
    *,
    ids: str = "auto",
    multiple: str = "central",
    progress: bool | None = None,
) -> Embedded:
    """Detect, align and embed the faces of photos (files or folders, see :func:`~encmatch.faces.images.find_photos`).

    ``model`` is a model name or a loaded :class:`FaceModel`; ``ids`` the
    naming rule (``auto``, ``folder``, ``file``); ``multiple`` what to do
    with photos showing several faces (:data:`MULTIPLE`). ``progress``
    shows a progress bar (default: on a terminal). Inputs that cannot be used
    are listed in :attr:`Embedded.problems`; nothing is raised for them.
    """
    if multiple not in MULTIPLE:
        raise InvalidArgument(f"unknown --multiple policy {multiple!r} (want one of {', '.join(MULTIPLE)})")
    t0 = time.perf_counter()
    items = list(inputs)
    if all(isinstance(p, Photo) for p in items):
        photos, missing = list(items), []
    else:
        photos, missing = find_photos(items, ids)
    fm = load_model(model) if isinstance(model, str) else model
    out = Embedded(model=fm.name, emb=np.zeros((0, fm.dim), np.float32), photos=len(photos))
    out.problems += [Problem(str(p), reason) for p, reason in missing]
    vectors, norms, pending = [], [], []

    def flush() -> None:
        if pending:
            emb, nrm = fm.embed(pending)
            vectors.append(emb)
            norms.append(nrm)
            pending.clear()

    finder = fm.finder
    for photo in progress_bar(photos, unit="photo", desc=f"embed ({fm.name})", show=progress is None or bool(progress)):
        where = str(photo.path)
        try:
            img = load_image(photo.path)
            faces = finder.detect(img)
            if not faces:
                out.problems.append(Problem(where, "no face found"))
                continue
            if len(faces) > 1:
                if multiple == "skip":
                    out.problems.append(Problem(where, f"several faces ({len(faces)}; --multiple skip)"))
                    continue
                out.problems.append(Problem(where, f"{len(faces)} faces: used the one nearest the centre", False))
            pending.append(fm.prepare(img, faces[0]))
        except BadPhoto as exc:
            out.problems.append(Problem(where, str(exc)))
            continue
        except (RuntimeError, MemoryError) as exc:
            out.problems.append(Problem(where, f"face pipeline failed: {exc}"))
            continue
        out.ids.append(photo.id)
        out.files.append(photo.name)
        out.det.append(faces[0].detector)
        out.faces.append(len(faces))
        out.box.append(faces[0].box)
        if len(pending) >= _CHUNK:
            flush()
    flush()
    if vectors:
        out.emb = np.vstack(vectors)
        out.norm = np.concatenate(norms)
    out.seconds = time.perf_counter() - t0
    return out


@dataclass
class Collected:
    """Vectors gathered from photos and embedding files, with labels, their model and the problems met.

    ``origins`` says where each row came from: ``FILE[row]`` (``FILE`` for
    a 1-D file) or a photo's id.
    """

    vectors: np.ndarray | None
    labels: list[str] | None
    model: str | None
    problems: list[Problem]
    embedded: Embedded | None = None
    origins: list[str] = field(default_factory=list)


def collect(
    inputs: Sequence[str | os.PathLike],
    *,
    dim: int | None,
    model: str | None = None,
    field: str = "emb",
    labels_from: str | None = None,
    ids: str = "auto",
    multiple: str = "central",
    progress: bool | None = None,
) -> Collected:
    """Gather vectors from a mix of photos (files, folders) and ``.npy``/``.npz`` embedding files.

    Photos are embedded with ``model`` (default :data:`DEFAULT_MODEL`) and
    labelled with their ids; embedding files are read from array ``field``
    (labels from array ``labels_from`` when given, else from ``name`` in
    files written by ``encmatch embed``). A file of the wrong
    dimension (``dim``, the key set's) or of another model than ``model``
    or than the other inputs is skipped with a :class:`Problem`, as are
    unusable photos; the rest is returned. ``model`` in the result is the
    model every tagged input agrees on (``None`` if nothing was tagged).
    """
    files = [Path(p) for p in inputs if not is_photo_path(p)]
    photo_args = [p for p in inputs if is_photo_path(p)]
    problems: list[Problem] = []
    parts: list[np.ndarray] = []
    labels: list[str | None] = []
    origins: list[str] = []
    known = model
    any_labels = False
    for path in files:
        try:
            if not path.exists():
                raise InvalidArgument("no such file or folder")
            if path.suffix.lower() not in (".npy", ".npz"):
                raise InvalidArgument("neither a photo nor a .npy/.npz embedding file")
            tag = file_model(path)
            check_model(known, tag, str(path))
            vecs = np.asarray(data_mod.load_vectors(path, field))
            flat = vecs.ndim == 1
            if flat:
                vecs = vecs[None, :]
            if vecs.ndim != 2:
                raise InvalidArgument(f"expected vectors [n, dim], got shape {vecs.shape}")
            check_dim(vecs.shape[1], tag, str(path))
            _check_key_dim(vecs.shape[1], dim)
            # Files written by `encmatch embed` (tagged with their model) carry their ids in "name".
            by = labels_from or ("name" if tag is not None else None)
            rows = data_mod.load_labels(path, by) if by else [None] * len(vecs)
            if len(rows) != len(vecs):
                raise InvalidArgument(f"{len(rows)} labels for {len(vecs)} vectors")
        except EncmatchError as exc:
            problems.append(Problem(str(path), str(exc)))
            continue
        known = known or tag
        dim = dim or vecs.shape[1]
        any_labels = any_labels or by is not None
        parts.append(vecs)
        labels += rows
        origins += [path.name] if flat else [f"{path.name}[{r}]" for r in range(len(vecs))]
    embedded = None
    if photo_args:
        use = known or DEFAULT_MODEL
        try:
            _check_key_dim(model_spec(use).dim, dim, f"the {use} model's dimension {model_spec(use).dim}")
        except EncmatchError as exc:
            problems += [Problem(str(p), f"{exc} (choose the model with --model)") for p in photo_args]
        else:
            embedded = embed_photos(photo_args, use, ids=ids, multiple=multiple, progress=progress)
            problems += embedded.problems
            if len(embedded):
                known = use
                any_labels = True
                parts.append(embedded.emb)
                labels += embedded.ids
                origins += list(embedded.ids)
    vectors = np.vstack(parts) if parts else None
    out_labels = [x or "" for x in labels] if any_labels and vectors is not None else None
    return Collected(vectors, out_labels, known, problems, embedded, origins)


def _check_key_dim(got: int, dim: int | None, what: str | None = None) -> None:
    """InvalidArgument unless ``got`` equals the expected dimension ``dim`` (when known)."""
    if dim is not None and got != dim:
        raise InvalidArgument(f"{what or f'dimension {got}'} does not match the keys' dimension {dim}")
