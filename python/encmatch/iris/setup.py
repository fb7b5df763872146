"""The dealer-free setup of a threshold iris key set, party by party, through files (issue 34;
``docs/IRIS.md``, "Threshold iris: the setup in files").

No one ever holds a secret of the key set: n parties (the preset's: three for ``threshold``, 128-bit,
and ``toy-threshold``, INSECURE) each run two rounds in their own process, on their own machine::

    from encmatch.iris import setup as S

    S.init("setup.json", preset="toy-threshold", threshold=2, blocks=1)   # anyone; give it to every party
    S.round1("setup.json", party=i, private_dir=f"p{i}", bulletin_dir="bulletin")   # each party i
    # deliver each p{i}/shamir-{i}-to-{j}.share privately to party j (its inbox)
    S.round2("setup.json", party=i, private_dir=f"p{i}", bulletin_dir="bulletin", shares_dir=f"inbox{i}")
    S.finalize("setup.json", "bulletin", "keys")    # keys/server, keys/querier, keys/enroller

Each party keeps ``p{i}/party-{i}.key``: its Shamir share of the bootstrapping ring's secret (any
t of them decrypt) and its shares of the query secrets (its contribution to every enrollment)::

    from encmatch.iris import encrypted as E

    E.Enroller("keys").enroll(gallery, "db", t=0.34)                        # pending
    S.contribute("setup.json", i, f"p{i}", "keys", "db", f"c{i}.bin")       # each party i
    E.Enroller("keys").complete("db", ["c1.bin", "c2.bin", "c3.bin"])       # the server can load db
"""

from __future__ import annotations

from pathlib import Path

from .._core import call
from ..errors import InvalidArgument

__all__ = ["THRESHOLD_PRESETS", "init", "round1", "round2", "finalize", "contribute"]

#: The iris presets made for a threshold setup (three parties each).
THRESHOLD_PRESETS = ("threshold", "toy-threshold")


def init(setup: str | Path, *, preset: str = "threshold", threshold: int, blocks: int = 1,
         kappa: int | None = None) -> dict:
    """Write the public description of a setup to ``setup``: ``preset``'s parties, any ``threshold``
    of whom decrypt, keys for ``blocks`` database blocks (of 2^14 codes at ``threshold``, 2^10 at
    ``toy-threshold``). Returns ``{"setup": {...}}``."""
    if preset not in THRESHOLD_PRESETS:
        raise InvalidArgument(f"iris preset {preset!r} is not made for a threshold setup (choose from "
                              f"{', '.join(THRESHOLD_PRESETS)})")
    return call("iris_setup_init", {"out": str(setup), "preset": preset, "kappa": kappa or 0,
                                    "threshold": int(threshold), "blocks": int(blocks)})[0]


def _round(method: str, setup: str | Path, party: int, private_dir: str | Path, bulletin_dir: str | Path,
           shares_dir: str | Path | None = None) -> dict:
    """One round of a party; its private directory is created owner-only."""
    Path(private_dir).mkdir(parents=True, exist_ok=True)
    Path(private_dir).chmod(0o700)
    Path(bulletin_dir).mkdir(parents=True, exist_ok=True)
    args = {"setup": str(setup), "party": int(party), "private_dir": str(private_dir),
            "bulletin_dir": str(bulletin_dir)}
    if shares_dir is not None:
        args["shares_dir"] = str(shares_dir)
    return call(method, args)[0]


def round1(setup: str | Path, party: int, private_dir: str | Path, bulletin_dir: str | Path) -> dict:
    """Party ``party``'s first round: its public shares to ``bulletin_dir``, its state and its Shamir
    shares to ``private_dir``. Returns ``{"seconds", "shamir_files"}``: the j-th file (in
    ``private_dir``) goes privately to party j."""
    return _round("iris_setup_round1", setup, party, private_dir, bulletin_dir)


def round2(setup: str | Path, party: int, private_dir: str | Path, bulletin_dir: str | Path,
           shares_dir: str | Path) -> dict:
    """Party ``party``'s second round, once every first round is on the bulletin and the Shamir
    shares addressed to it are in ``shares_dir``. Returns ``{"seconds", "party_file"}``: the
    party's secrets in ``private_dir``, to keep."""
    return _round("iris_setup_round2", setup, party, private_dir, bulletin_dir, shares_dir)


def finalize(setup: str | Path, bulletin_dir: str | Path, keys: str | Path) -> dict:
    """Aggregate every party's messages into ``keys/server``, ``keys/querier`` and
    ``keys/enroller``. Returns ``{"key_id", "galois_keys", "blocks", "seconds"}``."""
    return call("iris_setup_finalize", {"setup": str(setup), "bulletin_dir": str(bulletin_dir),
                                        "keys": str(keys)})[0]


def contribute(setup: str | Path, party: int, private_dir: str | Path, keys: str | Path, db: str | Path,
               out: str | Path) -> dict:
    """Party ``party``'s contribution to the pending database ``db`` (enrolled with the enroller's
    directory in ``keys``), from its secrets in ``private_dir``, written to ``out``. Returns
    ``{"seconds"}``."""
    from .encrypted import role_dir

    return call("iris_contribute", {"setup": str(setup), "party": int(party), "private_dir": str(private_dir),
                                    "enroller": str(role_dir(keys, "enroller")), "db": str(db), "out": str(out)})[0]
