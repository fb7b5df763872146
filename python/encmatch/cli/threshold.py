"""``encmatch threshold <action>``: the roles of t-out-of-n threshold decryption as commands.

::

    encmatch threshold init --setup setup.json --parties 3 --threshold 2 --dim 192 [--preset toy]
    encmatch threshold round1 --setup setup.json --party 1 --private p1/ --bulletin board/
    #   deliver p<i>/shamir-<i>-to-<j>.share privately to party j (into its --shares directory)
    encmatch threshold round2 --setup setup.json --party 1 --private p1/ --bulletin board/ --shares inbox1/
    encmatch threshold finalize --setup setup.json --bulletin board/ --keys server-keys/
    encmatch threshold receiver-keygen --setup setup.json --out receiver/
    encmatch threshold signing-keygen --out signing/        # the server; give signing/server-signing.pub to the decryptors
    #   a querier encrypts a query under server-keys/ (encmatch.Querier); the server searches and signs
    encmatch threshold search --keys server-keys/ --index faces/ --signing-key signing/server-signing.key \\
        --query query.bin --mode membership --out search.bin
    encmatch threshold decrypt-share --share p1/threshold-share-1.key --server-public signing/server-signing.pub \\
        --receiver-public receiver/receiver.pub --parties 1,3 --out share-1.bin search.bin
    encmatch threshold combine --receiver receiver/ search.bin share-1.bin share-3.bin

Decryptors share only search results bound to their query and signed by
the server they trust, each ciphertext once (a journal beside the share
file records them). ``threshold bind`` signs a result the server computed
elsewhere (a sharded search's merged result).

See ``docs/THRESHOLD.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from .. import threshold as th
from .._util.defaults import DEFAULT_KAPPA
from .._util.ui import warn_if_insecure
from ..errors import InvalidArgument
from .options import add_setup_rounds

__all__ = ["add_commands"]


def _ids(text: str) -> list[int]:
    """argparse type: comma-separated party ids."""
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated party ids, got {text!r}") from None
    if not ids:
        raise argparse.ArgumentTypeError("no party ids given")
    return ids


def _rotations(text: str) -> list[int]:
    """argparse type: comma-separated rotations (may be negative)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_commands(sub: Any) -> None:
    """Add ``threshold`` and its actions to the ``encmatch`` subparsers ``sub``."""
    p = sub.add_parser("threshold", help="t-out-of-n threshold key generation and decryption (docs/THRESHOLD.md)")
    act = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    s = act.add_parser("init", help="write the public description of a setup (give it to every party)")
    s.add_argument("--setup", type=Path, required=True, help="setup file to write")
    s.add_argument("--parties", type=int, required=True, help="number of decryptors n")
    s.add_argument("--threshold", type=int, required=True, help="decryptors needed to decrypt, t")
    s.add_argument("--dim", type=int, required=True, help="vector dimension of the key set")
    s.add_argument("--preset", choices=("default", "toy"), default="default", help="parameter preset (default: %(default)s; 'toy' is INSECURE; threshold key sets are on the standard ring only)")
    s.add_argument("--kappa", type=int, default=DEFAULT_KAPPA, help="comparator depth budget (default: %(default)s)")
    s.add_argument("--strategy", default="auto",
                   help="similarity strategy whose rotation keys to make, or 'none' (default: %(default)s)")
    s.add_argument("--n1", type=int, default=0, help="baby-step size of the bsgs strategies (default: automatic)")
    s.add_argument("--rotations", type=_rotations, default=[], metavar="R,R", help="more rotation keys to make")
    s.add_argument("--fold", action=argparse.BooleanOptionalAction, default=None,
                   help="fold each vector's halves into complex slots: half the diagonals, one more key (the "
                        "conjugation) (default: fold; --no-fold: plain layout)")
    s.set_defaults(func=cmd_init)

    add_setup_rounds(act, cmd_round)

    s = act.add_parser("finalize", help="aggregate the bulletin into a server key directory")
    s.add_argument("--setup", type=Path, required=True)
    s.add_argument("--bulletin", type=Path, required=True)
    s.add_argument("--keys", type=Path, required=True, help="server key directory to create")
    s.set_defaults(func=cmd_finalize)

    s = act.add_parser("receiver-keygen", help="make the receiver's key pair")
    s.add_argument("--setup", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True, help="receiver directory to create")
    s.set_defaults(func=cmd_receiver_keygen)

    s = act.add_parser("encrypt", help="encrypt values (.npy, 1-D or 2-D) under the collective public key")
    s.add_argument("--keys", type=Path, required=True, help="server key directory (from finalize)")
    s.add_argument("--out", type=Path, required=True, help="ciphertext file to write")
    s.add_argument("values", type=Path, metavar="VALUES.npy")
    s.set_defaults(func=cmd_encrypt)

    s = act.add_parser("signing-keygen", help="the server: make its signing key pair (decryptors trust the .pub)")
    s.add_argument("--out", type=Path, required=True, help="directory for server-signing.key and server-signing.pub")
    s.set_defaults(func=cmd_signing_keygen)

    s = act.add_parser("search", help="the server: search an index and sign the result bound to its query")
    s.add_argument("--keys", type=Path, required=True, help="server key directory (from finalize)")
    s.add_argument("--index", type=Path, required=True, help="index directory")
    s.add_argument("--signing-key", type=Path, required=True, help="the server's server-signing.key")
    s.add_argument("--query", type=Path, required=True, help="the querier's query")
    s.add_argument("--mode", choices=("membership", "identification"), default="membership",
                   help="what the search answers (default: %(default)s)")
    s.add_argument("--generation", type=int, default=0, help="version of the index, named in the transcript (default: %(default)s)")
    s.add_argument("--out", type=Path, required=True, help="signed search file to write (give it to the decryptors)")
    s.set_defaults(func=cmd_search)

    s = act.add_parser("bind", help="the server: sign a result it computed elsewhere (a merged sharded result), bound to its query")
    s.add_argument("--keys", type=Path, required=True, help="server key directory (from finalize)")
    s.add_argument("--signing-key", type=Path, required=True, help="the server's server-signing.key")
    s.add_argument("--index", required=True, help="id of the index searched")
    s.add_argument("--generation", type=int, default=0, help="generation of the index searched (default: %(default)s)")
    s.add_argument("--query", type=Path, required=True, help="the query the search answered")
    s.add_argument("--result", type=Path, required=True, help="the (complete) result this server computed for it")
    s.add_argument("--out", type=Path, required=True, help="signed search file to write (give it to the decryptors)")
    s.set_defaults(func=cmd_bind)

    s = act.add_parser("decrypt-share", help="a decryptor's decryption share of a bound search result (each once)")
    s.add_argument("--share", type=Path, required=True, help="this decryptor's threshold-share-<i>.key")
    s.add_argument("--server-public", type=Path, required=True,
                   help="server-signing.pub of the server this decryptor trusts (it shares only searches that server signed)")
    s.add_argument("--receiver-public", type=Path, required=True, help="the receiver's receiver.pub")
    s.add_argument("--parties", type=_ids, required=True, metavar="I,J", help="the t participating party ids")
    s.add_argument("--out", type=Path, required=True, help="decryption share file to write")
    s.add_argument("--flooding-bits", type=float, default=None,
                   help="log2 of this share's flooding noise (default: the secure size if it fits, else the largest that decodes)")
    s.add_argument("--noise-bits", type=float, default=None, help="stated log2 bound on the ciphertext noise (default: 12)")
    s.add_argument("--precision-bits", type=float, default=None, help="decode within 2^-bits (default: 4)")
    s.add_argument("--json", action="store_true", help="print the share's description as JSON")
    s.add_argument("ciphertext", type=Path, metavar="SEARCH", help="signed search (from threshold search or bind)")
    s.set_defaults(func=cmd_decrypt_share)

    s = act.add_parser("combine", help="the receiver: decrypt from t decryption shares")
    s.add_argument("--receiver", type=Path, required=True, help="receiver directory")
    s.add_argument("--out", type=Path, default=None, help=".npy file for the values [ciphertexts, slots]")
    s.add_argument("--slots", type=int, default=8, help="values of each ciphertext to print (default: %(default)s)")
    s.add_argument("--json", action="store_true", help="print the description as JSON")
    s.add_argument("ciphertext", type=Path, metavar="CIPHERTEXT")
    s.add_argument("shares", type=Path, nargs="+", metavar="SHARE")
    s.set_defaults(func=cmd_combine)


