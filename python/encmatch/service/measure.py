"""Running and measuring a real service: a server process helper, the load test and the
overhead of the service over an in-process search.

:class:`ServerProcess` starts ``encmatch serve`` as a subprocess on a free
loopback port and waits for ``/v1/health``; the test suite and this
module's measurements use it (no mocks: a real process, real HTTP).

``python -m encmatch.service.measure`` runs the figures of
``docs/SERVICE.md``: it generates a key set, enrolls a gallery, measures
the same searches in process and through a service process, interleaved
(round trip, the service's own search time, bytes on the wire), and a load
test of several concurrent clients, every answer checked against the
plaintext brute force. It prints JSON. With ``--overload-clients N`` it
also runs :func:`run_overload`: N concurrent connections (far more than
the service admits) for ``--overload-seconds``, every answer checked, the
health endpoint polled all along, the server's memory sampled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .._util.extras import require

require("service", "httpx")
import httpx  # noqa: E402


from ..evaluation.bruteforce import expected_results, same_answer
from ..keyholder import Client
from ..enroller import Enroller
from ..server import Server
from ..params import describe
from ..data import separated_gallery
from ..results import Result
from .._util.defaults import DEFAULT_KAPPA
from .client import ServiceClient
from .remote import RemoteIndex, create_index, enroll
from .tenancy import TokenStore

__all__ = ["ServerProcess", "free_port", "add_tenant", "run_load",
           "run_overload", "rss_bytes", "percentiles", "measure_commit_check", "main"]


def free_port() -> int:
    """A TCP port that is free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_tenant(data_dir: str | os.PathLike, name: str) -> str:
    """A new token for tenant ``name`` of the service whose data directory is ``data_dir``."""
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    return TokenStore(data_dir).add(name)


