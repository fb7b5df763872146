"""Transport security and the tenant CLI (issue 14, items 6 and 7), through real processes.

- ``encmatch tenant``: the documented forms (``--data`` before or after the
  action), re-adding refused (exit 2) unless rotated, a rotation revoking the
  old token (also while the service runs), a missing data directory exit 2.
- ``encmatch serve``: plain HTTP on ``0.0.0.0`` refused without
  ``--allow-plaintext``; unusable TLS files refused; HTTPS with a self-signed
  certificate made here (``cryptography``) end to end through ``RemoteIndex``
  and the CLI (``--ca-file``, ``--token-file``, ``$ENCMATCH_TOKEN``).
- Tokens: a ``?token=`` is never accepted, not even beside a valid header,
  and no token (in any parameter) reaches the server's log.
- The SDK warns once per client before a token goes over plain HTTP to a
  host that is not loopback (checked without a network: the warning comes
  when the client is made, requests go through a mock transport).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import logging
import re
import socket
import ssl
import time
import warnings

import httpx
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import encmatch
from encmatch.service import RemoteIndex, ServiceClient, Unauthorized
from encmatch.service.measure import ServerProcess, free_port
from encmatch.evaluation.bruteforce import expected_results, same_answer
from encmatch.data import separated_gallery
from encmatch.service.tenancy import TokenStore
from encmatch.service.transport import (
    REDACTED,
    PlaintextTokenWarning,
    RedactingFilter,
    is_loopback_host,
    redact_path,
)

from conftest import run_cli

DIM = 16
KAPPA = 8
DELTA = 0.5
MODES = ("membership", "identification")


# ---- helpers -------------------------------------------------------------------------------


def self_signed(directory):
    """A self-signed certificate for ``localhost`` / 127.0.0.1 and its key (PEM files); returns their paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "encmatch test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


def ca_context(cert):
    """An SSL context that trusts ``cert`` (httpx's ``verify=``)."""
    return ssl.create_default_context(cafile=str(cert))


class TLSServer(ServerProcess):
    """``encmatch serve`` with ``--tls-cert``/``--tls-key``, polled over HTTPS with the test's CA file."""

    def __init__(self, data_dir, cert, key, *args):
        super().__init__(data_dir, "--tls-cert", cert, "--tls-key", key, *args)
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca = cert
        self.verify = ca_context(cert)



def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """A toy key set (dimension 16, kappa 8)."""
    root = tmp_path_factory.mktemp("tls-keys") / "a"
    encmatch.Client.generate(root, preset="toy", kappa=KAPPA, dim=DIM).close()
    return root


