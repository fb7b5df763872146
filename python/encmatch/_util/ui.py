"""Small helpers for the terminal (CLI and demo): human-readable output and shared options."""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from typing import TextIO

from ..params import AUTO, STRATEGIES
from ..errors import InvalidArgument
from ..results import MembershipResult, PayloadResult, Result
from .defaults import DEFAULT_KAPPA, DEFAULT_PRESET, PRESETS
from .units import parse_size

__all__ = [
    "INSECURE_BANNER",
    "warn_if_insecure",
    "fmt_bytes",
    "describe_params",
    "describe_strategy",
    "gigabytes",
    "add_strategy_arguments",
    "add_memory_budget_argument",
    "add_preset_argument",
    "add_kappa_argument",
    "print_answer",
    "print_payloads",
]

#: Printed whenever the toy (insecure) preset is in use.
INSECURE_BANNER = (
    "!!! INSECURE: the '{preset}' preset gives NO security (small ring, tests only). "
    "Never use it for real data. !!!"
)


def warn_if_insecure(params: dict | None, stream: TextIO | None = None) -> bool:
    """Print the INSECURE banner to ``stream`` (stderr) when ``params`` are insecure; return whether it was."""
    if not params or not (params.get("insecure") or params.get("preset") == "toy"):
        return False
    print(INSECURE_BANNER.format(preset=params.get("preset", "toy")), file=stream or sys.stderr, flush=True)
    return True


def fmt_bytes(n: float) -> str:
    """Bytes as a short human string (``6.8 MB``)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def describe_params(p: dict) -> str:
    """One line describing a parameter description from the core (``describe``)."""
    parts = [f"preset {p.get('preset')}"]
    if "log_n" in p:
        parts.append(f"N = 2^{p['log_n']}")
    if "slots" in p:
        real = " real" if p.get("ring") == "ConjugateInvariant" else ""
        parts.append(f"{int(p['slots']):,}{real} slots")
    if "log_qp" in p:
        parts.append(f"log QP {float(p['log_qp']):.0f}")
    if p.get("insecure"):
        parts.append("INSECURE")
    elif "security_bits" in p:
        parts.append(f"{p['security_bits']}-bit security")
    for key, label in (("kappa", "kappa"), ("levels", "levels"), ("dim", "dim")):
        if key in p:
            parts.append(f"{label} {p[key]}")
    if p.get("payload"):
        parts.append("payload level")
    if "padded_dim" in p and p.get("padded_dim") != p.get("dim"):
        parts.append(f"padded to {p['padded_dim']}")
    if "group_size" in p:
        parts.append(f"group {int(p['group_size']):,} vectors")
    return ", ".join(parts)


def describe_strategy(name: str, n1: int) -> str:
    """A strategy and its baby-step size for humans: ``dg`` or ``bsgs-tbe (n1 8)``."""
    if not name:
        return "unknown"
    return name if name == "dg" else f"{name} (n1 {int(n1)})"


def gigabytes(text: str) -> int:
    """argparse type: a size in bytes from GB (a bare number, 10^9 bytes) or a size with a unit
    (``512MB``, ``1.5GiB``: :mod:`encmatch._util.units`); 0 means unlimited."""
    try:
        return parse_size(text, bare="GB")
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


def print_payloads(res: PayloadResult) -> None:
    """A payload answer as a table: one row per record (position, label when any, payload values)."""
    if res.complete:
        state = "complete"
    elif res.bound is not None and res.count > res.bound:
        state = f"INCOMPLETE: more than the bound, {len(res.positions)} returned"
    else:
        state = f"INCOMPLETE: {res.unresolved} could not be separated"
    bound = f"bound {res.bound}, " if res.bound is not None else ""
    print(f"payload: {res.count} match(es) ({bound}{state})")
    if not len(res.positions):
        return
    labelled = bool(res.labels) and any(res.labels)
    cols = [f"v{j}" for j in range(res.payloads.shape[1])]
    rows = [[str(int(p))] + ([shown(res.labels[i])] if labelled else []) + [str(int(v)) for v in res.payloads[i]]
            for i, p in enumerate(res.positions)]
    head = ["position"] + (["label"] if labelled else []) + cols
    widths = [max(len(r[k]) for r in rows + [head]) for k in range(len(head))]
    for r in [head] + rows:
        print("  " + "  ".join(c.rjust(w) if k != 1 or not labelled else c.ljust(w)
                               for k, (c, w) in enumerate(zip(r, widths))))


def shown(label: str) -> str:
    """A label as the terminal may show it: control and format characters (a label sealed by an older
    version, which did not refuse them) escaped as \\uXXXX, so that a name cannot move the cursor, hide
    text or reverse what follows it."""
    from ..enroller import _LABEL_FORBIDDEN, _LABEL_JOINERS

    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in _LABEL_FORBIDDEN and c not in _LABEL_JOINERS
                   else c for c in label)


def print_answer(res: Result, as_json: bool = False) -> None:
    """Print a decrypted answer (labels beside the positions when there are labels)."""
    if as_json:
        print(json.dumps(res.to_dict()))
    elif isinstance(res, PayloadResult):
        print_payloads(res)
    elif isinstance(res, MembershipResult):
        raw = f" (raw {res.raw_count:.3f})" if res.raw_count is not None else ""
        print(f"membership: {'ENROLLED' if res.enrolled else 'not enrolled'}; {res.count} match(es){raw}")
        if res.approximate:
            print("  approximate: some scores lie within the comparator's band of delta; the count may be off "
                  "by their number")
    else:
        print(f"identification: {res.count} match(es)")
        flagged = set(res.uncertain.tolist())
        for i, p in enumerate(res.positions):
            label = f"  {shown(res.labels[i])}" if res.labels and res.labels[i] else ""
            mark = "  (uncertain: score within the band of delta)" if int(p) in flagged else ""
            print(f"  {int(p)}{label}{mark}")
        others = sorted(flagged - set(res.positions.tolist()))
        if others:
            print(f"  uncertain, not counted as matches (scores within the band of delta): "
                  f"{', '.join(str(p) for p in others)}")
