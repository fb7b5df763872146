"""encmatch: encrypted 1:N face search.

A gallery of face embeddings is encrypted under the client's public key
(CKKS, Lattigo, in the Go core); a server searches it with encrypted
queries and returns an encrypted answer only the client can read:
*is this person enrolled?* (membership), *which entries match?*
(identification) or, for an index enrolled with payloads, *what are the
payloads of the matching records?* (payload fetch).

The SDK:

- :class:`Client` - key generation, query encryption, result decryption;
- :class:`Enroller` - encrypts gallery vectors into an index directory;
- :class:`Server` - answers encrypted queries over an index (in memory, or
  streamed from disk under a memory budget);
- :func:`choose_strategy` - the core's cost and memory model ranking the
  similarity strategies (:data:`STRATEGIES`) a key set can be made for;
- :class:`EncryptedIndex` - all three roles behind a vector-index API
  (``create``/``add``/``search``/``len``) for a key holder;
- :mod:`encmatch.evaluation.bruteforce` and :mod:`encmatch.evaluation.validate` - the exact
  plaintext reference and the comparison against it.
- :mod:`encmatch.faces` - photos to embeddings (dlib detection and ArcFace
  alignment, MobileFaceNet or dlib's ResNet), with the model recorded;
  :mod:`encmatch.evaluation.calibrate` and :mod:`encmatch.evaluation.accuracy` - score
  distributions and delta, encrypted vs plaintext accuracy on labelled faces.

Errors are :class:`EncmatchError` subclasses (:mod:`encmatch.errors`).
"""

from .client import (
    STRATEGIES,
    Client,
    Enroller,
    Querier,
    Server,
    choose_strategy,
    comparator,
    describe,
    index_info,
    presets,
    version,
)
from .errors import (
    Corrupt,
    EncmatchError,
    Exists,
    Internal,
    InvalidArgument,
    IOError,
    LibraryNotFound,
    Mismatch,
    NotFound,
    PayloadIncomplete,
    ShardUnavailable,
    Unavailable,
)
from .index import EncryptedIndex
from .results import IdentificationResult, MembershipResult, PayloadResult

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Querier",
    "Enroller",
    "Server",
    "EncryptedIndex",
    "MembershipResult",
    "IdentificationResult",
    "PayloadResult",
    "describe",
    "presets",
    "version",
    "index_info",
    "comparator",
    "choose_strategy",
    "STRATEGIES",
    "EncmatchError",
    "InvalidArgument",
    "Mismatch",
    "Corrupt",
    "NotFound",
    "Exists",
    "IOError",
    "Internal",
    "LibraryNotFound",
    "ShardUnavailable",
    "Unavailable",
    "PayloadIncomplete",
    "__version__",
]