@pytest.fixture(scope="module")
def data():
    """A small gallery (one group) with labels, and one query per identity."""
    gallery, who, queries = separated_gallery(np.random.default_rng(11), DIM, 200, 8)
    return {"gallery": gallery, "labels": [f"p{w}" for w in who], "queries": queries}


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A service on 0.0.0.0 speaking HTTPS only with a self-signed certificate; tenant alice."""
    root = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(root)
    data_dir = root / "data"
    p = run_cli("tenant", "add", "--data", data_dir, "alice")  # the documented form
    assert p.returncode == 0, p.stderr
    server = TLSServer(data_dir, cert, key, "--host", "0.0.0.0", "--allow-insecure").start()
    server.token = p.stdout.strip()
    yield server
    code = server.stop()
    server.kill()
    assert code == 0, server.log()[-3000:]
    assert "Traceback" not in server.log(), server.log()[-5000:]


# ---- the tenant CLI (item 6) ------------------------------------------------------------------


def test_tenant_add_documented_forms(tmp_path):
    data_dir = tmp_path / "data"
    tokens = {}
    for name, args in (("alice", ("tenant", "add", "--data", data_dir, "alice")),   # README / SERVICE.md
                       ("bob", ("tenant", "add", "bob", "--data", data_dir)),
                       ("carol", ("tenant", "--data", data_dir, "add", "carol"))):
        p = run_cli(*args)
        assert p.returncode == 0, (args, p.stderr)
        tokens[name] = p.stdout.strip()
        assert re.fullmatch(r"em_[A-Za-z0-9_-]{43}", tokens[name]), p.stdout
        assert "shown only now" in p.stderr
    store = TokenStore(data_dir)
    assert {name: store.authenticate(t) for name, t in tokens.items()} == {n: n for n in tokens}
    assert store.tenants() == {"alice": 1, "bob": 1, "carol": 1}
    stored = (data_dir / "tenants.json").read_text()
    assert not any(t in stored for t in tokens.values())
    for args in (("tenant", "list", "--data", data_dir), ("tenant", "--data", data_dir, "list")):
        p = run_cli(*args)
        assert p.returncode == 0 and p.stdout.splitlines() == [f"{n}\t1 token(s)" for n in ("alice", "bob", "carol")]


def test_tenant_readd_refused_and_rotation_revokes(tmp_path):
    data_dir = tmp_path / "data"
    first = run_cli("tenant", "add", "--data", data_dir, "alice").stdout.strip()
    before = (data_dir / "tenants.json").read_text()
    p = run_cli("tenant", "add", "--data", data_dir, "alice")
    assert p.returncode == 2 and p.stdout == "" and "exists" in p.stderr and "rotate" in p.stderr, p
    assert (data_dir / "tenants.json").read_text() == before  # nothing issued
    store = TokenStore(data_dir)
    assert store.authenticate(first) == "alice" and store.tenants() == {"alice": 1}

    p = run_cli("tenant", "rotate", "--data", data_dir, "alice")
    assert p.returncode == 0 and "revoked" in p.stderr, p.stderr
    second = p.stdout.strip()
    assert second.startswith("em_") and second != first
    assert store.authenticate(first) is None and store.authenticate(second) == "alice"
    assert store.tenants() == {"alice": 1}

    p = run_cli("tenant", "add", "--rotate", "--data", data_dir, "alice")
    assert p.returncode == 0, p.stderr
    third = p.stdout.strip()
    assert store.authenticate(second) is None and store.authenticate(third) == "alice"

    p = run_cli("tenant", "revoke", "--data", data_dir, "alice")
    assert p.returncode == 0 and "revoked 1 token" in p.stdout
    assert store.authenticate(third) is None
    p = run_cli("tenant", "add", "--data", data_dir, "alice")  # revoked is still existing: rotate to reissue
    assert p.returncode == 2 and "exists" in p.stderr
    p = run_cli("tenant", "rotate", "--data", data_dir, "nobody")
    assert p.returncode == 2 and "no tenant 'nobody'" in p.stderr
    assert store.tenants() == {"alice": 0}


def test_tenant_missing_data_dir_is_an_error(tmp_path):
    missing = tmp_path / "nonexistent"
    for args in (("tenant", "--data", missing, "list"), ("tenant", "list", "--data", missing),
                 ("tenant", "revoke", "--data", missing, "alice"), ("tenant", "rotate", "--data", missing, "alice")):
        p = run_cli(*args)
        assert p.returncode == 2 and "error:" in p.stderr and "Traceback" not in p.stderr, (args, p)
        assert p.stdout == ""
    assert not missing.exists()
    p = run_cli("tenant", "list")
    assert p.returncode == 2 and "--data" in p.stderr


# ---- serve: where plain HTTP is allowed ---------------------------------------------------------------


def test_plaintext_on_wildcard_refused(tmp_path):
    port = free_port()
    data_dir = tmp_path / "data"
    p = run_cli("serve", "--data", data_dir, "--host", "0.0.0.0", "--port", port, timeout=120)
    assert p.returncode == 2 and "refusing to serve plain HTTP on 0.0.0.0" in p.stderr, p
    assert "--allow-plaintext" in p.stderr and "--tls-cert" in p.stderr
    assert not data_dir.exists() and not listening(port)
    cert, key = self_signed(tmp_path)
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    for args in (("--tls-cert", cert), ("--tls-key", key), ("--tls-cert", tmp_path / "junk.pem", "--tls-key", key),
                 ("--tls-cert", cert, "--tls-key", tmp_path / "missing.pem")):
        p = run_cli("serve", "--data", data_dir, "--host", "0.0.0.0", "--port", port, *args, timeout=120)
        assert p.returncode == 2 and "error:" in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
    assert not data_dir.exists() and not listening(port)


def test_plaintext_on_wildcard_with_explicit_flag(tmp_path):
    data_dir = tmp_path / "data"
    with ServerProcess(data_dir, "--host", "0.0.0.0", "--allow-plaintext") as server:
        assert httpx.get(server.url + "/v1/health", timeout=10).json()["status"] == "ok"
    assert "--allow-plaintext: serving plain HTTP on 0.0.0.0" in server.log()


# ---- HTTPS end to end (item 7) ---------------------------------------------------------------------


def check_answers(index, gallery, queries):
    """Search ``queries`` in both modes and assert the plaintext answers."""
    for mode in MODES:
        got = index.search(queries, mode)
        for g, w in zip(got, expected_results(gallery, queries, DELTA, mode)):
            assert same_answer(g, w), f"{mode}: {g} != {w}"


def test_https_end_to_end(tls, keys, data, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaintextTokenWarning)  # none over https
        with RemoteIndex.create(tls.url, tls.token, keys, DELTA, verify=tls.ca, label="tls") as index:
            index.add(data["gallery"], data["labels"])
            check_answers(index, data["gallery"], data["queries"][:4])
            hit = index.search(data["queries"][1], "identification")
            assert hit.count > 0 and hit.labels == [data["labels"][p] for p in hit.positions]
            index_id = index.id
    # token and CA from the environment
    monkeypatch.setenv("ENCMATCH_TOKEN", tls.token)
    monkeypatch.setenv("ENCMATCH_CA_FILE", str(tls.ca))
    with RemoteIndex(tls.url, None, index_id, keys) as again:
        assert len(again) == len(data["gallery"]) and again.labels == data["labels"]
        check_answers(again, data["gallery"], data["queries"][4:6])


def test_https_refuses_unverified_and_plaintext(tls):
    t0 = time.monotonic()
    with ServiceClient(tls.url, tls.token, verify=True) as c:  # the system's trust store: not our certificate
        with pytest.raises(ssl.SSLCertVerificationError, match="does not verify"):
            c.health()
    assert time.monotonic() - t0 < 10  # not retried
    with pytest.raises(httpx.TransportError):  # no plaintext fallback on the TLS port
        httpx.get(tls.url.replace("https://", "http://") + "/v1/health", timeout=10)
    with ServiceClient(tls.url, tls.token, verify=tls.ca) as c:
        assert c.health()["status"] == "ok" and c.indexes() is not None


def test_cli_over_https_token_from_file_and_env(tls, keys, data, tmp_path):
    np.savez(tmp_path / "gallery.npz", emb=data["gallery"][:100], name=np.array(data["labels"][:100]))
    np.save(tmp_path / "query.npy", data["queries"][2])
    token_file = tmp_path / "token"
    token_file.write_text(tls.token + "\n")
    token_file.chmod(0o600)
    p = run_cli("enroll", "--server", tls.url, "--ca-file", tls.ca, "--token-file", token_file, "--keys", keys,
                "--delta", DELTA, "--labels-from", "name", tmp_path / "gallery.npz")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "process list" not in p.stderr and "PlaintextTokenWarning" not in p.stderr, p.stderr
    index_id = re.search(r"created remote index ([0-9a-f]{16})", p.stdout).group(1)
    want = expected_results(data["gallery"][:100], data["queries"][2:3], DELTA, "identification")[0]
    assert want.count > 0
    p = run_cli("query", "--server", tls.url, "--keys", keys, "--index", index_id, "--mode", "identification",
                "--out", tmp_path / "r.bin", tmp_path / "query.npy",
                env={"ENCMATCH_TOKEN": tls.token, "ENCMATCH_CA_FILE": str(tls.ca)})
    assert p.returncode == 0 and "process list" not in p.stderr and "PlaintextTokenWarning" not in p.stderr, p.stderr
    p = run_cli("decrypt", "--keys", keys, "--json", tmp_path / "r.bin")
    assert json.loads(p.stdout)["positions"] == want.positions.tolist()
    # --token still works, with a warning that it shows in the process list
    p = run_cli("decrypt", "--server", tls.url, "--ca-file", tls.ca, "--token", tls.token, "--keys", keys,
                "--index", index_id, "--json", tmp_path / "r.bin")
    assert p.returncode == 0 and "process list" in p.stderr, p.stderr
    assert json.loads(p.stdout)["labels"] == [data["labels"][i] for i in want.positions]
    # without the CA file the certificate does not verify: a clean error, not a traceback
    p = run_cli("query", "--server", tls.url, "--keys", keys, "--index", index_id, "--out", tmp_path / "r2.bin",
                tmp_path / "query.npy", env={"ENCMATCH_TOKEN": tls.token, "ENCMATCH_CA_FILE": ""})
    assert p.returncode == 3 and "does not verify" in p.stderr and "Traceback" not in p.stderr, p.stderr
    token_file.chmod(0o644)
    p = run_cli("decrypt", "--server", tls.url, "--ca-file", tls.ca, "--token-file", token_file, "--keys", keys,
                "--index", index_id, tmp_path / "r.bin")
    assert p.returncode == 0 and "can be read by other users" in p.stderr, p.stderr
    (tmp_path / "empty").write_text("\n")
    p = run_cli("decrypt", "--server", tls.url, "--ca-file", tls.ca, "--token-file", tmp_path / "empty",
                "--keys", keys, "--index", index_id, tmp_path / "r.bin")
    assert p.returncode == 2 and "--token-file" in p.stderr


def test_url_tokens_refused_and_never_logged(tls):
    token = tls.token
    with httpx.Client(base_url=tls.url, verify=ca_context(tls.ca), timeout=30) as c:
        r = c.get("/v1/indexes", params={"token": token})  # the URL alone
        assert r.status_code == 401 and r.json()["kind"] == "unauthorized" and "Authorization" in r.json()["error"]
        headers = {"Authorization": f"Bearer {token}"}
        assert c.get("/v1/indexes", headers=headers).status_code == 200
        for param in ("token", "access_token", "Token"):  # not even beside a valid header
            r = c.get("/v1/indexes", params={param: token}, headers=headers)
            assert r.status_code == 401 and r.json()["kind"] == "unauthorized", (param, r.text)
        # a token under a name the service does not know is not refused (it is no credential) but not logged
        r = c.get("/v1/health", params={"note": token, "mode": "membership"})
        assert r.status_code == 200
    with pytest.raises(Unauthorized):
        ServiceClient(tls.url, "em_" + "x" * 43, verify=tls.ca).indexes()
    time.sleep(0.5)  # the access log lines of the requests above
    log = tls.log()
    assert token not in log
    assert "/v1/indexes?token=" + REDACTED in log and "/v1/health?note=" + REDACTED + "&mode=membership" in log, \
        log[-3000:]


def test_rotation_while_serving(tls):
    with httpx.Client(base_url=tls.url, verify=ca_context(tls.ca), timeout=30) as c:
        p = run_cli("tenant", "add", "--data", tls.data_dir, "zoe")
        old = p.stdout.strip()
        assert c.get("/v1/indexes", headers={"Authorization": f"Bearer {old}"}).status_code == 200
        p = run_cli("tenant", "add", "zoe", "--data", tls.data_dir)
        assert p.returncode == 2
        assert c.get("/v1/indexes", headers={"Authorization": f"Bearer {old}"}).status_code == 200
        p = run_cli("tenant", "rotate", "--data", tls.data_dir, "zoe")
        new = p.stdout.strip()
        assert p.returncode == 0 and new != old
        assert c.get("/v1/indexes", headers={"Authorization": f"Bearer {old}"}).status_code == 401
        assert c.get("/v1/indexes", headers={"Authorization": f"Bearer {new}"}).status_code == 200


# ---- the SDK's warning and the log filter, without a network ------------------------------------------------


def plaintext_warnings(caught):
    """The :class:`PlaintextTokenWarning` among recorded warnings (others, e.g. ResourceWarning, vary)."""
    return [w for w in caught if issubclass(w.category, PlaintextTokenWarning)]


def test_plaintext_warning_once_per_client_before_any_request():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization"))
        return httpx.Response(200, json={"status": "ok"})

    with pytest.raises(encmatch.InvalidArgument, match="refusing to send a bearer token over plain HTTP"):
        ServiceClient("http://192.0.2.1:8470", "em_plain")  # issue 31: refused unless asked for
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = ServiceClient("http://192.0.2.1:8470", "em_plain", insecure_http=True)
        plain = plaintext_warnings(caught)
        assert len(plain) == 1 and seen == []  # before any request
        assert "192.0.2.1" in str(plain[0].message) and "https://" in str(plain[0].message)
        assert plain[0].filename == __file__  # points at the caller
        client._http = httpx.Client(base_url=client.url, headers=client._http.headers,
                                    transport=httpx.MockTransport(handler))
        for _ in range(3):
            assert client.health() == {"status": "ok"}
        client.close()
    assert len(plaintext_warnings(caught)) == 1 and seen == ["Bearer em_plain"] * 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for url in ("https://192.0.2.1:8470", "http://127.0.0.1:8470", "http://localhost:8470", "http://[::1]:8470",
                    "http://127.0.0.2"):
            ServiceClient(url, "em_x").close()
        ServiceClient("http://10.0.0.1:1", "em_x", insecure_http=True).close()
        ServiceClient("https://10.0.0.2:1", "em_x", verify=False).close()
    plain = plaintext_warnings(caught)
    assert len(plain) == 2 and "10.0.0.1" in str(plain[0].message)  # only the last two
    assert "verification is OFF" in str(plain[1].message) and "10.0.0.2" in str(plain[1].message)


def test_client_refuses_bad_urls_and_ca_files(tmp_path):
    for url in ("ftp://host/", "host:8470", "http://host:8470/?token=em_x"):
        with pytest.raises(encmatch.InvalidArgument):
            ServiceClient(url, "em_x")
    with pytest.raises(encmatch.NotFound):
        ServiceClient("https://host:8470", "em_x", verify=tmp_path / "missing.pem")
    (tmp_path / "junk.pem").write_text("junk")
    with pytest.raises(encmatch.InvalidArgument):
        ServiceClient("https://host:8470", "em_x", verify=tmp_path / "junk.pem")


def test_loopback_hosts():
    assert all(map(is_loopback_host, ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LocalHost.")))
    assert not any(map(is_loopback_host, ("0.0.0.0", "::", "192.0.2.1", "10.0.0.1", "example.com", "")))


def test_access_log_filter_redacts():
    from uvicorn.logging import AccessFormatter

    tok = "em_" + "Ab1-_" * 8 + "xyz"
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("1.2.3.4:5", "POST", f"/v1/indexes/ab/search?mode=membership&token={tok}&x=1",
                                "1.1", 401), None)
    assert RedactingFilter().filter(record)
    line = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s').format(record)
    assert tok not in line and f"mode=membership&token={REDACTED}&x={REDACTED}" in line, line
    other = logging.LogRecord("encmatch.service", logging.WARNING, __file__, 1, "bad token %s in " + tok,
                              (tok,), None)
    RedactingFilter().filter(other)
    assert tok not in other.getMessage()
    assert redact_path(f"/x/{tok}/y?offset=5") == f"/x/{REDACTED}/y?offset=5"
