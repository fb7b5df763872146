"""Decrypted answers printed for people (or as one JSON line each)."""

from __future__ import annotations

import json

from .._util.text import shown
from ..results import MembershipResult, PayloadResult, Result

__all__ = ["print_answer", "print_payloads"]


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
