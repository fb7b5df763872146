"""Template files: open-iris's serialised ``IrisTemplate`` (JSON) and the project's packed ``.npz``.

**open-iris JSON** (PyPI ``open-iris`` 1.11.2, ``iris/io/dataclasses.py``
``IrisTemplate.serialize``/``deserialize``, ``convert2old_format``,
``new_to_old_format``; ``iris/utils/base64_encoding.py``
``base64_encode_array``/``base64_decode_array``): an object ::

    {"iris_codes": "<base64>", "mask_codes": "<base64>", "iris_code_version": "v0.1"}

where each base64 string is ``np.packbits`` of the bool array in the "old
format" ``(rows, columns, filters, 2)`` = ``(16, 256, 2, 2)`` (C order),
i.e. ``np.stack(iris_codes).transpose(1, 2, 0, 3)`` of the list of
per-filter ``(16, 256, 2)`` arrays. ``IrisTemplateWithId.serialize`` adds
``"image_id"``. A file may hold one such object or a list of them; reading
gives a :class:`~encmatch.iris.templates.Templates` whose ids are the
``image_id`` values (else ``<file stem>:<position>``). open-iris need not be
installed: this module reads and writes the format with numpy.

**Gallery ``.npz``** (this project): ``format = "encmatch-iris-templates"``,
``format_version = 1``, ``layout`` (int64 ``[4]``), ``codes`` and ``masks``
(uint8 ``[n, ceil(l/8)]``, ``np.packbits`` of each flattened template, C
order of the layout, the same bit order as open-iris's), ``ids`` (str
``[n]``), ``iris_code_version`` (str) and optionally ``truth`` (str
``[n]``, ground truth of generated queries). Written atomically (a
temporary file in the same folder, then ``os.replace``); read with
``allow_pickle=False``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import Corrupt, InvalidArgument, NotFound
from .encoding import LAYOUT, check_layout
from .templates import Templates

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "template_from_openiris",
    "template_to_openiris",
    "read_openiris",
    "write_openiris",
    "save_templates",
    "load_templates",
    "read_templates",
]

FORMAT = "encmatch-iris-templates"
FORMAT_VERSION = 1
_VERSION_RE = re.compile(r"v[\d]+\.[\d]+$")  # open-iris iris/io/validators.py iris_code_version_check


def _decode_bits(text: Any, layout: tuple[int, ...], what: str) -> np.ndarray:
    """open-iris ``base64_decode_array``: base64 of packed bits -> bool ``layout``, with clear errors."""
    if not isinstance(text, str):
        raise Corrupt(f"{what}: expected a base64 string, got {type(text).__name__}")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Corrupt(f"{what}: not valid base64 ({exc})") from None
    need = (int(np.prod(layout)) + 7) // 8
    if len(raw) != need:
        raise Corrupt(f"{what}: {len(raw)} bytes of packed bits, expected {need} for layout {layout} "
                      f"({'truncated' if len(raw) < need else 'too long'})")
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), count=int(np.prod(layout)))
    return bits.reshape(layout).astype(bool)


def _encode_bits(bits: np.ndarray) -> str:
    """open-iris ``base64_encode_array``: ``base64(np.packbits(bits))`` as a str."""
    return base64.b64encode(np.packbits(bits).tobytes()).decode("utf-8")


def template_from_openiris(obj: Any, layout: tuple[int, ...] = LAYOUT) -> tuple[np.ndarray, np.ndarray, str]:
    """``(code, mask, iris_code_version)`` of one serialised ``IrisTemplate`` dict; code/mask bool ``layout``."""
    layout = check_layout(layout)
    if not isinstance(obj, dict):
        raise Corrupt(f"expected a serialised IrisTemplate object, got {type(obj).__name__}")
    missing = [k for k in ("iris_codes", "mask_codes", "iris_code_version") if k not in obj]
    if missing:
        raise Corrupt(f"serialised IrisTemplate lacks {', '.join(missing)}")
    version = obj["iris_code_version"]
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise Corrupt(f"iris_code_version must look like 'v0.1', got {version!r}")
    code = _decode_bits(obj["iris_codes"], layout, "iris_codes")
    mask = _decode_bits(obj["mask_codes"], layout, "mask_codes")
    if not mask.any():
        raise InvalidArgument("mask_codes is empty (no usable bit)")
    return code, mask, version


def template_to_openiris(code: np.ndarray, mask: np.ndarray, version: str = "v0.1", image_id: str | None = None) -> dict:
    """What ``IrisTemplate.serialize()`` gives for bool old-format ``code``/``mask`` (``IrisTemplateWithId``'s with ``image_id``)."""
    if not _VERSION_RE.match(version):
        raise InvalidArgument(f"iris_code_version must look like 'v0.1', got {version!r}")
    out = {"iris_codes": _encode_bits(code), "mask_codes": _encode_bits(mask), "iris_code_version": version}
    if image_id is not None:
        out["image_id"] = str(image_id)
    return out


def _load_json(path: Path) -> Any:
    """Parsed JSON of ``path``, with file-level errors mapped to encmatch errors."""
    if not path.is_file():
        raise NotFound(f"{path}: no such file")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Corrupt(f"{path}: not valid JSON ({exc})") from None


def read_openiris(path: str | os.PathLike, layout: tuple[int, ...] = LAYOUT) -> Templates:
    """Templates of a JSON file holding one serialised ``IrisTemplate`` (or ``IrisTemplateWithId``) or a list of them."""
    path = Path(path)
    data = _load_json(path)
    items = data if isinstance(data, list) else [data]
    if not items:
        raise Corrupt(f"{path}: an empty list, no template")
    codes, masks, ids, versions = [], [], [], set()
    for i, obj in enumerate(items):
        try:
            c, m, v = template_from_openiris(obj, layout)
        except (Corrupt, InvalidArgument) as exc:
            raise type(exc)(f"{path}: template {i}: {exc.message}") from None
        codes.append(c)
        masks.append(m)
        versions.add(v)
        ids.append(str(obj.get("image_id", f"{path.stem}:{i}")))
    if len(versions) > 1:
        raise InvalidArgument(f"{path}: templates of several iris_code_versions {sorted(versions)}")
    return Templates.from_bits(np.stack(codes), np.stack(masks), ids, check_layout(layout), version=versions.pop())


def write_openiris(path: str | os.PathLike, templates: Templates) -> None:
    """Write ``templates`` as a JSON list of serialised ``IrisTemplateWithId`` objects (ids as ``image_id``), atomically."""
    codes, masks = templates.bits()
    items = [template_to_openiris(c, m, templates.version, i) for c, m, i in zip(codes, masks, templates.ids)]
    _atomic_write(Path(path), lambda f: f.write(json.dumps(items).encode("utf-8")))


def _atomic_write(path: Path, write) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it into place."""
    if not path.parent.is_dir():
        raise NotFound(f"{path.parent}: no such folder")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_templates(path: str | os.PathLike, templates: Templates) -> None:
    """Write ``templates`` to the project's packed ``.npz`` format, atomically."""
    arrays = {
        "format": np.array(FORMAT), "format_version": np.array(FORMAT_VERSION),
        "layout": np.array(templates.layout, dtype=np.int64), "codes": templates.codes, "masks": templates.masks,
        "ids": templates.ids.astype(str), "iris_code_version": np.array(templates.version),
    }
    if templates.truth is not None:
        arrays["truth"] = templates.truth.astype(str)
    _atomic_write(Path(path), lambda f: np.savez(f, **arrays))


def _npz_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, read fully (so truncation shows here)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise NotFound(f"{path}: no such file") from None
    except (zipfile.BadZipFile, EOFError, ValueError, OSError, KeyError) as exc:
        raise Corrupt(f"{path}: not a readable .npz ({type(exc).__name__}: {exc})") from None


def load_templates(path: str | os.PathLike) -> Templates:
    """Read a packed ``.npz`` written by :func:`save_templates`; :class:`~encmatch.errors.Corrupt` when it is not one."""
    path = Path(path)
    z = _npz_arrays(path)
    if str(z.get("format", "")) != FORMAT:
        raise Corrupt(f"{path}: not an encmatch iris template file (format {str(z.get('format', 'missing'))!r})")
    if int(z.get("format_version", -1)) != FORMAT_VERSION:
        raise Corrupt(f"{path}: format version {z.get('format_version')}, this reader knows {FORMAT_VERSION}")
    missing = [k for k in ("layout", "codes", "masks", "ids", "iris_code_version") if k not in z]
    if missing:
        raise Corrupt(f"{path}: missing {', '.join(missing)}")
    try:
        return Templates(z["codes"], z["masks"], z["ids"], tuple(z["layout"].tolist()), z.get("truth"),
                         str(z["iris_code_version"]))
    except InvalidArgument as exc:
        raise Corrupt(f"{path}: {exc.message}") from None


def read_templates(paths: Sequence[str | os.PathLike], layout: tuple[int, ...] = LAYOUT) -> Templates:
    """Templates of several files, in order: ``.npz`` (this project's) or ``.json`` (open-iris)."""
    parts = []
    for p in map(Path, paths):
        if p.suffix.lower() == ".json":
            parts.append(read_openiris(p, layout))
        elif p.suffix.lower() == ".npz":
            parts.append(load_templates(p))
        else:
            raise InvalidArgument(f"{p}: expected a .npz template file or an open-iris .json")
    return Templates.concatenate(parts)
