"""Label text: which characters a label may not hold, and how a label is shown on a terminal."""

from __future__ import annotations

import unicodedata

__all__ = ["LABEL_FORBIDDEN", "LABEL_JOINERS", "forbidden_char", "shown"]

#: Unicode categories a label may not hold: control characters (NUL, escapes, newlines), format
#: characters (right-to-left overrides and other invisible marks that make a shown name lie; the zero-width
#: joiners that Persian, Indic scripts and emoji need excepted), surrogates and unassigned code points.
LABEL_FORBIDDEN = ("Cc", "Cf", "Cs", "Cn")

#: The zero-width (non-)joiners, format characters that labels may hold.
LABEL_JOINERS = ("\u200c", "\u200d")


def forbidden_char(text: str) -> str | None:
    """The first character of ``text`` a label may not hold, or ``None``."""
    return next((c for c in text if unicodedata.category(c) in LABEL_FORBIDDEN and c not in LABEL_JOINERS), None)


def shown(label: str) -> str:
    """A label as the terminal may show it: control and format characters (a label sealed by an older
    version, which did not refuse them) escaped as \\uXXXX, so that a name cannot move the cursor, hide
    text or reverse what follows it."""
    return "".join(f"\\u{ord(c):04x}" if forbidden_char(c) else c for c in label)
