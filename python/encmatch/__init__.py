"""encmatch: encrypted 1:N biometric search.

A gallery of face embeddings is encrypted under the key holder's public
key (CKKS, Lattigo, in the Go core); a server searches it with encrypted
queries and returns an encrypted answer only the key holder can read:
*is this person enrolled?* (membership), *which entries match?*
(identification) or, for an index enrolled with payloads, *what are the
payloads of the matching records?* (payload fetch).

The SDK, one module per role:

- :class:`EncryptedIndex` (:mod:`encmatch.index`) - the three roles behind a
  vector-index API (``create``/``add``/``search``/``len``) for a key holder;
- :class:`Client` (:mod:`encmatch.keyholder`) - key generation, query
  encryption, result decryption; :class:`Querier` - queries with the public
  key alone;
- :class:`Enroller` (:mod:`encmatch.enroller`) - encrypts gallery vectors
  into an index directory;
- :class:`Server` (:mod:`encmatch.server`) - answers encrypted queries over an
  index (in memory, or streamed from disk under a memory budget);
- :mod:`encmatch.params` - parameter sets, :func:`choose_strategy` (the
  core's cost model) and the checks of what users pass; :class:`Manifest`
  (:mod:`encmatch.manifest`) - an index's manifest;
- :mod:`encmatch.results` - the typed answers.

Around it: :mod:`encmatch.faces` and :mod:`encmatch.iris` (biometrics),
:mod:`encmatch.service` (the HTTP service and its client),
:mod:`encmatch.cluster` (Ray), :mod:`encmatch.gpu` (the GPU engine),
:mod:`encmatch.evaluation` (brute force, validation, calibration, accuracy,
benchmarks), :mod:`encmatch.cli` (the command line) and
:mod:`encmatch._util` (plumbing). ``docs/ARCHITECTURE.md`` maps them.

Errors are :class:`EncmatchError` subclasses (:mod:`encmatch.errors`).
"""

from .params import STRATEGIES, choose_strategy, comparator, describe, presets, version
from .keyholder import Client, Querier
from .enroller import Enroller, EnrollSummary, GroupWrite
from .server import Server
from .manifest import Manifest, index_info
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
    "EnrollSummary",
    "GroupWrite",
    "Server",
    "EncryptedIndex",
    "Manifest",
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