def cmd_init(args: argparse.Namespace) -> int:
    """``threshold init``."""
    res = th.init_setup(args.setup, parties=args.parties, threshold=args.threshold, dim=args.dim,
                        preset=args.preset, kappa=args.kappa, strategy=args.strategy, n1=args.n1,
                        rotations=args.rotations, fold=args.fold)
    warn_if_insecure(res["params"])
    setup = res["setup"]
    print(f"setup {args.setup}: {setup['threshold']}-out-of-{setup['parties']}, key id {setup['key_id']}, "
          f"{len(setup['galois_elements'])} rotation keys")
    return 0


def cmd_round(args: argparse.Namespace) -> int:
    """``threshold round1`` and ``threshold round2``."""
    if args.action == "round1":
        res = th.round1(args.setup, args.party, args.private, args.bulletin)
        print(f"party {args.party}: round 1 done in {res['seconds']:.2f} s; deliver privately: "
              + ", ".join(str(args.private / f) for f in res["shamir_files"]))
    else:
        res = th.round2(args.setup, args.party, args.private, args.bulletin, args.shares)
        print(f"party {args.party}: round 2 done in {res['seconds']:.2f} s; keep {args.private / res['share_file']}")
    return 0


def cmd_finalize(args: argparse.Namespace) -> int:
    """``threshold finalize``."""
    res = th.finalize(args.setup, args.bulletin, args.keys)
    print(f"server keys {args.keys}: key id {res['key_id']}, {res['rotation_keys']} rotation keys, {res['seconds']:.2f} s")
    return 0


