"""The server role as an HTTP service, the key holder and the enroller as its remote clients.

    python examples/service_remote.py [--preset toy]

It starts ``encmatch serve`` on a free loopback port (a deployment runs it on its own host, with
--tls-cert/--tls-key), adds a tenant, then creates, fills and searches a remote index with
RemoteIndex: the service stores and searches ciphertexts only; labels are sealed, results are
decrypted here. A toy preset is served only with --allow-insecure.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import httpx
import numpy as np

import encmatch
from encmatch.service import RemoteIndex


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(data: Path, port: int, insecure: bool) -> subprocess.Popen:
    """``encmatch serve`` in a child process, once its /v1/health answers."""
    cmd = [sys.executable, "-m", "encmatch", "serve", "--data", str(data), "--port", str(port)]
    proc = subprocess.Popen(cmd + (["--allow-insecure"] if insecure else []),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the service did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="default", help="parameter preset (default: %(default)s; toy is insecure)")
    args = ap.parse_args()
    warnings.simplefilter("ignore", encmatch.errors.InsecureParameters)

    rng = np.random.default_rng(5)
    gallery = rng.standard_normal((100, 32)).astype(np.float32)
    gallery /= np.linalg.norm(gallery, axis=1, keepdims=True)
    names = [f"person-{i:03d}" for i in range(len(gallery))]

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        data = work / "service-data"
        token = subprocess.run([sys.executable, "-m", "encmatch", "tenant", "add", "--data", str(data), "bank"],
                               check=True, capture_output=True, text=True).stdout.split()[-1]
        port = free_port()
        service = start_service(data, port, insecure=args.preset.startswith("toy"))
        try:
            encmatch.Client.generate(work / "keys", args.preset, dim=32).close()  # the key holder's keys
            url = f"http://127.0.0.1:{port}"
            with RemoteIndex.create(url, token, work / "keys", delta=0.9, label="branch gallery") as index:
                index.add(gallery, labels=names)                  # uploaded, committed, searchable
                hits = index.search(gallery[[3, 77]], mode="identification")
            for want, hit in zip((3, 77), hits):
                assert want in hit.positions.tolist(), hit
                print(f"probe of {names[want]}: matches {hit.labels}")
        finally:
            service.terminate()
            service.wait(60)


if __name__ == "__main__":
    os.environ.pop("ENCMATCH_TOKEN", None)  # the token is passed explicitly here
    main()
