"""The three roles on separate key directories, as they run on separate machines.

    python examples/separate_roles.py [--preset toy]

- the key holder (Client) makes the key set and keeps its secret key in keys/;
- the enroller (Enroller) has only keys/server/ (public key, evaluation keys) and encrypts a gallery;
- the server (Server) has keys/server/ and the index, never a secret key, and answers encrypted
  queries with encrypted results that only the key holder can read.
"""

import argparse
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

import encmatch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="default", help="parameter preset (default: %(default)s; toy is insecure)")
    args = ap.parse_args()
    warnings.simplefilter("ignore", encmatch.errors.InsecureParameters)

    rng = np.random.default_rng(1)
    gallery = rng.standard_normal((200, 64)).astype(np.float32)
    gallery /= np.linalg.norm(gallery, axis=1, keepdims=True)
    probe = gallery[42] + 0.05 * rng.standard_normal(64).astype(np.float32)
    delta = 0.8

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        # 1. The key holder: keys/ (secret) and keys/server/ (what it hands out).
        encmatch.Client.generate(work / "keys", args.preset, dim=64).close()
        # 2. The enroller receives a copy of keys/server/ only.
        shutil.copytree(work / "keys" / "server", work / "enroller-keys")
        enroller = encmatch.Enroller(work / "enroller-keys")
        enroller.create_index(work / "index", delta)         # the threshold is the index's for good
        enroller.enroll(work / "index", gallery)
        # 3. The server: the index and its own copy of keys/server/.
        shutil.copytree(work / "keys" / "server", work / "server-keys")
        with encmatch.Client(work / "keys") as client, encmatch.Server(work / "index", work / "server-keys") as server:
            query = client.encrypt_query(probe)           # bytes: what travels to the server
            result = server.search(query, "identification")  # bytes: what travels back
            answer = client.decrypt(result, delta=delta)  # an IdentificationResult, checked against delta

    scores = gallery @ (probe / np.linalg.norm(probe))
    flagged = set(answer.uncertain.tolist())
    assert set(answer.positions.tolist()) - flagged == set(np.flatnonzero(scores >= delta).tolist()) - flagged
    print(f"query {len(query):,} bytes, result {len(result):,} bytes; matches {answer.positions.tolist()}")


if __name__ == "__main__":
    main()
