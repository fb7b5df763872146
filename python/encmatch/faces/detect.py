"""Face detection, landmarks and alignment with dlib.

The pipeline is the one that made the embeddings in ``shared/data``
(``lfw/SOURCE.txt``), so that re-embedding a stored photo gives its stored
embedding:

1. **Detection**: dlib's HOG detector (upsampling the image once when its
   longer side is at most :data:`UPSAMPLE_MAX_SIDE`); when it finds nothing,
   dlib's CNN (MMOD) detector. Faces are ordered by the distance of their
   box centre to the image centre: the first is the one a single-face
   photo is taken to show.
2. **Landmarks**: dlib's 5-point model on the detection box.
3. **De-rotation**: the 5 points give dlib's face chip
   (:data:`CHIP_SIZE` pixels, padding :data:`CHIP_PADDING`): the face
   upright and scaled, with room around it.
4. **ArcFace alignment**: dlib's 68-point model on the chip (box: the HOG
   detector's on the chip, else where dlib placed the face in it), reduced
   to the five ArcFace points
   (eye centres, nose tip, mouth corners), then the similarity that best
   maps the ArcFace template onto them (least squares) samples the
   112 x 112 crop from the chip (bilinear) - what MobileFaceNet expects.

The dlib model files come from the ``face_recognition_models`` package,
located with :func:`importlib.util.find_spec` (its ``__init__`` imports
``pkg_resources``, which recent setuptools no longer ships).
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._util.extras import require
from ..errors import MissingExtra, NotFound

__all__ = [
    "ARCFACE_TEMPLATE",
    "CROP_SIZE",
    "Face",
    "FaceFinder",
    "dlib_model_path",
    "similarity_lstsq",
    "warp_affine",
]

#: The standard ArcFace 5-point template in a 112 x 112 crop: eye centres (left, right in the image),
#: nose tip, mouth corners (left, right).
ARCFACE_TEMPLATE = np.array(
    [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655], [70.7299, 92.2041]]
)

#: Side of the aligned crop, in pixels.
CROP_SIZE = 112

#: Side and padding (as a fraction of the face box) of the de-rotated dlib face chip.
CHIP_SIZE = 224
CHIP_PADDING = 0.5

#: Images whose longer side is at most this are upsampled once for detection (faces down to ~40 px).
UPSAMPLE_MAX_SIDE = 1000

_MODEL_FILES = {
    "hog": None,
    "cnn": "mmod_human_face_detector.dat",
    "shape5": "shape_predictor_5_face_landmarks.dat",
    "shape68": "shape_predictor_68_face_landmarks.dat",
    "resnet": "dlib_face_recognition_resnet_model_v1.dat",
}


def _dlib():
    """The dlib module (the ``faces`` extra)."""
    require("faces", "dlib")
    import dlib

    return dlib


def dlib_model_path(name: str) -> Path:
    """Path of one of ``face_recognition_models``' weight files (``mmod_human_face_detector.dat``...)."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra("faces", "face_recognition_models")
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / name
    if not path.is_file():
        raise NotFound(f"dlib model file {path} is missing (reinstall face_recognition_models)")
    return path


@dataclass(frozen=True)
class Face:
    """A detected face: its box ``(left, top, right, bottom)`` in image pixels and the detector that found it."""

    box: tuple[int, int, int, int]
    detector: str

    def rect(self):
        """The box as a ``dlib.rectangle``."""
        return _dlib().rectangle(*self.box)


