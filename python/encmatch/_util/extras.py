"""The package's optional dependency groups (``pip install 'encmatch[faces]'`` and so on) and the
check that names the missing one.

The SDK (:class:`encmatch.EncryptedIndex` and the roles) needs only numpy,
cryptography and tqdm; each of these features needs its extra:

- ``faces``: the face models and photo reading (LiteRT, dlib, Pillow);
- ``service``: the HTTP service and its client (FastAPI, uvicorn, httpx);
- ``ray``: the Ray scale-out backend;
- ``plots``: the plots of ``bench``, ``calibrate``, ``accuracy`` and ``plan`` (matplotlib);
- ``fold``: the linear program that designs iris fold polynomials (SciPy).

``all`` installs every one.
"""

from __future__ import annotations

import importlib

from ..errors import MissingExtra

__all__ = ["EXTRAS", "require"]

#: Each extra and the modules it provides (their import names).
EXTRAS: dict[str, tuple[str, ...]] = {
    "faces": ("ai_edge_litert", "dlib", "face_recognition_models", "PIL"),
    "service": ("fastapi", "uvicorn", "httpx"),
    "ray": ("ray",),
    "plots": ("matplotlib",),
    "fold": ("scipy",),
}


def require(extra: str, *modules: str) -> None:
    """Import ``modules`` (default: every module of ``extra``); raise :class:`MissingExtra` naming
    ``extra`` if one is not installed. An import error inside an installed module propagates as is."""
    for name in modules or EXTRAS[extra]:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if missing != name.split(".")[0]:
                raise
            raise MissingExtra(extra, name) from None