class ServerProcess:
    """``encmatch serve --data DATA ARGS`` as a subprocess on a free loopback port.

    ``start()`` returns once ``/v1/health`` answers; ``stop()`` sends
    SIGTERM (graceful shutdown) and returns the exit code; ``kill()``
    sends SIGKILL. The server's output goes to ``data.log`` beside the
    data directory.
    """

    def __init__(self, data_dir: str | os.PathLike, *args: str, port: int | None = None):
        """Prepare (not start) a server over ``data_dir`` with extra ``serve`` arguments ``args``."""
        self.data_dir = Path(data_dir)
        self.args = [str(a) for a in args]
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        #: httpx's ``verify=`` for the health poll (an SSL context for a server with a test certificate).
        self.verify: Any = True
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> "ServerProcess":
        """Start the process and wait until it answers ``/v1/health`` (RuntimeError if it exits or times out)."""
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "encmatch", "serve", "--data", str(self.data_dir), "--port", str(self.port),
             *self.args],
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with code {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                if httpx.get(self.url + "/v1/health", timeout=1.0, verify=self.verify).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the server did not answer within {timeout} s:\n{self.log()[-3000:]}")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait for the exit; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL (a crash), then reap the process."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        """The server's output so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.kill()


def percentiles(values: Sequence[float]) -> dict:
    """Median, p90, p99 and max of ``values`` (seconds)."""
    arr = np.asarray(values, dtype=float)
    return {"p50": float(np.percentile(arr, 50)), "p90": float(np.percentile(arr, 90)),
            "p99": float(np.percentile(arr, 99)), "max": float(arr.max()), "mean": float(arr.mean())}


def run_load(url: str, token: str, index_id: str, keys: str | os.PathLike, queries: np.ndarray,
             expected: dict[str, list[Result]], *, clients: int = 4, per_client: int = 75) -> dict:
    """``clients`` threads, each with its own :class:`RemoteIndex`, send ``per_client`` searches
    (cycling through ``queries`` and both modes) and check every answer against ``expected``.

    Returns counts (``queries``, ``answered``, ``wrong``, ``errors``), the
    wall time, the throughput (queries per second) and the latency
    percentiles of a whole search (encrypt, HTTP round trip, decrypt) and
    of the HTTP round trip alone.
    """
    modes = sorted(expected)
    lock = threading.Lock()
    latencies: list[float] = []
    round_trips: list[float] = []
    wrong: list[str] = []
    errors: list[str] = []
    answered = [0]
    barrier = threading.Barrier(clients)

    def client_loop(c: int) -> None:
        """One client: its own RemoteIndex, ``per_client`` searches, every answer checked."""
        try:
            with RemoteIndex(url, token, index_id, keys) as index:
                len(index)  # fetch the manifest before the clock starts
                barrier.wait()
                for i in range(per_client):
                    k = (c * per_client + i) % len(queries)
                    mode = modes[(c + i) % len(modes)]
                    t0 = time.perf_counter()
                    blob = index.client.encrypt_query(queries[k])
                    t1 = time.perf_counter()
                    result, _ = index.service.search(index.id, blob, mode)
                    t2 = time.perf_counter()
                    got = index.client.decrypt(result)
                    t3 = time.perf_counter()
                    with lock:
                        latencies.append(t3 - t0)
                        round_trips.append(t2 - t1)
                        answered[0] += 1
                        if not same_answer(got, expected[mode][k]):
                            wrong.append(f"client {c} query {k} {mode}: {got} != {expected[mode][k]}")
        except Exception as exc:  # noqa: BLE001 - reported in the summary, which the caller checks
            with lock:
                errors.append(f"client {c}: {type(exc).__name__}: {exc}")
            barrier.abort()

    threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {
        "clients": clients, "queries": clients * per_client, "answered": answered[0], "wrong": wrong,
        "errors": errors, "seconds": wall, "throughput_qps": answered[0] / wall if wall > 0 else 0.0,
        "latency": percentiles(latencies) if latencies else None,
        "round_trip": percentiles(round_trips) if round_trips else None,
    }


def rss_bytes(pid: int) -> tuple[int, int]:
    """``(resident, peak resident)`` bytes of process ``pid`` now (``/proc/<pid>/status`` VmRSS, VmHWM)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


def run_overload(url: str, token: str, index_id: str, keys: str | os.PathLike, queries: np.ndarray,
                 expected: dict[str, list[Result]], *, clients: int = 200, seconds: float = 10.0,
                 pid: int | None = None, timeout: float = 120.0) -> dict:
    """``clients`` concurrent connections (asyncio) hammer the service for ``seconds``; every answer is checked.

    Three quarters of the clients search the index (queries encrypted
    beforehand, cycling through ``queries`` and both modes; every result
    decrypted and compared with ``expected``), one in eight asks the
    index's status, one in eight sends a whole query to an index that does
    not exist (404 before the body is read). An answer is *clean* when it
    is that, or a JSON ``503 busy`` with ``Retry-After`` (the client then
    waits that long, +-50 %, as a well-behaved client does); anything else
    (another status, a wrong result, a transport error, no answer within
    ``timeout`` seconds) is counted in ``errors``/``wrong``. A connection
    lost before any answer (the service may close an idle keep-alive
    connection at the moment a client reuses it: RFC 9112 section 9.3.1)
    is tried once more on a fresh connection, as the SDK's client does,
    and counted in ``reconnects``; a second loss is an error. Meanwhile a
    thread of its own polls ``/v1/health`` every 50 ms on one more
    connection (each answer must be a JSON 200) and, with ``pid``, samples
    the server's resident memory.

    Returns counts, latency percentiles (all answers, searches answered
    200, health), the 503 count and the memory figures.
    """
    client = Client(keys)
    modes = sorted(expected)
    blobs = [(k, m, client.encrypt_query(queries[k])) for k in range(len(queries)) for m in modes]
    out: dict[str, Any] = {"clients": clients, "seconds": seconds, "requests": 0, "ok": 0, "busy": 0,
                           "not_found": 0, "reconnects": 0, "wrong": [], "errors": [], "health": 0,
                           "health_errors": []}
    latencies: list[float] = []
    search_latencies: list[float] = []
    health_latencies: list[float] = []
    rss = {"start": rss_bytes(pid)[0] if pid else 0, "peak": 0}
    auth = {"Authorization": f"Bearer {token}"}

    def note_error(what: str) -> None:
        """Keep the first few errors verbatim, count them all."""
        if len(out["errors"]) < 20:
            out["errors"].append(what)
        out["error_count"] = out.get("error_count", 0) + 1

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = loop.time() + seconds
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=url, headers=auth, timeout=timeout, limits=limits) as c:

            async def worker(i: int) -> None:
                n = 0
                while loop.time() < stop:
                    role = "status" if i % 8 == 0 else "unknown" if i % 8 == 4 else "search"
                    k, mode, blob = blobs[(i * 7 + n) % len(blobs)]
                    n += 1
                    t0 = time.perf_counter()
                    try:
                        for attempt in (0, 1):
                            try:
                                if role == "status":
                                    r = await c.get(f"/v1/indexes/{index_id}")
                                else:
                                    target = index_id if role == "search" else "0123456789abcdef"
                                    r = await c.post(f"/v1/indexes/{target}/search", params={"mode": mode},
                                                     content=blob)
                                break
                            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                                if attempt:
                                    raise
                                out["reconnects"] += 1
                    except httpx.HTTPError as exc:
                        note_error(f"{role}: {type(exc).__name__}: {exc}")
                        continue
                    finally:
                        out["requests"] += 1
                    dt = time.perf_counter() - t0
                    latencies.append(dt)
                    try:
                        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else None
                    except ValueError:
                        body = None
                    if r.status_code == 503 and isinstance(body, dict) and body.get("kind") == "busy" \
                            and r.headers.get("retry-after"):
                        out["busy"] += 1
                        await asyncio.sleep(float(r.headers["retry-after"]) * (0.5 + (i * 37 + n) % 100 / 100))
                    elif role == "unknown" and r.status_code == 404 and isinstance(body, dict):
                        out["not_found"] += 1
                    elif role == "status" and r.status_code == 200 and isinstance(body, dict):
                        out["ok"] += 1
                    elif role == "search" and r.status_code == 200:
                        got = client.decrypt(r.content)
                        search_latencies.append(dt)
                        if same_answer(got, expected[mode][k]):
                            out["ok"] += 1
                        elif len(out["wrong"]) < 20:
                            out["wrong"].append(f"query {k} {mode}: {got} != {expected[mode][k]}")
                    else:
                        note_error(f"{role}: HTTP {r.status_code}: {r.text[:200]}")

            await asyncio.gather(*(worker(i) for i in range(clients)))

    done = threading.Event()

    def health() -> None:
        """Poll /v1/health on a connection of its own, and sample the server's memory."""
        with httpx.Client(base_url=url, timeout=timeout) as hc:
            while not done.is_set():
                t0 = time.perf_counter()
                try:
                    r = hc.get("/v1/health")
                    ok = r.status_code == 200 and r.json().get("status") == "ok"
                except (httpx.HTTPError, ValueError) as exc:
                    ok, r = False, exc
                health_latencies.append(time.perf_counter() - t0)
                out["health"] += 1
                if not ok and len(out["health_errors"]) < 20:
                    out["health_errors"].append(str(getattr(r, "text", r))[:200])
                if pid:
                    rss["peak"] = max(rss["peak"], rss_bytes(pid)[0])
                done.wait(0.05)

    poller = threading.Thread(target=health)
    poller.start()
    t0 = time.perf_counter()
    try:
        asyncio.run(main())
    finally:
        done.set()
        poller.join()
    out["wall_seconds"] = time.perf_counter() - t0
    client.close()
    out["error_count"] = out.get("error_count", 0)
    out["latency"] = percentiles(latencies) if latencies else None
    out["search_latency"] = percentiles(search_latencies) if search_latencies else None
    out["health_latency"] = percentiles(health_latencies) if health_latencies else None
    if pid:
        out["rss_start"], out["rss_peak"] = rss["start"], max(rss["peak"], rss_bytes(pid)[0])
        out["rss_hwm"] = rss_bytes(pid)[1]
    return out