class FaceFinder:
    """dlib's detectors and landmark models, loaded on first use and shared by the threads of a process."""

    _lock = threading.Lock()
    _models: dict = {}

    def _get(self, name: str):
        """The dlib object ``name`` (``hog``, ``cnn``, ``shape5``, ``shape68``, ``resnet``), loaded once."""
        with self._lock:
            if name not in self._models:
                dlib = _dlib()
                if name == "hog":
                    obj = dlib.get_frontal_face_detector()
                elif name == "cnn":
                    obj = dlib.cnn_face_detection_model_v1(str(dlib_model_path(_MODEL_FILES[name])))
                elif name.startswith("shape"):
                    obj = dlib.shape_predictor(str(dlib_model_path(_MODEL_FILES[name])))
                else:
                    obj = dlib.face_recognition_model_v1(str(dlib_model_path(_MODEL_FILES[name])))
                self._models[name] = obj
            return self._models[name]

    def detect(self, img: np.ndarray) -> list[Face]:
        """Faces in ``img`` (uint8 RGB), nearest the image centre first; HOG, else the CNN detector."""
        h, w = img.shape[:2]
        upsample = 1 if max(h, w) <= UPSAMPLE_MAX_SIDE else 0
        rects = list(self._get("hog")(img, upsample))
        detector = "hog"
        if not rects:
            rects = [d.rect for d in self._get("cnn")(img, upsample)]
            detector = "cnn"
        cx, cy = w / 2, h / 2
        rects.sort(key=lambda r: np.hypot((r.left() + r.right()) / 2 - cx, (r.top() + r.bottom()) / 2 - cy))
        return [Face((r.left(), r.top(), r.right(), r.bottom()), detector) for r in rects]

    def shape5(self, img: np.ndarray, face: Face):
        """dlib's 5-point landmarks (``full_object_detection``) of ``face``."""
        return self._get("shape5")(img, face.rect())

    def descriptor(self, img: np.ndarray, shape5) -> np.ndarray:
        """dlib's raw 128-d ResNet descriptor of the face with 5-point landmarks ``shape5`` (float64)."""
        return np.asarray(self._get("resnet").compute_face_descriptor(img, shape5), dtype=np.float64)

    def arcface_crop(self, img: np.ndarray, shape5) -> np.ndarray:
        """The 112 x 112 uint8 RGB crop of the face with landmarks ``shape5``, aligned to :data:`ARCFACE_TEMPLATE`."""
        dlib = _dlib()
        chip = dlib.get_face_chip(img, shape5, size=CHIP_SIZE, padding=CHIP_PADDING)
        found = list(self._get("hog")(chip, 0))
        c = (CHIP_SIZE - 1) / 2
        if found:
            box = min(found, key=lambda r: np.hypot((r.left() + r.right()) / 2 - c, (r.top() + r.bottom()) / 2 - c))
        else:  # where dlib put the face in the chip
            lo = int(round(CHIP_SIZE * CHIP_PADDING / (1 + 2 * CHIP_PADDING)))
            hi = int(round(CHIP_SIZE * (1 + CHIP_PADDING) / (1 + 2 * CHIP_PADDING)))
            box = dlib.rectangle(lo, lo, hi, hi)
        p = np.array([[q.x, q.y] for q in self._get("shape68")(chip, box).parts()], dtype=np.float64)
        five = np.array([p[36:42].mean(0), p[42:48].mean(0), p[30], p[48], p[54]])
        crop = warp_affine(chip, similarity_lstsq(ARCFACE_TEMPLATE, five), CROP_SIZE)
        return np.clip(np.round(crop), 0, 255).astype(np.uint8)


def similarity_lstsq(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 2 x 3 similarity (rotation, uniform scale, shift) mapping ``src`` points onto ``dst`` in least squares.

    Umeyama's closed form, as ``skimage.transform.SimilarityTransform``.
    """
    src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    ms, md = src.mean(0), dst.mean(0)
    s0, d0 = src - ms, dst - md
    u, sv, vt = np.linalg.svd(d0.T @ s0 / len(src))
    d = np.eye(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        d[1, 1] = -1
    rot = u @ d @ vt
    scale = np.trace(np.diag(sv) @ d) / ((s0**2).sum() / len(src))
    return np.hstack([scale * rot, (md - scale * rot @ ms)[:, None]])


def warp_affine(img: np.ndarray, out_to_in: np.ndarray, size: int) -> np.ndarray:
    """Sample a ``size`` x ``size`` image: output pixel (x, y) takes ``img`` at ``out_to_in @ (x, y, 1)``.

    Bilinear interpolation, zero outside the image; returns float64 ``[size, size, channels]``.
    """
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64)
    sx = out_to_in[0, 0] * xs + out_to_in[0, 1] * ys + out_to_in[0, 2]
    sy = out_to_in[1, 0] * xs + out_to_in[1, 1] * ys + out_to_in[1, 2]
    x0, y0 = np.floor(sx).astype(np.int64), np.floor(sy).astype(np.int64)
    fx, fy = sx - x0, sy - y0
    h, w = img.shape[:2]
    src = img.reshape(h, w, -1).astype(np.float64)
    out = np.zeros((size, size, src.shape[2]))
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            xx, yy = x0 + dx, y0 + dy
            inside = (xx >= 0) & (xx < w) & (yy >= 0) & (yy < h)
            px = src[np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
            out += np.where(inside[..., None], px, 0.0) * (wx * wy)[..., None]
    return out
