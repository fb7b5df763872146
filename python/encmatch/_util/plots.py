"""matplotlib for the plots of bench, calibrate, accuracy and plan: headless (Agg), and a clear error
naming the ``plots`` extra when it is not installed."""

from __future__ import annotations

from .extras import require

__all__ = ["pyplot"]


def pyplot():
    """``matplotlib.pyplot`` on the headless Agg backend; raises :class:`encmatch.errors.MissingExtra`
    (extra ``plots``) without matplotlib."""
    require("plots", "matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
