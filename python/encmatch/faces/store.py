"""Which model made a set of embeddings: recorded in embedding files and beside encrypted indexes.

Embeddings of two models live in different spaces (even two models of the
same dimension), so comparing them gives meaningless scores. The model's
name (:data:`encmatch.faces.models.MODELS`) is therefore written

- into every ``.npz`` that ``encmatch embed`` writes (array ``model``), and
- beside an index enrolled from tagged embeddings or photos
  (``<index>/face-model.json``; the core ignores the file),

and :func:`check_model` refuses to mix two different names. Files without
a record (``.npy``, the shared ``embeddings_*.npz``) are checked by their
dimension only.

:func:`check_output_file` checks where a command will write (its folder
exists and is writable, the path is not a folder) before any work is done,
so that a typo costs an error line, not a run.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import data as data_mod
from .._util.atomic import check_writable_folder
from ..errors import Corrupt, InvalidArgument, Mismatch
from ..errors import IOError as DiskError
from .models import model_spec

__all__ = [
    "MODEL_FIELD",
    "INDEX_MODEL_FILE",
    "save_embeddings",
    "check_output_file",
    "file_model",
    "check_model",
    "check_dim",
    "index_model",
    "record_index_model",
]

#: Name of the array holding the model's name in an embedding ``.npz``.
MODEL_FIELD = "model"

#: File beside an index's manifest naming the face model of its vectors.
INDEX_MODEL_FILE = "face-model.json"


def check_output_file(path: str | os.PathLike, what: str = "output file") -> Path:
    """Raise :class:`InvalidArgument` unless a file can be written at ``path``; returns it as a Path.

    Checked before any work: the folder that will hold it exists, is a
    folder and is writable, and ``path`` itself is not a folder. (An
    existing file is replaced.) ``what`` names it in the message
    (``-o``, ``--plot``).
    """
    path = Path(path)
    if path.is_dir():
        raise InvalidArgument(f"{what} {path} is a folder; give a file name")
    check_writable_folder(path.parent, f"{what} {path}")
    if path.exists() and not os.access(path, os.W_OK):
        raise InvalidArgument(f"{what} {path}: permission denied (cannot replace it)")
    return path


def save_embeddings(
    path: str | os.PathLike,
    emb: np.ndarray,
    ids: Sequence[str],
    model: str,
    **extra: np.ndarray,
) -> Path:
    """Write ``emb`` with one identity per row and the model's name to ``path`` (``.npz``, atomically).

    The layout is the shared data's: ``emb`` float32 ``[n, d]``, ``name``
    (per row), ``names`` (distinct, sorted) and ``label`` (int32 index into
    ``names``), plus ``model`` and the arrays in ``extra`` (``file``,
    ``det``...). The file is written exactly at ``path``, whatever its ending.
    A path that cannot be written raises :class:`InvalidArgument`
    (:func:`check_output_file`), a failed write (disk full...)
    :class:`encmatch.errors.IOError`; neither leaves a partial file.
    """
    path = Path(path)
    names, label = np.unique(np.asarray(list(ids), dtype=str), return_inverse=True)
    spec = model_spec(model)
    emb = np.asarray(emb, dtype=np.float32)
    check_dim(emb.shape[1], spec.name, str(path))
    arrays = {"emb": emb, "name": names[label], "names": names, "label": label.astype(np.int32),
              MODEL_FIELD: np.array(spec.name), **extra}
    check_output_file(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        # np.savez cannot take an array called "file" (its own first parameter): write the zip directly.
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            for name, arr in arrays.items():
                with zf.open(f"{name}.npy", "w", force_zip64=True) as out:
                    np.lib.format.write_array(out, np.asanyarray(arr), allow_pickle=False)
        os.replace(tmp, path)
    except OSError as exc:
        raise DiskError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return path


def file_model(path: str | os.PathLike) -> str | None:
    """The model recorded in an embedding ``.npz``, or ``None`` (a ``.npy``, or a file without a record)."""
    path = Path(path)
    if path.suffix != ".npz":
        return None
    recorded = data_mod.load_optional(path, MODEL_FIELD)
    return None if recorded is None else model_spec(str(recorded)).name


def check_model(expected: str | None, got: str | None, what: str) -> None:
    """Raise :class:`Mismatch` when both models are known and differ; ``what`` names the newcomer."""
    if expected is not None and got is not None and model_spec(expected).name != model_spec(got).name:
        raise Mismatch(f"{what} was made with the {model_spec(got).name} model, but {model_spec(expected).name} "
                       "is expected: embeddings of different models cannot be compared "
                       f"(re-embed the photos with --model {model_spec(expected).name})")


def check_dim(dim: int, model: str | None, what: str) -> None:
    """Raise :class:`InvalidArgument` when ``dim`` is not the dimension of ``model`` (if known)."""
    if model is not None and dim != model_spec(model).dim:
        raise InvalidArgument(f"{what}: {dim}-d vectors, but the {model_spec(model).name} model makes "
                              f"{model_spec(model).dim}-d embeddings")


def index_model(index_dir: str | os.PathLike) -> str | None:
    """The face model recorded beside the index in ``index_dir``, or ``None``."""
    path = Path(index_dir) / INDEX_MODEL_FILE
    if not path.is_file():
        return None
    try:
        return model_spec(json.loads(path.read_text())["model"]).name
    except (OSError, ValueError, KeyError, TypeError, InvalidArgument) as exc:
        raise Corrupt(f"cannot read the face model of the index, {path}: {exc}") from exc


def record_index_model(index_dir: str | os.PathLike, model: str | None) -> None:
    """Record ``model`` beside the index (no-op for ``None``); Mismatch if another model is recorded."""
    if model is None:
        return
    current = index_model(index_dir)
    check_model(current, model, "these vectors")
    if current is None:
        path = Path(index_dir) / INDEX_MODEL_FILE
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps({"model": model_spec(model).name, "dim": model_spec(model).dim}) + "\n")
        os.replace(tmp, path)
