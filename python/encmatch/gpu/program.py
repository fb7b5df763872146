"""Replay of the comparator's program (core/face/offload: Lattigo's polynomial
evaluator recorded as straight-line ring operations) on a batch of
ciphertexts, one per group."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import Internal
from .ring import Ring

__all__ = ["Program"]


class Program:
    """A recorded program, its linear steps' tables on the device."""

    def __init__(self, ring: Ring, spec: dict):
        self.ring = ring
        self.ops = spec["ops"]
        self.output = int(spec["output"])
        self._tables: dict[int, tuple[Any, Any]] = {}
        self._last: dict[int, int] = {}
        for i, op in enumerate(self.ops):
            for reg in op["in"]:
                self._last[reg] = i
            if op["op"] == "linear":
                r = op["level"] + 1
                s = np.array(op["scalars"], dtype=np.uint64).reshape(len(op["in"]), r, 2)
                c = np.array(op["constant"], dtype=np.uint64).reshape(r, 2)
                self._tables[i] = (ring.be.put(s), ring.be.put(c))
            elif op["op"] not in ("tensor", "mulrelin", "relin", "rescale"):
                raise Internal(f"the comparator's program has an unknown step {op['op']!r}")

    def run(self, x: Any, rlk: Any) -> Any:
        """Runs the program on x (g x 2 x r rows: g ciphertexts of scores)
        with relinearisation key rlk; returns g ciphertexts."""
        ring, xp = self.ring, self.ring.be.xp
        g = x.shape[0]
        regs: dict[int, Any] = {0: x}
        for i, op in enumerate(self.ops):
            kind, r, deg = op["op"], op["level"] + 1, op["degree"]
            ins = [regs[reg] for reg in op["in"]]
            if kind == "linear":
                s, c = self._tables[i]
                out = ring.linear(ins, s, c, g, deg, r)
            elif kind in ("tensor", "mulrelin"):
                out = ring.tensor(ins[0], ins[1], g, r)
                if kind == "mulrelin":
                    out = ring.relinearize(out, rlk, g, r)
            elif kind == "relin":
                out = ring.relinearize(_at(xp, ins[0], r), rlk, g, r)
            else:  # rescale
                src = ins[0]
                out = ring.rescale(src, g * src.shape[1], src.shape[2]).reshape(g, src.shape[1], src.shape[2] - 1, ring.n)
            if out.shape != (g, deg + 1, r, ring.n):
                raise Internal(f"step {i} ({kind}) gave shape {out.shape}, recorded degree {deg} at {r} rows")
            regs[op["out"]] = out
            for reg in op["in"]:
                if self._last.get(reg) == i and reg != self.output:
                    regs.pop(reg, None)
        return regs[self.output]


def _at(xp: Any, x: Any, r: int) -> Any:
    """x read at its first r rows, contiguous."""
    return x if x.shape[-2] == r else xp.ascontiguousarray(x[..., :r, :])