def _dir_bytes(path: Path) -> int:
    """Bytes of the files directly in ``path``."""
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def measure(work: Path, *, preset: str, kappa: int, dim: int, size: int, queries: int, clients: int,
            per_client: int, encryption: str = "secret-key", log: Any = print, overload_clients: int = 0,
            overload_seconds: float = 20.0, serve_args: Sequence[str] = (), skip_overhead: bool = False) -> dict:
    """Everything ``docs/SERVICE.md`` reports, at one parameter set (see the module docstring)."""
    rng = np.random.default_rng(7)
    delta = 0.5
    people = min(dim, 16)
    gallery, _, probes = separated_gallery(rng, dim, size, people)
    expected = {m: expected_results(gallery, probes, delta, m) for m in ("membership", "identification")}
    params = describe(preset, kappa, dim)
    out: dict[str, Any] = {"preset": preset, "insecure": bool(params["insecure"]), "kappa": kappa, "dim": dim,
                           "size": size, "log_n": params["log_n"], "cores": os.cpu_count(),
                           "encryption": encryption}
    log(f"keygen ({preset}, kappa {kappa}, dim {dim})")
    client = Client.generate(work / "keys", preset=preset, kappa=kappa, dim=dim)
    out["strategy"], out["n1"] = client.strategy, client.n1
    owner = client.key_dir if encryption == "secret-key" else None
    enroller = Enroller(client.server_key_dir, owner_key_dir=owner)
    enroller.create_index(work / "local", delta)
    enroller.enroll(work / "local", gallery)
    blobs = [client.encrypt_query(probes[i % len(probes)]) for i in range(queries + 1)]
    data = work / "service"
    token = add_tenant(data, "measure")
    args = [] if not params["insecure"] else ["--allow-insecure"]
    with ServerProcess(data, *args, "--no-access-log", *serve_args) as proc, \
            Server(work / "local", client.server_key_dir) as local, ServiceClient(proc.url, token) as service:
        log("remote: create, upload keys")
        t0 = time.perf_counter()
        index_id = create_index(service, client.server_key_dir, delta)
        out["keys_upload_seconds"] = time.perf_counter() - t0
        out["bytes_keys_wire"] = service.bytes_sent
        out["server_key_dir_bytes"] = _dir_bytes(client.server_key_dir)
        sent0 = service.bytes_sent
        t0 = time.perf_counter()
        summary = enroll(service, index_id, enroller, gallery)
        out["enroll_and_upload_seconds"] = time.perf_counter() - t0
        out["bytes_gallery_files"] = summary.uploaded_bytes
        out["bytes_gallery_wire"] = service.bytes_sent - sent0
        if overload_clients:
            log(f"overload: {overload_clients} concurrent clients for {overload_seconds:g} s")
            out["overload"] = run_overload(proc.url, token, index_id, work / "keys", probes, expected,
                                           clients=overload_clients, seconds=overload_seconds, pid=proc.proc.pid)
            out["serve_args"] = [*args, *serve_args]
        if skip_overhead:
            out["server_exit_code"] = proc.stop()
            client.close()
            return out
        log(f"{queries} membership searches, in process and through the service, interleaved")
        local.search(blobs[0], "membership")  # warm-ups
        service.search(index_id, blobs[0], "membership")
        in_proc, rts, served = [], [], []
        for i, b in enumerate(blobs[1:]):
            for where in (("local", "remote") if i % 2 == 0 else ("remote", "local")):
                if where == "local":
                    t0 = time.perf_counter()
                    local.search(b, "membership")
                    in_proc.append(time.perf_counter() - t0)
                    continue
                sent, recv = service.bytes_sent, service.bytes_received
                t0 = time.perf_counter()
                result, timings = service.search(index_id, b, "membership")
                rts.append(time.perf_counter() - t0)
                served.append(timings["search_seconds"])
                out["bytes_query_wire"] = service.bytes_sent - sent
                out["bytes_result_membership_wire"] = service.bytes_received - recv
        out["bytes_query"] = len(blobs[1])
        recv = service.bytes_received
        service.search(index_id, blobs[1], "identification")
        out["bytes_result_identification_wire"] = service.bytes_received - recv
        out["in_process_search"] = percentiles(in_proc)
        out["remote_round_trip"] = percentiles(rts)
        out["service_search"] = percentiles(served)
        base = out["in_process_search"]["p50"]
        paired = [r - l for r, l in zip(rts, in_proc)]
        handling = [r - s for r, s in zip(rts, served)]
        out["overhead_paired_seconds_p50"] = float(np.median(paired))
        out["overhead_paired_percent"] = 100.0 * out["overhead_paired_seconds_p50"] / base
        out["overhead_outside_search_seconds_p50"] = float(np.median(handling))
        out["overhead_outside_search_percent"] = 100.0 * out["overhead_outside_search_seconds_p50"] / base
        log(f"load test: {clients} clients x {per_client} searches")
        out["load"] = run_load(proc.url, token, index_id, work / "keys", probes, expected,
                               clients=clients, per_client=per_client)
        out["server_exit_code"] = proc.stop()
    client.close()
    return out


