"""Fetch by similarity: each record carries a payload (int16 values) that comes back, to the key holder
only, for the records whose vector matches the probe.

    python examples/payload_fetch.py [--preset toy]

The answer's size depends only on a public bound on the number of matches; more matches than the
bound are reported (PayloadIncomplete), never silently cut.
"""

import argparse
import tempfile
import warnings

import numpy as np

import encmatch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="default", help="parameter preset (default: %(default)s; toy is insecure)")
    args = ap.parse_args()
    warnings.simplefilter("ignore", encmatch.errors.InsecureParameters)

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((300, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[10:13] = vectors[9]                                   # four records of one person
    payloads = rng.integers(-1000, 1000, size=(300, 4), dtype=np.int16)  # e.g. a record id and flags
    probe, delta = vectors[9], 0.9

    with tempfile.TemporaryDirectory() as work, encmatch.EncryptedIndex.create(
            f"{work}/records", dim=32, delta=delta, preset=args.preset, payload_width=4, rule=">") as index:
        index.add(vectors, payloads=payloads)
        got = index.search(probe, mode="payload", bound=8)       # one probe in, one PayloadResult out

    want = np.flatnonzero(vectors @ probe > delta)
    assert sorted(got.positions.tolist()) == want.tolist(), (got.positions, want)
    assert sorted(map(tuple, got.payloads.tolist())) == sorted(map(tuple, payloads[want].tolist()))
    print(f"{got.count} matching records; payloads:\n{got.payloads}")


if __name__ == "__main__":
    main()
