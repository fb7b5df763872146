"""The ``encmatch`` command line.

Subcommands (``encmatch <command> --help`` for details)::

    keygen    generate a key set (client keys + server/ evaluation keys)
    enroll    encrypt vectors (and payloads) from .npy/.npz into an index (created on first use)
    query     encrypt a query, run the server, write the encrypted result
    decrypt   decrypt a result: membership count, matched positions (+ labels, opened here) or payloads
    validate  encrypted search vs brute force on real faces; exit 1 on disagreement
    demo      the end-to-end demo on LFW faces (``make demo``)
    info      core version and presets, or an index / key set summary
    strategies  the cost model's ranking of the similarity strategies
    bench     the papers/000 benchmark: timings, RAM, disk per K and strategy, beside the published figures
    embed     detect, align and embed the faces of photos (MobileFaceNet or dlib) into an .npz
    calibrate genuine/impostor score distributions, a suggested delta, the guard band checked against them
    accuracy  encrypted vs plaintext identification on a labelled set: TP/FP/TN/FN, EER, TAR@FAR, ROC/DET plot
    serve     the HTTP service (encrypted galleries and queries; docs/SERVICE.md)
    tenant    add, rotate, revoke or list the service's tenants and their tokens
    index     list, inspect or delete the indexes of a service (``--server URL``)
    plan      capacity plan: workers, shards per worker, memory, latency (papers/003's scaling law)

``enroll``, ``query`` and ``decrypt`` take ``--server URL`` (the token from
``$ENCMATCH_TOKEN`` or ``--token-file``, ``--ca-file`` for a self-signed
https service) to work against a service: ``--index`` is then the remote
index id.

Memory budgets (``--memory-budget``) are in GB (10^9 bytes, a float); 0
means unlimited.

Exit codes (:data:`EXIT_CODES`, also in ``encmatch --help``): 0 success;
1 failure (a disagreement with brute force, a disk or internal error, a
missing core library); 2 bad input (bad arguments, wrong dimension, NaN,
missing, truncated or corrupt files, keys of another key set, an unknown
index); 3 service unavailable or refused (cannot connect, timed out, bad
or revoked token, overloaded). Errors are printed as ``error: <message>``
on stderr, never as a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Sequence

from .. import __version__
from ..errors import USER_ERRORS, EncmatchError, InsecureParameters, MemoryBudgetWarning, Unavailable
from . import cluster as cluster_commands, faces as face_commands, service as service_commands

from .exits import EXIT_BROKEN_PIPE, EXIT_CODES, EXIT_FAILURE, EXIT_UNAVAILABLE, EXIT_USAGE

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors read ``error: ...`` and exit 2, like every other bad input; every
    command's ``--help`` ends with the exit-code policy."""

    def __init__(self, *args, **kwargs) -> None:
        """argparse's, with the exit codes as the default epilog."""
        kwargs.setdefault("epilog", EXIT_CODES)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print the usage and ``error: message``, exit 2."""
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"error: {message}\n")


# ---- subcommands -----------------------------------------------------------


# ---- parser ----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    p = _Parser(prog="encmatch", description="Encrypted 1:N face search.")
    p.add_argument("--version", action="version", version=f"encmatch {__version__}",
                   help="print the package version and exit (`encmatch info`: the core's and Lattigo's)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    from . import evaluation, search

    search.add_commands(sub)
    evaluation.add_commands(sub)
    service_commands.add_commands(sub)
    face_commands.add_commands(sub)
    from . import iris as iris_commands

    iris_commands.add_commands(sub)
    cluster_commands.add_commands(sub)
    from . import threshold as threshold_cli

    threshold_cli.add_commands(sub)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None, _default=warnings.showwarning) -> None:
    """Prints encmatch's operator warnings (:class:`MemoryBudgetWarning`) as ``warning: ...`` lines on stderr, like
    the command line's own; other warnings as Python shows them."""
    if issubclass(category, MemoryBudgetWarning):
        print(f"warning: {message}", file=sys.stderr)
        return
    _default(message, category, filename, lineno, file, line)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``encmatch`` console script; returns the exit code."""
    warnings.simplefilter("ignore", InsecureParameters)  # the command line prints its own INSECURE banner
    warnings.showwarning = _show_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        return code
    except BrokenPipeError:  # the reader went away (`encmatch decrypt results/ | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Unavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except EncmatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
