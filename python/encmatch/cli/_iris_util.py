"""Helpers shared by the ``encmatch iris`` command modules: JSON output, log lines, the threshold argument."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["emit", "log", "threshold"]


def emit(obj: Any, out: Path | None = None) -> None:
    """Print ``obj`` as indented JSON, or write it to ``out``."""
    text = json.dumps(obj, indent=2)
    if out is None:
        print(text)
    else:
        out.write_text(text + "\n", encoding="utf-8")


def log(text: str) -> None:
    """A line on stderr."""
    print(text, file=sys.stderr, flush=True)


def threshold(text: str) -> float:
    """argparse type: a fractional Hamming threshold in (0, 0.5]."""
    t = float(text)
    if not 0 < t <= 0.5:
        raise argparse.ArgumentTypeError(f"a Hamming threshold must be in (0, 0.5], got {text}")
    return t
