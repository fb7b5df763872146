"""Options shared by several commands: the preset, kappa, the memory budget, the similarity strategy and a
multiparty setup's rounds."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from .._util.defaults import DEFAULT_KAPPA, DEFAULT_PRESET, PRESETS
from .._util.ui import gigabytes
from ..params import AUTO, STRATEGIES

__all__ = ["add_preset_argument", "add_kappa_argument", "add_memory_budget_argument", "add_strategy_arguments",
           "add_setup_rounds"]


def _count(minimum: int):
    """argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def add_preset_argument(p: argparse.ArgumentParser, choices: tuple[str, ...] = PRESETS) -> None:
    """Add ``--preset`` with its choices, the shared default, and what each preset is."""
    p.add_argument("--preset", choices=choices, default=DEFAULT_PRESET,
                   help="parameter preset (default: %(default)s, 128-bit; 'real': 128-bit, 32,768 real slots per "
                        "group, docs/PARAMETERS.md; 'toy', 'toy-real': INSECURE, tests only)")


def add_kappa_argument(p: argparse.ArgumentParser) -> None:
    """Add ``--kappa``, the comparator's depth budget, with the shared default."""
    p.add_argument("--kappa", type=int, default=DEFAULT_KAPPA,
                   help="comparator depth budget: larger is a narrower guard band around delta and a slower "
                        "search (default: %(default)s, band +-0.0076; docs/COMPARATOR.md)")


def add_memory_budget_argument(p: argparse.ArgumentParser, text: str) -> None:
    """Add ``--memory-budget GB`` (stored as bytes in ``args.memory_budget``; 0 = unlimited)."""
    p.add_argument("--memory-budget", type=gigabytes, default=0, metavar="GB",
                   help=text + " in GB, or with a unit: 512MB, 1.5GiB (default: 0 = unlimited)")


def add_strategy_arguments(p: argparse.ArgumentParser, *, choice: bool = True, model: bool = True) -> None:
    """Add the options that choose a similarity strategy.

    ``choice``: ``--strategy`` and ``--n1``; ``model``: ``--expected-size``
    and ``--workers``, the inputs of the ``auto`` cost model.
    """
    if choice:
        p.add_argument("--strategy", choices=STRATEGIES, default=AUTO,
                       help="similarity strategy (default: %(default)s = the cost model's choice)")
        p.add_argument("--n1", type=_count(0), default=0,
                       help="baby-step size of the bsgs strategies (default: 0 = about sqrt of the padded dimension)")
    if model:
        p.add_argument("--expected-size", type=_count(1), default=None, metavar="N",
                       help="expected gallery size in vectors, for the model (default: one group)")
        p.add_argument("--workers", type=_count(0), default=0,
                       help="server cores, for the model (default: 0 = this machine's)")


def add_setup_rounds(actions: Any, func: Callable[[argparse.Namespace], int]) -> None:
    """Add a multiparty setup's ``round1`` and ``round2`` actions (the face ``threshold`` and ``iris setup``
    groups): the setup file, the party, its private directory, the bulletin and, in round 2, the
    directory of the Shamir shares addressed to it; both run ``func``."""
    for name, help_text in (("round1", "a party's first round"), ("round2", "a party's second round")):
        s = actions.add_parser(name, help=help_text)
        s.add_argument("--setup", type=Path, required=True)
        s.add_argument("--party", type=int, required=True, help="this party's id, 1..n")
        s.add_argument("--private", type=Path, required=True, help="this party's private directory")
        s.add_argument("--bulletin", type=Path, required=True, help="directory every party reads and writes")
        if name == "round2":
            s.add_argument("--shares", type=Path, required=True,
                           help="directory holding the Shamir shares addressed to this party")
        s.set_defaults(func=func)
