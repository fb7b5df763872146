"""Photos in: finding them, naming them, and reading them as 8-bit RGB arrays.

- :func:`find_photos` expands the command line's files and folders into a
  sorted list of photos, each with an identity taken from its folder or
  file name (:func:`photo_id`).
- :func:`load_image` reads one photo with Pillow whatever its mode
  (grey, 16-bit, palette, RGBA, CMYK), applies its EXIF orientation and
  shrinks very large photos; anything it cannot use raises
  :class:`BadPhoto` with a message meant for the user.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import numpy as np

from .._util.extras import require

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "IMAGE_SUFFIXES",
    "MAX_PIXELS",
    "MAX_SIDE",
    "BadPhoto",
    "Photo",
    "find_photos",
    "photo_id",
    "is_photo_path",
    "load_image",
]

#: File name endings taken as photos when a folder is searched (case-insensitive).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".pgm", ".ppm", ".pbm", ".pnm", ".bmp", ".tif", ".tiff", ".webp", ".gif")

#: Photos with more pixels than this are refused without being decoded (decompression bombs, scans).
MAX_PIXELS = 100_000_000

#: Longer side, in pixels, that larger photos are shrunk to before detection.
MAX_SIDE = 2000

#: How identities are named: ``auto`` (folder for photos found in a sub-folder, else file), ``folder``, ``file``.
ID_RULES = ("auto", "folder", "file")


class BadPhoto(Exception):
    """A photo that cannot be used (unreadable, not an image, too large...); the message says why."""


@dataclass(frozen=True)
class Photo:
    """One input photo: its ``path``, the identity ``id`` it is enrolled or searched under, and ``name``.

    ``name`` is the path relative to the folder it was found in
    (``alice/1.jpg``), or the path as given for a file named directly.
    """

    path: Path
    id: str
    name: str


def is_photo_path(path: str | os.PathLike) -> bool:
    """True for a folder, or a file whose name ends like a photo (:data:`IMAGE_SUFFIXES`)."""
    p = Path(path)
    return p.is_dir() or p.suffix.lower() in IMAGE_SUFFIXES


def photo_id(path: Path, rule: str = "auto", in_subfolder: bool = False) -> str:
    """The identity of the photo at ``path`` under ``rule`` (see :data:`ID_RULES`).

    ``folder``: the name of the folder holding it (``people/alice/1.jpg`` ->
    ``alice``); ``file``: its file name without the ending (``bob.jpg`` ->
    ``bob``); ``auto``: ``folder`` when the photo was found in a sub-folder
    of a folder named on the command line (``in_subfolder``), else ``file``.
    """
    if rule not in ID_RULES:
        raise ValueError(f"unknown id rule {rule!r} (want one of {', '.join(ID_RULES)})")
    if rule == "folder" or (rule == "auto" and in_subfolder):
        return path.resolve().parent.name
    return path.stem


def find_photos(inputs: Iterable[str | os.PathLike], rule: str = "auto") -> tuple[list[Photo], list[tuple[Path, str]]]:
    """Expand files and folders into photos; returns ``(photos, missing)``.

    Folders are searched recursively for files ending in
    :data:`IMAGE_SUFFIXES` (hidden files skipped), in sorted order; files
    named explicitly are taken whatever their ending, so that a file that is
    not an image is reported rather than silently ignored. ``missing``
    lists ``(path, reason)`` for arguments that do not exist.
    """
    photos: list[Photo] = []
    missing: list[tuple[Path, str]] = []
    for arg in inputs:
        p = Path(arg)
        if p.is_dir():
            found = sorted(
                f for f in p.rglob("*")
                if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            if not found:
                missing.append((p, "folder holds no photos"))
            for f in found:
                photos.append(Photo(f, photo_id(f, rule, in_subfolder=f.parent != p), f.relative_to(p).as_posix()))
        elif p.is_file():
            photos.append(Photo(p, photo_id(p, rule), str(p)))
        else:
            missing.append((p, "no such file or folder"))
    return photos, missing


def load_image(path: str | os.PathLike, max_side: int = MAX_SIDE, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """Read a photo as a C-contiguous uint8 RGB array ``[h, w, 3]``.

    Grey, 16-bit, float, palette, RGBA, LA and CMYK photos are converted to
    RGB (grey is copied to the three channels, 16-bit grey divided by 257,
    32-bit and float grey scaled by their range; transparency becomes white), the EXIF orientation is applied, and
    photos whose longer side exceeds ``max_side`` are shrunk to it (JPEGs
    are decoded at a reduced size directly). Raises :class:`BadPhoto` for
    a missing, unreadable, truncated or non-image file and for photos of
    more than ``max_pixels`` pixels.
    """
    Image, ImageOps = _pil()
    path = Path(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # max_pixels decides, below
            with Image.open(path) as im:
                w, h = im.size
                if w * h > max_pixels:
                    raise BadPhoto(f"image too large: {w} x {h} = {w * h / 1e6:.0f} megapixels "
                                   f"(the limit is {max_pixels / 1e6:.0f})")
                if w == 0 or h == 0:
                    raise BadPhoto(f"empty image ({w} x {h})")
                if im.format == "JPEG" and max(w, h) > max_side:
                    im.draft("RGB", (max_side, max_side))
                im.load()
                im = ImageOps.exif_transpose(im)
                rgb = _to_rgb(im)
    except BadPhoto:
        raise
    except FileNotFoundError:
        raise BadPhoto("no such file") from None
    except PermissionError:
        raise BadPhoto("permission denied") from None
    except IsADirectoryError:
        raise BadPhoto("is a folder") from None
    except Image.UnidentifiedImageError:
        raise BadPhoto("not an image (or a format Pillow cannot read)") from None
    except Image.DecompressionBombError:
        raise BadPhoto(f"image too large: more than {2 * Image.MAX_IMAGE_PIXELS / 1e6:.0f} megapixels "
                       f"(the limit is {max_pixels / 1e6:.0f})") from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise BadPhoto(f"cannot read the image: {exc}") from None
    if max(rgb.size) > max_side:
        scale = max_side / max(rgb.size)
        rgb = rgb.resize((max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale))), Image.LANCZOS)
    return np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8))


def _pil():
    """Pillow's ``Image`` and ``ImageOps`` modules (the ``faces`` extra)."""
    require("faces", "PIL")
    from PIL import Image, ImageOps

    return Image, ImageOps


def _to_rgb(im: Image.Image) -> Image.Image:
    """``im`` as an 8-bit RGB image (16-bit grey divided by 257; 32-bit and float grey outside 0..255 by their range)."""
    Image, _ = _pil()
    if im.mode.startswith("I;16"):
        im = Image.fromarray(np.round(np.asarray(im, dtype=np.float64) / 257.0).astype(np.uint8), "L")
    elif im.mode in ("I", "F"):
        arr = np.asarray(im, dtype=np.float64)
        lo, hi = float(arr.min()), float(arr.max())
        if hi > 255 or lo < 0:
            arr = (arr - lo) * (255.0 / (hi - lo)) if hi > lo else np.zeros_like(arr)
        im = Image.fromarray(np.clip(np.round(arr), 0, 255).astype(np.uint8), "L")
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return im.convert("RGB")