def cmd_receiver_keygen(args: argparse.Namespace) -> int:
    """``threshold receiver-keygen``."""
    r = th.Receiver.generate(args.setup, args.out)
    print(f"receiver keys in {args.out}; give {r.public_key} to the decryptors")
    return 0


def cmd_encrypt(args: argparse.Namespace) -> int:
    """``threshold encrypt``."""
    values = np.load(args.values, allow_pickle=False)
    data = th.encrypt(args.keys, values)
    args.out.write_bytes(data)
    print(f"{args.out}: {len(data)} bytes")
    return 0


def cmd_signing_keygen(args: argparse.Namespace) -> int:
    """``threshold signing-keygen``."""
    info = th.generate_signing_key(args.out)
    print(f"server signing key {info['key']} (keep it on the server); give {info['public']} to the decryptors "
          f"(key {info['public_hex'][:16]})")
    return 0


def _print_signed(out: Path, info: dict, size: int) -> None:
    """One line about a signed search written to ``out``."""
    print(f"{out}: {info['mode']} result of index {info['index']} generation {info['generation']} bound to its query "
          f"and signed (transcript {info['transcript'][:16]}, signer {info['signer'][:16]}, {size} bytes)")


def cmd_search(args: argparse.Namespace) -> int:
    """``threshold search``."""
    from ..server import Server

    with Server(args.index, args.keys) as server:
        data = server.search(args.query.read_bytes(), args.mode, signing_key=args.signing_key, generation=args.generation)
        info = server.last_search["signed"]
    args.out.write_bytes(data)
    _print_signed(args.out, info, len(data))
    return 0


def cmd_bind(args: argparse.Namespace) -> int:
    """``threshold bind``."""
    data, info = th.bind_search(args.keys, args.query.read_bytes(), args.result.read_bytes(),
                                signing_key=args.signing_key, index=args.index, generation=args.generation)
    args.out.write_bytes(data)
    _print_signed(args.out, info, len(data))
    return 0


def cmd_decrypt_share(args: argparse.Namespace) -> int:
    """``threshold decrypt-share``."""
    share, info = th.Decryptor(args.share, args.server_public).decrypt_share(
        args.ciphertext.read_bytes(), args.parties, args.receiver_public, flooding_bits=args.flooding_bits,
        noise_bits=args.noise_bits, precision_bits=args.precision_bits)
    args.out.write_bytes(share)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        f = info["flooding"]
        print(f"party {info['party']} of {info['parties']}: {args.out} ({len(share)} bytes, {info['seconds']:.3f} s) "
              f"for the {info['mode']} search {info['transcript'][:16]} of index {info['index']}, recorded in {info['journal']}; "
              f"flooding 2^{f['flooding_bits']:.1f} (secure size 2^{f['secure_flooding_bits']:.1f}), "
              f"{f['hiding_bits']:.1f} bits of hiding for noise <= 2^{f['noise_bits']:g} if the flood were an ideal Gaussian "
              f"(Lattigo's sampler is not: docs/THRESHOLD.md, \"Secure flooding\")")
    return 0


def cmd_combine(args: argparse.Namespace) -> int:
    """``threshold combine``."""
    if args.slots < 0:
        raise InvalidArgument(f"--slots must be >= 0, got {args.slots}")
    receiver = th.Receiver(args.receiver)
    values, info = receiver.combine(args.ciphertext.read_bytes(), [p.read_bytes() for p in args.shares])
    if args.out is not None:
        np.save(args.out, values)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"decrypted {info['ciphertexts']} ciphertext(s) with parties {info['parties']} in {info['seconds']:.3f} s")
    answer = info.get("answer")
    if answer is not None:  # a search result: print what it answers
        if answer["mode"] == "membership":
            print(f"  membership: {answer['count']} match(es) (decrypted {answer['raw_count']:.4f})")
        else:
            print(f"  identification: {len(answer['matches'])} match(es) at {answer['matches']}")
        return 0
    for k, row in enumerate(values):
        print(f"  [{k}] " + " ".join(f"{v:.4f}" for v in row[: args.slots]))
    return 0
