"""Parameter sets, similarity strategies and the checks of what a user passes (delta, rule, payload width,
memory budgets): each a thin layer over the core (``docs/ABI.md``).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from . import _core
from .errors import InvalidArgument
from ._util.defaults import DEFAULT_KAPPA
from ._util.units import parse_size


#: Let the core's cost and memory model choose the strategy.
AUTO = "auto"


#: Accepted strategy names: ``auto`` and the four similarity strategies of the core.
STRATEGIES = (AUTO, "dg", "bsgs-diagonal", "bsgs-tbs", "bsgs-tbe")


def version() -> dict:
    """Version of the core and of Lattigo it was built with, and the vector
    kernel set in use: ``{"version", "lattigo", "kernels", "kernel_sets"}``."""
    return _core.call("version")[0]


def set_threads(threads: int) -> dict:
    """Bound the core's threads (its GOMAXPROCS) in this process; 0 leaves it. Returns ``{"previous", "threads"}``.

    A search uses every thread allowed; a process that shares its machine
    (a Ray actor given some of the CPUs) sets its share here. Setting
    ``GOMAXPROCS`` in ``os.environ`` does not work once Python runs: the
    core reads the environment the process started with.
    """
    return _core.call("set_threads", {"threads": non_negative_int(threads, "threads")})[0]


def presets() -> list[dict]:
    """Descriptions of every parameter preset the core knows."""
    return _core.call("presets")[0].get("presets", [])


def describe(preset: str = "default", kappa: int = DEFAULT_KAPPA, dim: int = 512, *, payload: bool = False,
             fold: bool | None = None, fingerprint: str | None = None) -> dict:
    """Parameter description of ``preset`` for depth budget ``kappa`` and dimension ``dim``.

    Keys: ``preset, insecure, log_n, ring, slots, log_q, log_p, log_qp,
    security_bits, kappa, moduli, levels, dim, padded_dim, group_size,
    fingerprint`` (and ``payload``, ``fold``). ``payload``: the chain of a
    payload key set, one level longer; ``fold``: the folded layout, ``None``
    as a new key set takes it (folded where the preset can)
    (:meth:`Client.generate`); ``fingerprint``: an existing key set's, whose
    primes may be the ones chosen before 2026-11-29 (``moduli``
    "alternating"): the description is then of those, if they give it.
    """
    args: dict = {"preset": preset, "kappa": int(kappa), "dim": int(dim)}
    if payload:
        args["payload"] = True
    if fold is not None:
        args["fold"] = bool(fold)
    if fingerprint:
        args["fingerprint"] = str(fingerprint)
    return _core.call("describe", args)[0]


def comparator(kappa: int, delta: float, scores: Any = ()) -> dict:
    """Plaintext model of the encrypted comparator and its guard bands.

    Returns ``{"values", "decision_band", "value_band", "value_tolerance",
    "degrees", "gap", "sign_error"}``: ``values`` is the comparator
    evaluated at ``scores`` exactly as the encrypted pipeline computes it;
    ``degrees`` are its stages' degrees and ``gap`` its design value band
    (docs/COMPARATOR.md).
    """
    arr = _core.as_scores(scores)
    res, _ = _core.call("comparator", {"kappa": int(kappa), "delta": float(delta)}, arr if arr.size else None)
    return res


def non_negative_int(value: Any, name: str) -> int:
    """``value`` as an int >= 0 (``None`` is 0); InvalidArgument otherwise."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgument(f"{name} must be a non-negative number, got {value!r}")
    if not math.isfinite(value) or value < 0 or (not isinstance(value, numbers.Integral) and value != int(value)):
        raise InvalidArgument(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def memory_budget_bytes(memory_budget: Any) -> int:
    """A memory budget in bytes as the core takes it: bytes (an int), or a size with a unit such as
    ``"4GB"`` (:mod:`encmatch._util.units`); 0 or ``None``: unlimited."""
    if memory_budget is None:
        return 0
    if isinstance(memory_budget, str):
        return parse_size(memory_budget, bare=None, what="memory_budget")
    return non_negative_int(memory_budget, "memory_budget")


def strategy_args(
    strategy: str, n1: int, expected_size: int | None, memory_budget: int | None, workers: int | None
) -> dict:
    """The core arguments that choose a similarity strategy (``keygen``, ``choose_strategy``), checked."""
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"unknown strategy {strategy!r} (want one of {', '.join(STRATEGIES)})")
    return {
        "strategy": strategy,
        "n1": non_negative_int(n1, "n1"),
        "expected_size": non_negative_int(expected_size, "expected_size"),
        "memory_budget": memory_budget_bytes(memory_budget),
        "workers": non_negative_int(workers, "workers"),
    }


