"""``encmatch info``: what the core offers (presets), and what a key directory or an index directory holds.

A module of its own so that both the command line and the service's
``encmatch index info PATH`` (for a local directory) print the same summary.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import labels as labels_mod
from .._util.ui import describe_params, fmt_bytes, warn_if_insecure
from ..keyholder import Client
from ..manifest import index_info, Manifest
from ..params import presets, version
from ..faces.store import index_model

__all__ = ["cmd_info"]


def cmd_info(args: argparse.Namespace) -> int:
    """Show the core version and presets, or a key set, or an index."""
    if args.index is None and args.keys is None:
        v = version()
        print(f"encmatch core {v.get('version', '?')} (lattigo {v.get('lattigo', '?')})")
        print("presets (the vector dimension is chosen at keygen):")
        for p in presets():
            print(f"  {describe_params({k: v for k, v in p.items() if k not in ('dim', 'padded_dim')})}")
        return 0
    if args.keys is not None:
        with Client(args.keys) as client:
            warn_if_insecure(client.params)
            print(f"keys: {client.key_dir} (key id {client.key_id})")
            print(f"parameters: {describe_params(client.params)}")
            print(f"strategy: {client.strategy}, n1 {client.n1}")
            print(f"size on disk: {fmt_bytes(_disk_bytes(args.keys))} (server keys: "
                  f"{fmt_bytes(_disk_bytes(client.server_key_dir))})")
    if args.index is not None:
        m = index_info(args.index)
        warn_if_insecure(m.get("params"))
        if args.json:
            print(json.dumps(m))
            return 0
        print(f"index: {args.index}")
        print(f"entries: {Manifest.of(m).total:,}")
        for key in ("delta", "key_id"):
            if key in m:
                print(f"{key}: {m[key]}")
        band = m.get("guard_band")
        print(f"rule: score {m.get('rule') or '>='} delta" + ("" if m.get("rule") else " (no rule: the guard band on both sides)")
              + (f"; guard band [{band[0]:.4f}, {band[1]:.4f}]" if band else ""))
        if m.get("payload_width"):
            print(f"payloads: {int(m['payload_width'])} int16 value(s) per record")
        name, n1 = Manifest.of(m).strategy
        print(f"strategy: {name or 'unknown'}, n1 {n1}")
        if isinstance(m.get("groups"), list):
            print(f"groups: {len(m['groups'])}")
        if m.get("params"):
            print(f"parameters: {describe_params(m['params'])}")
        sealed = labels_mod.local_files(args.index)
        print(f"labels: {f'sealed, {len(sealed)} file(s)' if sealed else 'no'}")
        print(f"face model: {index_model(args.index) or 'not recorded (vectors enrolled from files)'}")
        print(f"size on disk: {fmt_bytes(_disk_bytes(args.index))}")
    return 0


def _disk_bytes(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
