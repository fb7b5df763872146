"""The service under more load than it admits, through a real ``encmatch serve`` process on loopback.

200 concurrent connections search one index (toy preset), ask its status and send queries to an
index that does not exist, for a few seconds: every answer is correct or a clean JSON ``503
busy`` with ``Retry-After``, no request goes unanswered, ``/v1/health`` answers all along, the
server's memory stays bounded. A client that stops sending its body is answered 408 after the
body deadline. (``python -m encmatch.service.measure --overload-clients 200`` is the longer
measurement of docs/SERVICE.md.)
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import numpy as np
import pytest

import encmatch
from encmatch.service import RemoteIndex
from encmatch.service.measure import (
    ServerProcess,
    add_tenant,
    expected_results,
    rss_bytes,
    run_overload,
    same_answer,
    separated_gallery,
)

DIM = 16
KAPPA = 8
DELTA = 0.5
MODES = ("membership", "identification")


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """A toy key set."""
    d = tmp_path_factory.mktemp("load-keys") / "keys"
    encmatch.Client.generate(d, preset="toy", kappa=KAPPA, dim=DIM).close()
    return d


@pytest.fixture(scope="module")
def service(tmp_path_factory, keys):
    """A service (4 MiB bodies, 8 searches queued, body deadline 1.5 s, header deadline 3 s) with
    one index of 600 entries."""
    data_dir = tmp_path_factory.mktemp("load") / "data"
    token = add_tenant(data_dir, "alice")
    proc = ServerProcess(data_dir, "--allow-insecure", "--max-body-mb", "4", "--max-queue", "8",
                         "--body-timeout", "1.5", "--header-timeout", "3", "--no-access-log").start()
    gallery, _, queries = separated_gallery(np.random.default_rng(5), DIM, 600, 16)
    index = RemoteIndex.create(proc.url, token, keys, DELTA)
    index.add(gallery)
    yield {"proc": proc, "token": token, "index": index, "gallery": gallery, "queries": queries}
    index.close()
    code = proc.stop()
    proc.kill()
    assert code == 0, proc.log()[-3000:]
    assert "Traceback" not in proc.log(), proc.log()[-5000:]


def test_overload_200_clients(service, keys):
    proc, index = service["proc"], service["index"]
    expected = {m: expected_results(service["gallery"], service["queries"], DELTA, m) for m in MODES}
    res = run_overload(proc.url, service["token"], index.id, keys, service["queries"], expected,
                       clients=200, seconds=6.0, pid=proc.proc.pid, timeout=60.0)
    lat, health = res["latency"], res["health_latency"]
    print(f"\noverload (toy, K = 600, 200 connections, {res['wall_seconds']:.1f} s): {res['requests']} requests, "
          f"{res['ok']} correct, {res['busy']} busy, {res['not_found']} not found, errors {res['error_count']}, "
          f"reconnects {res['reconnects']}; "
          f"latency p50 {lat['p50']:.2f} s, p99 {lat['p99']:.2f} s, max {lat['max']:.2f} s; "
          f"health {res['health']} polls, p50 {health['p50'] * 1e3:.0f} ms, max {health['max'] * 1e3:.0f} ms; "
          f"RSS {res['rss_start'] / 2**20:.0f} -> peak {res['rss_peak'] / 2**20:.0f} MiB")
    assert res["errors"] == [] and res["wrong"] == [] and res["health_errors"] == [], res
    assert res["ok"] >= 10 and res["busy"] >= 10 and res["not_found"] >= 1
    # A keep-alive connection closed as it is reused is tried again (as HTTP clients do); a service
    # that drops connections under load would show many of these.
    assert res["reconnects"] <= max(3, res["requests"] // 100), res
    assert res["health"] >= 20 and health["max"] < 5.0
    assert lat["max"] < 60.0  # every request answered, none left hanging
    assert res["rss_peak"] - res["rss_start"] < 300 << 20
    with httpx.Client(base_url=proc.url, timeout=30) as c:
        deadline = time.monotonic() + 30
        while c.get("/v1/health").json()["queue"]["pending"] or c.get("/v1/health").json()["load"]["requests"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        load = c.get("/v1/health").json()["load"]
    assert load["body_bytes"] == 0 and load["index_locks"] == 0
    assert load["refused_busy"] > 0  # the admission bounds answered part of the overload (JSON 503s above)
    got = index.search(service["queries"][:3], "identification")  # and it answers exactly afterwards
    for g, w in zip(got, expected["identification"][:3]):
        assert same_answer(g, w)


def test_stalled_body_is_408(service):
    """A request whose body stops arriving is answered 408 (JSON) after the body deadline, on the
    JSON routes and on the raw ones alike; the service meanwhile answers others."""
    proc, token, index = service["proc"], service["token"], service["index"]
    heads = [
        f"POST /v1/indexes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"keys\": ",
        f"POST /v1/indexes/{index.id}/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Length: {len(index.client.encrypt_query(service['queries'][0]))}\r\n\r\nENCMATCH",
    ]
    for head in heads:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=30) as sock:
            sock.sendall(head.encode())
            t0 = time.monotonic()
            assert httpx.get(proc.url + "/v1/health", timeout=5).status_code == 200
            buf = b""
            while b"\r\n\r\n" not in buf or not buf.rstrip().endswith(b"}"):
                part = sock.recv(65536)
                if not part:
                    break
                buf += part
            waited = time.monotonic() - t0
        status = int(buf.split(b" ", 2)[1])
        answer = json.loads(buf.partition(b"\r\n\r\n")[2])
        assert (status, answer["kind"]) == (408, "request_timeout"), buf[:300]
        assert 1.0 < waited < 15.0, waited
    assert rss_bytes(proc.proc.pid)[0] > 0


def test_unfinished_headers_closed(service):
    """Connections that never finish a request's headers (or never send one) are closed after the
    header deadline, so they cannot pile up to the connection limit; the service answers meanwhile."""
    proc = service["proc"]
    socks = [socket.create_connection(("127.0.0.1", proc.port), timeout=30) for _ in range(100)]
    try:
        for i, sock in enumerate(socks):
            if i % 2:
                sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never finished
        t0 = time.monotonic()
        assert httpx.get(proc.url + "/v1/health", timeout=5).status_code == 200
        for sock in socks:
            assert sock.recv(65536) == b""  # closed by the server, without an answer
        waited = time.monotonic() - t0
        assert 1.5 < waited < 20, waited
    finally:
        for sock in socks:
            sock.close()
    with httpx.Client(base_url=proc.url, timeout=10) as c:  # a keep-alive client is served as before
        assert c.get("/v1/health").status_code == 200
        time.sleep(1)
        assert c.get("/v1/health").status_code == 200
