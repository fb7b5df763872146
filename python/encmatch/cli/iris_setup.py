"""The threshold iris key set's commands, each party in its own process (``docs/IRIS.md``, "Threshold
iris: the setup in files"): its dealer-free setup, and each party's part of an enrollment.

::

    encmatch iris setup init     --setup S.json --threshold 2 [--preset threshold|toy-threshold] [--blocks 1]
    encmatch iris setup round1   --setup S.json --party I --private PI --bulletin B
    encmatch iris setup round2   --setup S.json --party I --private PI --bulletin B --shares INBOX_I
    encmatch iris setup finalize --setup S.json --bulletin B --keys K    # K/server, K/querier, K/enroller
    encmatch iris enroll     --keys K --db D --t 0.34 GALLERY...          # the enroller: D is pending
    encmatch iris contribute --setup S.json --party I --private PI --keys K --db D -o C_I.bin   # each party
    encmatch iris complete   --keys K --db D C_1.bin C_2.bin C_3.bin      # anyone: the server can load D
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..iris import encrypted as E
from ..iris import setup as S
from .options import add_setup_rounds

__all__ = ["add_commands"]


def add_commands(sub: Any) -> None:
    """Add ``setup`` (and its actions), ``contribute`` and ``complete`` to the ``iris`` subparsers."""
    p = sub.add_parser("setup", help="threshold key set: the parties' dealer-free setup (no one holds a secret)")
    act = p.add_subparsers(dest="setup_action", required=True, metavar="ACTION")

    s = act.add_parser("init", help="write the public description of a setup (give it to every party)")
    s.add_argument("--setup", type=Path, required=True, help="setup file to write")
    s.add_argument("--preset", choices=S.THRESHOLD_PRESETS, default="threshold",
                   help="parameters: threshold (128-bit, three parties) or toy-threshold (INSECURE, tests) "
                        "(default: %(default)s)")
    s.add_argument("--threshold", type=int, required=True, help="parties needed to decrypt, t")
    s.add_argument("--blocks", type=int, default=1,
                   help="database blocks to make keys for (2^14 codes each at threshold) (default: %(default)s)")
    s.add_argument("--kappa", type=int, default=None, help="comparator depth (default: the preset's)")
    s.set_defaults(func=cmd_init)

    add_setup_rounds(act, cmd_round)

    s = act.add_parser("finalize", help="aggregate the bulletin into the key set (server, querier, enroller)")
    s.add_argument("--setup", type=Path, required=True)
    s.add_argument("--bulletin", type=Path, required=True)
    s.add_argument("--keys", type=Path, required=True, help="key set directory to create")
    s.set_defaults(func=cmd_finalize)

    s = sub.add_parser("contribute", help="threshold key set: a party's contribution to a pending database")
    s.add_argument("--setup", type=Path, required=True)
    s.add_argument("--party", type=int, required=True, help="this party's number, 1..n")
    s.add_argument("--private", type=Path, required=True, help="this party's private directory (its party-I.key)")
    s.add_argument("--keys", type=Path, required=True, help="the key set's root or its enroller directory")
    s.add_argument("--db", type=Path, required=True, help="the pending database directory")
    s.add_argument("-o", "--out", type=Path, required=True, help="contribution file to write (give it to the enroller)")
    s.set_defaults(func=cmd_contribute)

    s = sub.add_parser("complete", help="threshold key set: finish a pending database from every party's contribution")
    s.add_argument("contributions", nargs="+", type=Path, metavar="CONTRIBUTION", help="one file per party")
    s.add_argument("--keys", type=Path, required=True, help="the key set's root or its enroller directory")
    s.add_argument("--db", type=Path, required=True, help="the pending database directory")
    s.set_defaults(func=cmd_complete)


def cmd_init(args: argparse.Namespace) -> int:
    """``iris setup init``."""
    setup = S.init(args.setup, preset=args.preset, threshold=args.threshold, blocks=args.blocks,
                   kappa=args.kappa)["setup"]
    print(f"setup {args.setup}: preset {setup['preset']}, {setup['threshold']} of {setup['parties']} parties "
          f"decrypt, keys for {setup['blocks']} database block(s), key id {setup['key_id']}")
    return 0


def cmd_round(args: argparse.Namespace) -> int:
    """``iris setup round1`` and ``round2``."""
    if args.setup_action == "round1":
        res = S.round1(args.setup, args.party, args.private, args.bulletin)
        print(f"party {args.party}: round 1 done in {res['seconds']:.2f} s; deliver privately, the j-th to party j: "
              + ", ".join(str(args.private / f) for f in res["shamir_files"]))
    else:
        res = S.round2(args.setup, args.party, args.private, args.bulletin, args.shares)
        print(f"party {args.party}: round 2 done in {res['seconds']:.2f} s; keep {args.private / res['party_file']}")
    return 0


def cmd_finalize(args: argparse.Namespace) -> int:
    """``iris setup finalize``."""
    res = S.finalize(args.setup, args.bulletin, args.keys)
    print(f"key set {args.keys}: key id {res['key_id']}, {res['galois_keys']} Galois keys, keys for "
          f"{res['blocks']} database block(s), {res['seconds']:.2f} s")
    return 0


def cmd_contribute(args: argparse.Namespace) -> int:
    """``iris contribute``."""
    res = S.contribute(args.setup, args.party, args.private, args.keys, args.db, args.out)
    print(f"party {args.party}: contribution to {args.db} in {res['seconds']:.1f} s -> {args.out}")
    return 0


def cmd_complete(args: argparse.Namespace) -> int:
    """``iris complete``."""
    meta = E.Enroller(args.keys).complete(args.db, args.contributions)["meta"]
    print(f"database {args.db}: {meta['codes']} codes in {meta['blocks']} blocks, complete: the server can load it")
    return 0