def check_dim(dim: Any) -> int:
    """``dim`` as a positive int; InvalidArgument otherwise."""
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim <= 0:
        raise InvalidArgument(f"dim must be a positive integer, got {dim!r}")
    return int(dim)


def choose_strategy(
    dim: int,
    preset: str = "default",
    kappa: int = DEFAULT_KAPPA,
    *,
    strategy: str = AUTO,
    n1: int = 0,
    expected_size: int | None = None,
    memory_budget: int | None = None,
    workers: int | None = None,
    seeded: bool = False,
    fold: bool | None = None,
) -> dict:
    """The strategy :meth:`Client.generate` would use with the same arguments, and the model's ranking.

    ``expected_size`` is the expected gallery size in vectors (default one
    group), ``memory_budget`` the server's memory in bytes (``None``:
    unlimited), ``workers`` its cores (``None``: this machine's),
    ``seeded`` whether the key owner enrolls (a seeded store: half the
    bytes streamed, the uniform halves regenerated), ``fold`` the layout
    (``None``: folded where the preset can, as a new key set). Returns
    ``{"strategy", "n1", "candidates", "kernels"}``; with
    ``strategy="auto"``, ``candidates`` ranks every strategy and n1, best
    first, each ``{"strategy", "n1", "keys", "key_bytes",
    "query_seconds", "load_seconds", "memory_bytes", "streamed"}``
    (predictions of a cost model measured at the default preset with the
    vector kernel set ``kernels``, this machine's, and scaled by
    ciphertext size; docs/STRATEGIES.md); for a named strategy it holds
    that strategy's estimate alone. When no strategy fits the budget,
    ``strategy`` and ``n1`` are ``None`` and ``error`` says why, next to
    the candidates.
    """
    args = {"preset": preset, "kappa": int(kappa), "dim": check_dim(dim)}
    if fold is not None:
        args["fold"] = bool(fold)
    args.update(strategy_args(strategy, n1, expected_size, memory_budget, workers))
    if not isinstance(seeded, bool):
        raise InvalidArgument(f"seeded must be True or False, got {seeded!r}")
    args["seeded"] = seeded
    res = _core.call("choose_strategy", args)[0]
    res["candidates"] = res.get("candidates") or []
    return res


#: The threshold rules an index can be created with: a match is ``score >= delta`` or ``score > delta``.
RULES = (">=", ">")


def check_rule(rule: Any) -> str | None:
    """``rule`` if it is one of :data:`RULES` or ``None`` (no rule: ``>=`` with the guard band on both sides
    of delta); InvalidArgument otherwise."""
    if rule is None:
        return None
    if not isinstance(rule, str) or rule not in RULES:
        raise InvalidArgument(f"rule must be '>=' or '>' (a match is score >= delta, or score > delta), got {rule!r}")
    return rule


def check_payload_width(width: Any) -> int:
    """``width`` (int16 payload values per record) as an int in 0..64; InvalidArgument otherwise."""
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) \
            or not 0 <= int(width) <= _core.MAX_PAYLOAD_WIDTH:
        raise InvalidArgument(f"payload_width must be an integer from 0 (no payloads) to {_core.MAX_PAYLOAD_WIDTH}, "
                              f"got {width!r}")
    return int(width)


def check_delta(delta: Any) -> float:
    """``delta`` as a float if it is a finite cosine similarity in the open interval (-1, 1); InvalidArgument otherwise."""
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise InvalidArgument(f"delta must be a number, got {delta!r}")
    delta = float(delta)
    if not math.isfinite(delta) or not -1.0 < delta < 1.0:
        raise InvalidArgument(f"delta must be a finite cosine similarity in the open interval (-1, 1), got {delta}")
    return delta


