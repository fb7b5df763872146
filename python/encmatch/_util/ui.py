"""Human-readable output shared by the command line, the demo and the benchmarks: the INSECURE banner,
byte sizes, parameter and strategy descriptions, and sizes given in GB."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ..errors import InvalidArgument
from .units import parse_size

__all__ = ["INSECURE_BANNER", "warn_if_insecure", "fmt_bytes", "describe_params", "describe_strategy", "gigabytes"]


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
    if p.get("fold"):
        parts.append(f"folded ({int(p['padded_dim']) // 2} complex diagonals per group)")
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
