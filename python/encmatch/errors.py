"""Exceptions raised by encmatch.

Every failure reported by the Go core carries an error *kind*
(``docs/ABI.md``); :func:`error_for` maps it to one subclass of
:class:`EncmatchError`, so callers can catch exactly what they handle::

    try:
        index.search(q)
    except encmatch.Mismatch:
        ...  # keys of another key set

The Python side raises the same classes for what it checks itself (bad
numpy input, a missing directory), so a caller never needs to know which
layer noticed the problem.
"""

from __future__ import annotations

__all__ = [
    "EncmatchError",
    "InvalidArgument",
    "Mismatch",
    "Corrupt",
    "NotFound",
    "Exists",
    "IOError",
    "Internal",
    "LibraryNotFound",
    "MissingExtra",
    "ShardUnavailable",
    "Unavailable",
    "InsecureParameters",
    "PayloadBandWarning",
    "MemoryBudgetWarning",
    "PayloadIncomplete",
    "error_for",
    "USER_ERRORS",
]


class EncmatchError(Exception):
    """Base class of every encmatch error.

    ``kind`` is the core's error kind (``invalid_argument``, ``mismatch``...)
    and ``message`` the human-readable text without the class name.
    """

    kind = "internal"

    def __init__(self, message: str, kind: str | None = None):
        """``message`` for humans; ``kind`` overrides the class's error kind."""
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind

    def __str__(self) -> str:
        return self.message


class InvalidArgument(EncmatchError, ValueError):
    """Bad input: wrong dimension, NaN/inf, zero vector, unknown preset or mode..."""

    kind = "invalid_argument"


class Mismatch(EncmatchError):
    """Keys, index or bytes made with other parameters or by another key set."""

    kind = "mismatch"


class Corrupt(EncmatchError):
    """A file or byte string is truncated or corrupt (envelope or checksum check failed)."""

    kind = "corrupt"


class NotFound(EncmatchError):
    """A file, directory or handle does not exist."""

    kind = "not_found"


class Exists(EncmatchError):
    """The core refuses to overwrite an existing key or index directory."""

    kind = "exists"


class IOError(EncmatchError):  # noqa: A001 - the name of the core's error kind `io`
    """A disk error (permissions, full disk...). Shadows the builtin only inside this module."""

    kind = "io"


class Internal(EncmatchError):
    """A bug or an unexpected state in the core or the bindings."""

    kind = "internal"


class LibraryNotFound(EncmatchError):
    """The core shared library ``libencmatch.so`` is missing or cannot be loaded."""

    kind = "library"


class MissingExtra(EncmatchError, ImportError):
    """A feature's optional dependencies are not installed: ``extra`` names the package extra that
    brings them (``pip install 'encmatch[extra]'``), ``module`` the module that is missing."""

    kind = "missing_extra"

    def __init__(self, extra: str, module: str) -> None:
        """The error for ``module`` missing, which the ``extra`` extra installs."""
        super().__init__(
            f"this needs encmatch's optional '{extra}' dependencies ({module} is not installed): "
            f"pip install 'encmatch[{extra}]'"
        )
        self.extra = extra
        self.module = module


class ShardUnavailable(EncmatchError):
    """A shard of a scaled-out index could not be served (its worker died past its restarts, or could
    not load its groups): the query fails rather than return a partial answer."""

    kind = "shard_unavailable"


class Unavailable(EncmatchError):
    """A service could not be reached, did not answer in time, or refused the caller (a bad or revoked
    token, a full queue): nothing is wrong with the input, and trying later (or with another token) may
    succeed. The CLI exits 3 on it."""

    kind = "unavailable"


class PayloadIncomplete(EncmatchError):
    """A payload search whose answer is not complete: more records match than the public bound, or some
    matches could not be separated. Never a silently truncated answer: ``count`` is the number of
    matching records, ``bound`` the search's bound, ``result`` the partial
    :class:`~encmatch.results.PayloadResult` (what could be decoded) and ``query`` the query's row
    when several were searched. The CLI exits 1 on it."""

    kind = "payload_incomplete"

    def __init__(self, message: str, *, count: int = 0, bound: int | None = None, unresolved: int = 0,
                 result: object = None, query: int | None = None):
        """``message`` for humans; the numbers and the partial result for programs."""
        super().__init__(message)
        self.count = count
        self.bound = bound
        self.unresolved = unresolved
        self.result = result
        self.query = query

    @property
    def records(self) -> list[tuple[int, list[int]]]:
        """The partial records ``(position, payload)`` that could be decoded."""
        res = self.result
        if res is None:
            return []
        return [(int(p), [int(v) for v in row]) for p, row in zip(res.positions, res.payloads)]


class InsecureParameters(UserWarning):
    """Warning: keys are made at a preset that gives no security (``toy``, ``toy-real``: tests only).
    The command line prints its own banner instead."""


class MemoryBudgetWarning(UserWarning):
    """Warning at the opening of a server whose memory budget is below what streaming its index needs (the keys
    and the streaming window): the process will use more than the budget."""


class PayloadBandWarning(UserWarning):
    """Warning at the creation of a payload index whose comparator's value band is wider than +-0.02
    (kappa below 12): every record scoring within it comes back undecoded, the answer incomplete."""


_BY_KIND: dict[str, type[EncmatchError]] = {
    cls.kind: cls
    for cls in (InvalidArgument, Mismatch, Corrupt, NotFound, Exists, IOError, Internal, ShardUnavailable,
              Unavailable)
}

#: Error classes that mean "the user gave something wrong" (the CLI exits 2 on these).
USER_ERRORS: tuple[type[EncmatchError], ...] = (InvalidArgument, Mismatch, Corrupt, NotFound, Exists)


def error_for(kind: str | None, message: str) -> EncmatchError:
    """Return the exception instance for a core error ``kind`` (unknown kinds map to :class:`Internal`)."""
    cls = _BY_KIND.get(kind or "", Internal)
    return cls(message, kind=kind or cls.kind)
