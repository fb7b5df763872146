"""Encrypted 1:N iris matching by role (papers/004's first algorithm), on synthetic iris codes.

    python examples/iris_toy.py --preset toy        # INSECURE, about a minute: what the tests run
    python examples/iris_toy.py                     # the secure default preset (hours per batch on 2 cores)

The key holder enrolls an encrypted database, a querier encrypts query eyes (with rotations) under
the public key, the server matches them without any secret, and only the key holder decrypts one
bit per query eye: is this eye in the database (fractional Hamming distance below t at some
rotation)? The bits are checked against the plaintext model.
"""

import argparse
import dataclasses
import tempfile
from pathlib import Path

from encmatch.iris import POPULATIONS, generate, match
from encmatch.iris import encrypted as E


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="default", choices=E.PRESETS, help="(default: %(default)s; toy is insecure)")
    args = ap.parse_args()

    population = dataclasses.replace(POPULATIONS["daugman"], max_offset=3)  # captures turned by <= 3 columns
    gallery, queries = generate(200, n_queries=2, n_enrolled=1, seed=1, generator=population)
    t = 0.34                                                   # match iff FHD < t

    with tempfile.TemporaryDirectory() as work:
        keys = Path(work) / "keys"
        E.keygen(keys, preset=args.preset)                      # holder/, querier/, server/
        E.Client(keys).enroll(gallery, Path(work) / "db", t)  # the encrypted database
        E.Querier(keys).encrypt(queries, Path(work) / "q.bin", rotation_shift=3)
        stats = E.Server(keys).search(Path(work) / "db", Path(work) / "q.bin", Path(work) / "r.bin")
        holder = E.Client(keys)
        values = holder.decrypt(Path(work) / "r.bin")          # one value per query eye: 1 match, 0 not
        check = E.validate(values, match(queries, gallery, t, rotation_shift=3), holder.band(t))

    assert check.ok, check.to_dict()
    for qid, truth, v in zip(queries.ids, queries.truth, values):
        print(f"{qid}: {'match' if v > 0.5 else 'no match'} (enrolled: {truth or 'no'})")
    print(f"server: {stats['seconds']:.1f} s for {stats['eyes']} eyes x {stats['rotations']} rotations x {stats['codes']} codes")


if __name__ == "__main__":
    main()
