"""Progress of long work: a tqdm bar on a terminal, periodic log lines elsewhere.

A bar drawn with carriage returns is useless under a scheduler, in CI or
in a log file: nothing readable appears until the end. :func:`progress`
gives a tqdm bar when stderr is a terminal and, when it is not, a
:class:`LogLines` that writes one plain line to stderr at most every
``ENCMATCH_PROGRESS_SECONDS`` seconds (default 15)::

    enroll: 4,096/16,384 vec (25 %), 12 s elapsed, about 36 s left

and a closing ``done`` line when it wrote any (short work stays silent).
Both have tqdm's ``update``, iteration and context-manager interface.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterable, Iterator, TextIO

from tqdm.auto import tqdm

__all__ = ["progress", "LogLines", "interval_seconds"]

#: Environment variable: seconds between two log lines off a terminal.
INTERVAL_ENV = "ENCMATCH_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 15.0


def interval_seconds() -> float:
    """Seconds between two progress lines off a terminal (``$ENCMATCH_PROGRESS_SECONDS``, default 15)."""
    text = os.environ.get(INTERVAL_ENV, "")
    try:
        value = float(text) if text else DEFAULT_INTERVAL
    except ValueError:
        value = DEFAULT_INTERVAL
    return value if value >= 0 else DEFAULT_INTERVAL


def _amount(n: float, unit: str, unit_scale: bool) -> str:
    """``n`` with its unit: ``4,096 vec`` or, scaled, ``1.2 GB``."""
    if unit_scale:
        for prefix in ("", "k", "M", "G", "T"):
            if abs(n) < 1000 or prefix == "T":
                return f"{n:.0f} {unit}" if not prefix else f"{n:.1f} {prefix}{unit}"
            n /= 1000
    return f"{int(n):,} {unit}"


class LogLines:
    """Progress as plain log lines (see the module doc); tqdm's interface, without a terminal."""

    def __init__(self, iterable: Iterable | None = None, *, total: float | None = None, desc: str = "",
                 unit: str = "it", unit_scale: bool = False, stream: TextIO | None = None,
                 interval: float | None = None):
        """Count ``iterable``'s items or ``update`` calls towards ``total`` (``len(iterable)`` when it has one)."""
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total, self.desc, self.unit, self.unit_scale = total, desc, unit, unit_scale
        self.stream = stream
        self.interval = interval_seconds() if interval is None else interval
        self.n = 0.0
        self.start = self.last = time.monotonic()
        self.lines = 0
        self.closed = False
        self.postfix = ""

    def _write(self, text: str) -> None:
        print(f"{self.desc}: {text}" if self.desc else text, file=self.stream or sys.stderr, flush=True)
        self.lines += 1

    def line(self) -> str:
        """The current state as one line (without the description)."""
        elapsed = time.monotonic() - self.start
        done = _amount(self.n, self.unit, self.unit_scale)
        if not self.total:
            return f"{done}, {elapsed:.0f} s elapsed" + (f" ({self.postfix})" if self.postfix else "")
        text = f"{done.split(' ')[0]}/{_amount(self.total, self.unit, self.unit_scale)} ({100 * self.n / self.total:.0f} %)"
        text += f", {elapsed:.0f} s elapsed"
        if 0 < self.n < self.total:
            text += f", about {elapsed * (self.total - self.n) / self.n:.0f} s left"
        return text + (f" ({self.postfix})" if self.postfix else "")

    def update(self, n: float = 1) -> None:
        """Count ``n`` more; write a line when the interval has passed since the last one."""
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._write(self.line())

    def set_postfix(self, **values: Any) -> None:
        """Values shown at the end of the next lines (tqdm's ``set_postfix``), e.g. the last trial's time."""
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        """Write the closing line (only after earlier lines: short work stays silent)."""
        if self.closed:
            return
        self.closed = True
        if self.lines:
            self._write(f"done, {_amount(self.n, self.unit, self.unit_scale)} in "
                        f"{time.monotonic() - self.start:.0f} s")

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in () if self.iterable is None else self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> "LogLines":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress(iterable: Iterable | None = None, *, total: float | None = None, desc: str = "", unit: str = "it",
             unit_scale: bool = False, show: bool = True) -> Any:
    """A progress reporter for ``iterable`` (or ``update`` calls towards ``total``).

    ``show`` False: silent. Otherwise a tqdm bar when stderr is a terminal,
    else :class:`LogLines`.
    """
    if not show:
        return tqdm(iterable, total=total, disable=True)
    if sys.stderr.isatty():
        return tqdm(iterable, total=total, desc=desc, unit=unit, unit_scale=unit_scale, leave=False)
    return LogLines(iterable, total=total, desc=desc, unit=unit, unit_scale=unit_scale)