def measure_commit_check(work: Path, *, preset: str, kappa: int, dim: int, size: int, repeats: int = 3) -> dict:
    """What the commit's check in a child process costs: the core's load of an index (keys and
    groups) in this process against :func:`~encmatch.service.scheduler.check_in_subprocess` of its
    last group, ``repeats`` times each (seconds)."""
    from .scheduler import check_in_subprocess

    client = Client.generate(work / "keys", preset=preset, kappa=kappa, dim=dim)
    enroller = Enroller(client.server_key_dir)
    enroller.create_index(work / "index", 0.5)
    enroller.enroll(work / "index", np.random.default_rng(0).standard_normal((size, dim)).astype(np.float32))
    groups = len(json.loads((work / "index" / "manifest.json").read_text())["groups"])
    in_process, child = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        Server(work / "index", client.server_key_dir).close()
        in_process.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        check_in_subprocess(work / "index", client.server_key_dir, 0, [groups - 1])
        child.append(time.perf_counter() - t0)
    client.close()
    return {"preset": preset, "kappa": kappa, "dim": dim, "size": size, "groups": groups, "cores": os.cpu_count(),
            "in_process_load_seconds": in_process, "child_check_seconds": child}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m encmatch.service.measure``: print the measurements as JSON."""
    p = argparse.ArgumentParser(prog="python -m encmatch.service.measure", description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="default")
    p.add_argument("--kappa", type=int, default=DEFAULT_KAPPA, help="comparator depth budget (default: %(default)s)")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--size", type=int, default=1000, help="gallery size K")
    p.add_argument("--queries", type=int, default=10, help="timed searches, in process and remote")
    p.add_argument("--clients", type=int, default=4, help="load test: concurrent clients")
    p.add_argument("--per-client", type=int, default=10, help="load test: searches per client")
    p.add_argument("--encryption", choices=("secret-key", "public-key"), default="secret-key",
                   help="the service's gallery: the key owner's seeded encryption or any enroller's")
    p.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    p.add_argument("--overload-clients", type=int, default=0,
                   help="also run the overload test with this many concurrent connections (e.g. 200)")
    p.add_argument("--overload-seconds", type=float, default=20.0, help="duration of the overload test")
    p.add_argument("--overload-only", action="store_true",
                   help="run only the overload test (no in-process comparison, no load test)")
    p.add_argument("--commit-check-only", action="store_true",
                   help="measure only what the commit's check in a child process costs")
    p.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for encmatch serve (repeatable), e.g. --serve-arg=--max-queue=16")
    args = p.parse_args(argv)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="encmatch-measure-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.commit_check_only:
            print(json.dumps(measure_commit_check(work, preset=args.preset, kappa=args.kappa, dim=args.dim,
                                                  size=args.size), indent=1))
            return 0
        res = measure(work, preset=args.preset, kappa=args.kappa, dim=args.dim, size=args.size,
                      queries=args.queries, clients=args.clients, per_client=args.per_client,
                      encryption=args.encryption, log=log, overload_clients=args.overload_clients,
                      overload_seconds=args.overload_seconds, serve_args=args.serve_arg,
                      skip_overhead=args.overload_only)
    print(json.dumps(res, indent=1))
    failed = [r for r in (res.get("load"), res.get("overload")) if r and (r["wrong"] or r["errors"])]
    failed += [res["overload"]] if res.get("overload") and res["overload"]["health_errors"] else []
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
