"""Encrypted 1:N face search in one process: create an index, add real face embeddings, search.

    python examples/faces_in_memory.py                 # the secure default preset (a few minutes)
    python examples/faces_in_memory.py --preset toy    # INSECURE, seconds: what the tests run

The key holder runs every role here (EncryptedIndex); the answers are checked against exact
brute force on the same embeddings (LFW faces embedded by MobileFaceNet, from ../shared/data).
"""

import argparse
import tempfile
import warnings

import numpy as np

import encmatch
from encmatch.data import load_faces


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="default", help="parameter preset (default: %(default)s; toy is insecure)")
    args = ap.parse_args()
    warnings.simplefilter("ignore", encmatch.errors.InsecureParameters)  # the toy preset says so loudly

    faces = load_faces("lfw", "mfn")                       # unit-norm 192-d embeddings and their names
    gallery, names = faces.emb[:500], list(faces.name[:500])  # name: each face's identity
    probes = np.vstack([gallery[7], gallery[123], faces.emb[-1]])  # two enrolled faces, one stranger
    delta = 0.6

    with tempfile.TemporaryDirectory() as work, \
            encmatch.EncryptedIndex.create(f"{work}/faces", dim=192, delta=delta, preset=args.preset) as index:
        index.add(gallery, labels=names)                    # labels are sealed for the key holder
        found = index.search(probes, mode="identification")  # a batch in, one result per probe out
        member = index.search(probes, mode="membership")

    for probe, hit, m in zip(probes, found, member):
        flagged = set(hit.uncertain.tolist())              # scores within the comparator's band of delta
        want = set(np.flatnonzero(gallery @ probe >= delta).tolist()) - flagged
        assert set(hit.positions.tolist()) - flagged == want, (hit.positions, want)  # exact brute force
        print(f"enrolled={m.enrolled!s:5}  matches={hit.positions.tolist()}  labels={hit.labels}"
              + (f"  uncertain={sorted(flagged)}" if flagged else ""))


if __name__ == "__main__":
    main()
