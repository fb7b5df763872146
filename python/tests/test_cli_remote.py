"""The command line and SDK against a service that is down, refuses, or holds indexes (issue 17).

The exit-code policy (0 ok, 2 bad input, 3 service unavailable or refused)
with one ``error:`` line and never a traceback: a service that is down fails
within seconds (bounded connect retries, each announced on stderr), a bad
or revoked token and a TLS failure exit 3, an unknown index exits 2.
``encmatch index list|info|delete`` against a real ``encmatch serve``
process on loopback (the module's server and key sets are those of
``test_service.py``), and ``query --server`` with several probes answering
exactly. The ServiceClient's retries (busy, a dropped connection once the
service has answered, no retry of a request that may have been acted on)
are checked against an in-process transport.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

import encmatch
from encmatch.errors import NotFound, ShardUnavailable, Unavailable
from encmatch.service import Busy, RemoteIndex, ServiceClient, Unauthorized
from encmatch.service.errors import error_from_response
from encmatch.service.measure import add_tenant, free_port
from encmatch.evaluation.bruteforce import expected_results

from test_service import DELTA, CHUNK, data, keys, server  # noqa: F401 - the module's fixtures, shared

TOKEN_ENV = "ENCMATCH_TOKEN"


def cli(*args, token=None, stdin=subprocess.DEVNULL, timeout=300):
    """``python -m encmatch ARGS`` with ``$ENCMATCH_TOKEN`` set to ``token`` (stdin not a terminal);
    returns ``(CompletedProcess, seconds)``."""
    env = dict(os.environ)
    env.pop(TOKEN_ENV, None)
    if token is not None:
        env[TOKEN_ENV] = token
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "encmatch", *map(str, args)], env=env, stdin=stdin,
                       capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


def clean_error(p, code):
    """``p`` exited ``code`` with one ``error:`` line last on stderr and no traceback; returns that line."""
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), p.stderr
    return last


@pytest.fixture(scope="module")
def tenant(server, keys, data):
    """A tenant of its own (so its index list is known) holding two indexes: ``labelled`` (300
    labelled entries) and ``empty``."""
    token = add_tenant(server.data_dir, "cli-remote")
    with RemoteIndex.create(server.url, token, keys["a"], DELTA, chunk_size=CHUNK, label="labelled") as ix:
        ix.add(data["gallery"][:300], data["labels"][:300])
        labelled = ix.id
    with RemoteIndex.create(server.url, token, keys["a"], DELTA, chunk_size=CHUNK, label="empty") as ix:
        empty = ix.id
    return {"token": token, "labelled": labelled, "empty": empty}


# ---- a service that is down, refuses, or is not there ------------------------------------------


def test_service_down_fails_fast_exit_3(keys, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    p, seconds = cli("index", "list", "--server", url, token="em_whatever")
    last = clean_error(p, 3)
    assert last == f"error: cannot reach the encmatch service at {url}: connection refused (tried 3 times in " \
                   f"{re.search(r'in ([0-9.]+) s', last).group(1)} s)", p.stderr
    retries = [ln for ln in p.stderr.splitlines() if "retrying" in ln]
    assert retries == [f"service at {url} not reachable (connection refused); retrying in 0.5 s (1/2)",
                       f"service at {url} not reachable (connection refused); retrying in 1 s (2/2)"], p.stderr
    assert seconds < 6, seconds  # was 21.6 s of silent retries, then a traceback
    # the query of the report, with two probes
    np.save(tmp_path / "probes.npy", np.random.default_rng(1).standard_normal((2, 16)).astype(np.float32))
    p, seconds = cli("query", "--server", url, "--keys", keys["a"], "--index", "0123456789abcdef", "--decrypt",
                     tmp_path / "probes.npy", token="em_whatever")
    assert "cannot reach the encmatch service" in clean_error(p, 3) and seconds < 6, (seconds, p.stderr)


def test_sdk_down_service_is_unavailable_within_seconds(keys):
    url = f"http://127.0.0.1:{free_port()}"
    lines: list[str] = []
    t0 = time.monotonic()
    with ServiceClient(url, "em_whatever", on_retry=lines.append) as c:
        with pytest.raises(Unavailable, match="cannot reach the encmatch service .*: connection refused"):
            c.indexes()
    assert time.monotonic() - t0 < 4 and len(lines) == 2
    t0 = time.monotonic()
    with pytest.raises(Unavailable, match="connection refused"):
        RemoteIndex(url, "em_whatever", "0123456789abcdef", keys["a"])
    assert time.monotonic() - t0 < 4
    with ServiceClient(url, "em_whatever", connect_retries=0) as c:
        t0 = time.monotonic()
        with pytest.raises(Unavailable, match=r"connection refused$"):
            c.health()
        assert time.monotonic() - t0 < 1


def test_unresolvable_host_and_tls_failure_exit_3(server):
    p, seconds = cli("index", "list", "--server", "http://encmatch-nowhere.invalid:8470", token="em_whatever")
    assert "refusing to send a bearer token over plain HTTP" in clean_error(p, 2)  # issue 31
    p, seconds = cli("index", "list", "--server", "http://encmatch-nowhere.invalid:8470", "--insecure-http",
                     token="em_whatever")
    assert "not resolved" in clean_error(p, 3) and "retrying" not in p.stderr, p.stderr
    tls_url = server.url.replace("http://", "https://")  # TLS to a plain-HTTP service
    p, seconds = cli("index", "list", "--server", tls_url, token=server.tokens["alice"])
    line = clean_error(p, 3)
    assert line.startswith(f"error: cannot reach the encmatch service at {tls_url}: TLS handshake failed"), line
    assert "retrying" not in p.stderr and seconds < 6


def test_bad_and_revoked_token_exit_3(server, tenant, keys):
    p, _ = cli("index", "list", "--server", server.url, token="em_wrong")
    line = clean_error(p, 3)
    assert f"the encmatch service at {server.url} refused the token" in line and "revoked" in line, line
    token = add_tenant(server.data_dir, "cli-revoked")
    p, _ = cli("index", "list", "--server", server.url, token=token)
    assert p.returncode == 0, p.stderr
    encmatch.service.tenancy.TokenStore(server.data_dir).revoke("cli-revoked")
    p, _ = cli("index", "info", "--server", server.url, tenant["labelled"], token=token)
    assert "refused the token" in clean_error(p, 3)
    with pytest.raises(Unavailable):  # the SDK's class for it is both
        RemoteIndex(server.url, "em_wrong", tenant["labelled"], keys["a"])
    with pytest.raises(Unauthorized):
        ServiceClient(server.url, "em_wrong").indexes()


def test_unknown_index_exit_2(server, tenant, keys, tmp_path):
    for action in (("info",), ("delete", "--yes")):
        p, _ = cli("index", *action, "--server", server.url, "0123456789abcdef", token=tenant["token"])
        assert "no index '0123456789abcdef'" in clean_error(p, 2)
    p, _ = cli("index", "info", "--server", server.url, "../v1/health", token=tenant["token"])
    assert "not a remote index id" in clean_error(p, 2)
    # another tenant's index is unknown to this one
    p, _ = cli("index", "info", "--server", server.url, tenant["labelled"], token=server.tokens["bob"])
    assert "no index" in clean_error(p, 2)
    with pytest.raises(NotFound):
        RemoteIndex(server.url, tenant["token"], "0123456789abcdef", keys["a"])
    p, _ = cli("index", "list", token=tenant["token"])  # list needs --server
    assert "--server" in clean_error(p, 2)


# ---- encmatch index list / info / delete ----------------------------------------------------------


def test_index_list_and_info(server, tenant):
    p, _ = cli("index", "list", "--server", server.url, token=tenant["token"])
    assert p.returncode == 0, p.stderr
    head, *rows = p.stdout.strip().splitlines()
    assert head.split() == ["id", "label", "state", "entries", "groups", "preset", "delta", "created"]
    by_id = {r.split()[0]: r.split() for r in rows}
    assert set(by_id) == {tenant["labelled"], tenant["empty"]}
    assert by_id[tenant["labelled"]][1:5] == ["labelled", "ready", "300", "1"]
    assert by_id[tenant["labelled"]][5:8] == ["toy", "(INSECURE)", "0.5"]
    assert by_id[tenant["empty"]][1:5] == ["empty", "ready", "0", "0"]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC$", rows[0]), rows[0]
    p, _ = cli("index", "list", "--server", server.url, "--json", token=tenant["token"])
    listed = {s["id"]: s for s in json.loads(p.stdout)["indexes"]}
    assert listed[tenant["labelled"]]["count"] == 300 and listed[tenant["empty"]]["count"] == 0

    p, _ = cli("index", "info", "--server", server.url, tenant["labelled"], token=tenant["token"])
    assert p.returncode == 0, p.stderr
    text = p.stdout
    for want in (f"index: {tenant['labelled']} on {server.url}", "label: labelled", "state: ready, generation",
                 "entries: 300 in 1 group(s)", "delta: 0.5", "parameters: preset toy", "INSECURE", "kappa 8",
                 "strategy: ", "labels: sealed, 1 file(s)"):
        assert want in text, (want, text)
    p, _ = cli("index", "info", "--server", server.url, tenant["labelled"], "--json", token=tenant["token"])
    info = json.loads(p.stdout)
    assert (info["id"], info["count"], info["state"], info["delta"]) == (tenant["labelled"], 300, "ready", 0.5)
    assert info["manifest"]["count"] == 300


def test_index_info_of_a_local_directory(keys, data, tmp_path):
    ix = tmp_path / "ix"
    encmatch.Enroller(keys["a"] / "server").create_index(ix, DELTA)
    encmatch.Enroller(keys["a"] / "server").enroll(ix, data["gallery"][:20])
    p, _ = cli("index", "info", ix)
    assert p.returncode == 0 and "entries: 20" in p.stdout and "delta: 0.5" in p.stdout, p.stderr
    p, _ = cli("index", "info", "--json", ix)
    assert json.loads(p.stdout)["count"] == 20
    p, _ = cli("index", "info", tmp_path / "nothing-here")
    clean_error(p, 2)


def test_index_delete(server, keys, data):
    token = add_tenant(server.data_dir, "cli-delete")
    ids = []
    for label in ("keep", "drop"):
        with RemoteIndex.create(server.url, token, keys["a"], DELTA, chunk_size=CHUNK, label=label) as ix:
            ix.add(data["gallery"][:40])
            ids.append(ix.id)
    keep, drop = ids
    # stdin is not a terminal: nobody can confirm, so nothing happens without --yes
    p, _ = cli("index", "delete", "--server", server.url, drop, token=token)
    assert "--yes" in clean_error(p, 2)
    # on a terminal it asks; anything but yes keeps the index
    master, slave = pty.openpty()
    try:
        os.write(master, b"n\n")
        p, _ = cli("index", "delete", "--server", server.url, drop, token=token, stdin=slave)
    finally:
        os.close(master)
        os.close(slave)
    assert "not confirmed" in clean_error(p, 2) and f"delete index {drop} ('drop'), ready, 40 entries" in p.stdout
    with ServiceClient(server.url, token) as c:
        assert sorted(s["id"] for s in c.indexes()) == sorted(ids)
    p, _ = cli("index", "delete", "--server", server.url, drop, "--yes", token=token)
    assert p.returncode == 0 and p.stdout.strip() == f"deleted index {drop} ('drop'), ready, 40 entries", p
    p, _ = cli("index", "list", "--server", server.url, "--json", token=token)
    assert [s["id"] for s in json.loads(p.stdout)["indexes"]] == [keep]
    p, _ = cli("index", "info", "--server", server.url, drop, token=token)
    clean_error(p, 2)


def test_query_two_probes_decrypt_json_exact(server, tenant, keys, data, tmp_path):
    probes = data["queries"][3:5]
    np.save(tmp_path / "probes.npy", probes)
    for mode in ("identification", "membership"):
        p, _ = cli("query", "--server", server.url, "--keys", keys["a"], "--index", tenant["labelled"], "--mode", mode,
                   "--decrypt", "--json", tmp_path / "probes.npy", token=tenant["token"])
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        answers = [json.loads(ln) for ln in p.stdout.splitlines()]
        want = expected_results(data["gallery"][:300], probes, DELTA, mode)
        assert len(answers) == 2
        for got, w in zip(answers, want):
            if mode == "identification":
                assert got["positions"] == w.positions.tolist() and w.count > 0
                assert got["labels"] == [data["labels"][i] for i in w.positions]
            else:
                assert got["count"] == w.count and got["enrolled"]


# ---- the ServiceClient's error classes and retries, against an in-process transport -------------------


def mock_client(handler, **kwargs):
    """A ServiceClient whose requests go to ``handler(request) -> httpx.Response`` (or raise)."""
    lines: list[str] = []
    c = ServiceClient("http://127.0.0.1:1", "em_x", on_retry=lines.append, **kwargs)
    c._http = httpx.Client(base_url=c.url, transport=httpx.MockTransport(handler))
    return c, lines


def test_error_classes_of_answers():
    for status, body, cls in ((503, {"error": "full", "kind": "busy"}, Busy),
                              (401, {"error": "no", "kind": "unauthorized"}, Unauthorized),
                              (503, {"error": "down", "kind": "shard_unavailable"}, ShardUnavailable),
                              (429, None, Busy), (502, None, Unavailable), (504, None, Unavailable)):
        err = error_from_response(status, body)
        assert isinstance(err, cls) and isinstance(err, Unavailable), (status, body, type(err))
    assert not isinstance(error_from_response(404, {"error": "no index", "kind": "not_found"}), Unavailable)
    assert isinstance(error_from_response(404, {"error": "no index", "kind": "not_found"}), NotFound)


def test_busy_retried_then_unavailable():
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(503, json={"error": "the queue is full", "kind": "busy"}, headers={"Retry-After": "0"})

    c, lines = mock_client(handler, retries=2)
    with pytest.raises(Busy, match="gave up after 2 retries") as info:
        c.indexes()
    assert isinstance(info.value, Unavailable) and len(calls) == 3 and len(lines) == 2
    assert lines[0].startswith("service at http://127.0.0.1:1 busy (the queue is full); retrying in")


def test_dropped_connection_retried_once_reached_not_when_it_may_act_twice():
    state = {"n": 0}

    def handler(request):
        state["n"] += 1
        if state["n"] in (2, 3):
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return httpx.Response(200, json={"indexes": []})

    c, lines = mock_client(handler, retries=3, connect_retries=0)
    assert c.indexes() == []  # reached once
    assert c.indexes() == [] and state["n"] == 4 and len(lines) == 2  # a restart is waited for
    assert "connection refused" in lines[0].lower()

    def broken(request):
        state["n"] += 1
        raise httpx.ReadError("connection reset", request=request)

    c, lines = mock_client(broken, retries=3)
    c._reached = True
    state["n"] = 0
    with pytest.raises(Unavailable, match="may have been acted on"):
        c.request("POST", "/v1/indexes", json_body={}, safe_retry=False)
    assert state["n"] == 1 and lines == []


def test_an_answer_that_is_not_the_service():
    c, _ = mock_client(lambda request: httpx.Response(200, text="<html>hello</html>",
                                                        headers={"Content-Type": "text/html"}))
    with pytest.raises(Unavailable, match="not as an encmatch service does"):
        c.indexes()
    c, _ = mock_client(lambda request: httpx.Response(404, text="<html>nope</html>"))
    with pytest.raises(NotFound, match="not an encmatch service's answer"):
        c.index("0123456789abcdef")
