"""t-out-of-n threshold key generation and decryption: the SDK roles and the CLI, at the toy preset."""

from __future__ import annotations

import hashlib
import itertools
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from encmatch import threshold as th
from encmatch.errors import Corrupt, Exists, InvalidArgument, Mismatch, NotFound

from conftest import run_cli

KAPPA = 7
DIM = 4
#: Decoded values are within 2^-4 of the message (the core's default precision).
TOL = 2.0 ** -4
#: The index's threshold.
DELTA = 0.5


def run_setup(root: Path, n: int, t: int, preset: str = "toy", fold: bool = False) -> dict:
    """Run every role of a t-out-of-n setup with the SDK under ``root``; return the paths."""
    setup = root / "setup.json"
    th.init_setup(setup, parties=n, threshold=t, dim=DIM, preset=preset, kappa=KAPPA, strategy="dg", fold=fold)
    board = root / "bulletin"
    for i in range(1, n + 1):
        th.round1(setup, i, root / f"party-{i}", board)
    for i in range(1, n + 1):  # deliver every Shamir share to its recipient's inbox
        for j in range(1, n + 1):
            inbox = root / f"inbox-{j}"
            inbox.mkdir(exist_ok=True)
            shutil.move(root / f"party-{i}" / th.shamir_file(i, j), inbox / th.shamir_file(i, j))
    for i in range(1, n + 1):
        th.round2(setup, i, root / f"party-{i}", board, root / f"inbox-{i}")
    th.finalize(setup, board, root / "server")
    receiver = th.Receiver.generate(setup, root / "receiver")
    signing = th.generate_signing_key(root / "signing")  # the server's; the decryptors trust its .pub
    decryptors = {i: th.Decryptor(root / f"party-{i}" / th.share_file(i), signing["public"]) for i in range(1, n + 1)}
    return {"setup": setup, "server": root / "server", "receiver": receiver, "decryptors": decryptors,
            "signing_key": Path(signing["key"])}


@pytest.fixture(scope="module")
def two_of_three(tmp_path_factory):
    """A finished 2-out-of-3 setup."""
    return run_setup(tmp_path_factory.mktemp("threshold-2of3"), 3, 2)


class Searcher:
    """A gallery enrolled under a threshold key set, a querier and a server: makes bound searches."""

    def __init__(self, s: dict, root: Path, seed: int = 9, n: int = 60):
        import encmatch
        from encmatch.data import separated_gallery

        self.s = s
        rng = np.random.default_rng(seed)
        self.gallery, _, self.queries = separated_gallery(rng, DIM, n, DIM)
        self.index = root / "index"
        enroller = encmatch.Enroller(s["server"])
        enroller.create_index(self.index, DELTA)
        enroller.enroll(self.index, self.gallery)
        self.querier = encmatch.Querier(s["server"])
        self.server = encmatch.Server(self.index, s["server"])
        self.generation = 0

    def search(self, q: int = 0, mode: str = "membership") -> tuple[bytes, bytes]:
        """A fresh query for probe ``q`` and the server's result: ``(query, result)``."""
        query = self.querier.encrypt_query(self.queries[q])
        return query, self.server.search(query, mode)

    def bound(self, q: int = 0, mode: str = "membership") -> bytes:
        """A fresh query for probe ``q``, searched by the server and signed, bound to its index and generation."""
        self.generation += 1
        query = self.querier.encrypt_query(self.queries[q])
        return self.server.search(query, mode, signing_key=self.s["signing_key"], index="faces", generation=self.generation)

    def expected(self, q: int, mode: str):
        """The plaintext answer of probe ``q``."""
        from encmatch.evaluation.bruteforce import expected_results

        return expected_results(self.gallery, self.queries[q][None, :], DELTA, mode)[0]

    def close(self):
        """Release the querier and the server."""
        self.querier.close()
        self.server.close()


@pytest.fixture(scope="module")
def searcher(two_of_three, tmp_path_factory):
    """Bound searches over a small gallery enrolled under the 2-out-of-3 key set."""
    sr = Searcher(two_of_three, tmp_path_factory.mktemp("threshold-index"))
    yield sr
    sr.close()


def shares_of(s: dict, ct: bytes, parties) -> list[bytes]:
    """Each participant's decryption share of ``ct``."""
    pub = s["receiver"].public_key
    return [s["decryptors"][i].decrypt_share(ct, parties, pub)[0] for i in parties]


def check_answer(sr: Searcher, info: dict, q: int, mode: str):
    """The combined answer equals the plaintext one."""
    from encmatch.results import from_decrypted
    from encmatch.evaluation.bruteforce import same_answer

    assert same_answer(from_decrypted(info["answer"]), sr.expected(q, mode)), (mode, info["answer"])


def test_any_t_parties_decrypt(two_of_three, searcher):
    s = two_of_three
    for k, parties in enumerate(itertools.combinations(range(1, 4), 2)):
        mode = ("membership", "identification")[k % 2]
        bound = searcher.bound(k % DIM, mode)
        got, info = s["receiver"].combine(bound, shares_of(s, bound, parties))
        assert info["parties"] == list(parties) and info["kind"] == "threshold-search"
        check_answer(searcher, info, k % DIM, mode)


def test_three_of_five_and_fewer_refused(tmp_path):
    s = run_setup(tmp_path, 5, 3)
    sr = Searcher(s, tmp_path, seed=3, n=20)
    try:
        bound = sr.bound(1, "identification")
        shares = shares_of(s, bound, (2, 4, 5))
        _, info = s["receiver"].combine(bound, shares)
        check_answer(sr, info, 1, "identification")
        with pytest.raises(InvalidArgument, match=r"needs t=3 \(missing parties \[5\]\)"):
            s["receiver"].combine(bound, shares[:2])
        with pytest.raises(InvalidArgument, match="exactly t=3"):
            s["decryptors"][1].decrypt_share(sr.bound(2), (1, 2), s["receiver"].public_key)
    finally:
        sr.close()


def test_flooding_reported_and_second_share_refused(two_of_three, searcher):
    s = two_of_three
    bound = searcher.bound(0)
    d = s["decryptors"][1]
    with pytest.raises(InvalidArgument, match="would not decode"):
        d.decrypt_share(bound, (1, 2), s["receiver"].public_key, flooding_bits=50)
    a, info = d.decrypt_share(bound, (1, 2), s["receiver"].public_key)
    f = info["flooding"]
    assert f["flooding_bits"] == pytest.approx(f["max_flooding_bits"])
    assert f["secure_flooding_bits"] > f["flooding_bits"]
    assert info["index"] == "faces" and len(info["transcript"]) == 64 and Path(info["journal"]).is_file()
    for parties in ((1, 2), (1, 3)):
        with pytest.raises(Exists, match="already made a decryption share of this search"):
            d.decrypt_share(bound, parties, s["receiver"].public_key)
    # A new Decryptor object (as after a restart) reads the same journal.
    with pytest.raises(Exists, match="already made a decryption share"):
        th.Decryptor(d.share_path, d.server_public).decrypt_share(bound, (1, 2), s["receiver"].public_key)
    b, _ = s["decryptors"][2].decrypt_share(bound, (1, 2), s["receiver"].public_key)
    _, info = s["receiver"].combine(bound, [a, b])
    check_answer(searcher, info, 0, "membership")


def rewrap(data: bytes, kind: str, payload_of=lambda p: p) -> bytes:
    """Re-frame an encmatch envelope under another kind (what a hostile querier does), checksum recomputed."""
    assert data[:8] == b"ENCMATCH"
    off, fields = 10, []
    for _ in range(3):
        (k,) = struct.unpack_from("<H", data, off)
        fields.append(data[off + 2: off + 2 + k])
        off += 2 + k
    (n,) = struct.unpack_from("<Q", data, off)
    payload = payload_of(data[off + 8: off + 8 + n])
    out = bytearray(b"ENCMATCH" + struct.pack("<H", 1))
    for f in (kind.encode(), fields[1], fields[2]):
        out += struct.pack("<H", len(f)) + f
    out += struct.pack("<Q", len(payload)) + payload
    return bytes(out + hashlib.sha256(out).digest())


def test_rewrapped_probe_refused(two_of_three, searcher):
    """Issue 14: a querier's encrypted probe re-wrapped as a threshold input is not decrypted."""
    s = two_of_three
    query, result = searcher.search(1)
    as_ciphertext = rewrap(query, "threshold-ciphertext", lambda p: struct.pack("<Q", len(p)) + p)
    for d in (1, 2):
        with pytest.raises(InvalidArgument, match="only a search result bound to its search"):
            s["decryptors"][d].decrypt_share(as_ciphertext, (1, 2), s["receiver"].public_key)
    with pytest.raises(InvalidArgument, match="only a search result bound"):
        s["decryptors"][1].decrypt_share(result, (1, 2), s["receiver"].public_key)  # a result, unbound
    key = s["signing_key"]
    with pytest.raises(Mismatch, match="expected a result, got a query"):
        th.bind_search(s["server"], query, query, signing_key=key, index="faces")
    with pytest.raises(Mismatch):
        th.bind_search(s["server"], result, result, signing_key=key, index="faces")
    head = b'{"mode":"membership","total":60,"groups":[{"start":0,"count":60}]}'
    as_result = rewrap(query, "result", lambda p: struct.pack("<Q", len(head)) + head + struct.pack("<Q", len(p)) + p)
    with pytest.raises(Corrupt):
        th.bind_search(s["server"], query, as_result, signing_key=key, index="faces")
    bound = th.bind_search(s["server"], query, result, signing_key=key, index="faces")[0]
    forged = bytearray(bound)
    forged[200] ^= 1  # inside the transcript header; checksum recomputed below
    with pytest.raises(Corrupt):
        s["decryptors"][1].decrypt_share(rewrap(bytes(forged), "threshold-search"), (1, 2), s["receiver"].public_key)


def test_search_signed_by_another_key_refused(two_of_three, searcher, tmp_path):
    """A querier can bind a result itself (anything it made with public operations, in the Go
    test TestRewrittenProbeNeedsServerSignature its own re-randomised probe), but not with the
    server's key: decryptors share only searches signed by the server key they trust."""
    s = two_of_three
    query, result = searcher.search(3)
    own = th.generate_signing_key(tmp_path / "querier")
    forged, info = th.bind_search(s["server"], query, result, signing_key=own["key"], index="faces")
    assert info["signer"] == own["public_hex"]
    for d in (1, 2):
        with pytest.raises(Mismatch, match="not by the trusted server key"):
            s["decryptors"][d].decrypt_share(forged, (1, 2), s["receiver"].public_key)
    with pytest.raises(Exists):
        th.generate_signing_key(tmp_path / "querier")  # a key decryptors may trust is never overwritten
    with pytest.raises(NotFound, match="public signing key"):
        th.Decryptor(s["decryptors"][1].share_path, tmp_path / "nothing.pub")
    with pytest.raises(InvalidArgument, match="give signing_key too"):
        searcher.server.search(query, "membership", index="faces")


def test_bad_shares_refused(two_of_three, searcher):
    s = two_of_three
    ct, other = searcher.bound(2), searcher.bound(3)
    a1, a2 = shares_of(s, ct, (1, 2))
    corrupt = bytearray(a2)
    corrupt[len(corrupt) // 2] ^= 1
    with pytest.raises(Corrupt, match="checksum"):
        s["receiver"].combine(ct, [a1, bytes(corrupt)])
    with pytest.raises(Mismatch, match="another ciphertext"):
        s["receiver"].combine(ct, [a1, shares_of(s, other, (1, 2))[1]])
    with pytest.raises(InvalidArgument, match="two decryption shares from party 1"):
        s["receiver"].combine(ct, [a1, a1])
    with pytest.raises(Corrupt):
        s["receiver"].combine(ct[:-10], [a1, a2])


def test_share_of_another_key_set_refused(two_of_three, searcher, tmp_path):
    s, g = two_of_three, run_setup(tmp_path, 2, 2)
    ct = searcher.bound(1)
    with pytest.raises(Mismatch):
        g["decryptors"][1].decrypt_share(ct, (1, 2), g["receiver"].public_key)
    with pytest.raises(Mismatch):
        s["decryptors"][1].decrypt_share(ct, (1, 2), g["receiver"].public_key)


def test_setup_arguments_checked(tmp_path):
    with pytest.raises(InvalidArgument, match="threshold t=4 outside"):
        th.init_setup(tmp_path / "s.json", parties=3, threshold=4, dim=DIM, preset="toy", kappa=KAPPA)
    th.init_setup(tmp_path / "s.json", parties=3, threshold=2, dim=DIM, preset="toy", kappa=KAPPA, strategy="none")
    with pytest.raises(InvalidArgument, match="party 4 outside"):
        th.round1(tmp_path / "s.json", 4, tmp_path / "p4", tmp_path / "board")
    with pytest.raises(Corrupt, match="not an encmatch artefact"):
        th.Receiver.generate(tmp_path / "s.json", tmp_path / "r").combine(b"garbage", [])


def ok(proc, code=0):
    """Assert the exit code and that no traceback was printed; return the process."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_cli_roles_end_to_end(tmp_path):
    """Every role as a separate command, each party with its own directories."""
    setup = tmp_path / "setup.json"
    ok(run_cli("threshold", "init", "--setup", setup, "--parties", 3, "--threshold", 2, "--dim", DIM,
               "--preset", "toy", "--kappa", KAPPA, "--strategy", "dg"))
    for i in (1, 2, 3):
        ok(run_cli("threshold", "round1", "--setup", setup, "--party", i, "--private", tmp_path / f"p{i}",
                   "--bulletin", tmp_path / "board"))
    for i in (1, 2, 3):
        for j in (1, 2, 3):
            (tmp_path / f"in{j}").mkdir(exist_ok=True)
            shutil.move(tmp_path / f"p{i}" / th.shamir_file(i, j), tmp_path / f"in{j}" / th.shamir_file(i, j))
    for i in (1, 2, 3):
        ok(run_cli("threshold", "round2", "--setup", setup, "--party", i, "--private", tmp_path / f"p{i}",
                   "--bulletin", tmp_path / "board", "--shares", tmp_path / f"in{i}"))
    ok(run_cli("threshold", "finalize", "--setup", setup, "--bulletin", tmp_path / "board", "--keys", tmp_path / "server"))
    ok(run_cli("threshold", "receiver-keygen", "--setup", setup, "--out", tmp_path / "recv"))
    out = ok(run_cli("threshold", "signing-keygen", "--out", tmp_path / "signing"))
    assert "give" in out.stdout and (tmp_path / "signing" / "server-signing.pub").is_file()
    again = ok(run_cli("threshold", "signing-keygen", "--out", tmp_path / "signing"), code=2)
    assert "never overwritten" in again.stderr
    ok(run_cli("threshold", "signing-keygen", "--out", tmp_path / "querier-signing"))  # a querier's own key
    s = {"server": tmp_path / "server"}
    sr = Searcher(s, tmp_path, seed=5, n=20)
    try:
        query, result = sr.search(2, "identification")
        (tmp_path / "q.bin").write_bytes(query)
        (tmp_path / "r.bin").write_bytes(result)
        (tmp_path / "q2.bin").write_bytes(sr.querier.encrypt_query(sr.queries[1]))
        # The attack of issue 14: the probe re-wrapped as a threshold input.
        (tmp_path / "probe.bin").write_bytes(rewrap(query, "threshold-ciphertext", lambda p: struct.pack("<Q", len(p)) + p))
    finally:
        sr.close()
    pub = tmp_path / "recv" / "receiver.pub"

    def share(i, src, out, parties="1,3"):
        return run_cli("threshold", "decrypt-share", "--share", tmp_path / f"p{i}" / th.share_file(i),
                       "--server-public", tmp_path / "signing" / "server-signing.pub",
                       "--receiver-public", pub, "--parties", parties, "--out", out, src)

    probe = ok(share(1, tmp_path / "probe.bin", tmp_path / "x.bin"), code=2)
    assert "only a search result bound to its search" in probe.stderr and not (tmp_path / "x.bin").exists()
    ok(run_cli("threshold", "bind", "--keys", tmp_path / "server", "--signing-key",
               tmp_path / "querier-signing" / "server-signing.key", "--index", "faces", "--query", tmp_path / "q.bin",
               "--result", tmp_path / "r.bin", "--out", tmp_path / "forged.bin"))
    forged = ok(share(1, tmp_path / "forged.bin", tmp_path / "x.bin"), code=2)
    assert "not by the trusted server key" in forged.stderr and not (tmp_path / "x.bin").exists()
    out = ok(run_cli("threshold", "bind", "--keys", tmp_path / "server", "--signing-key",
                     tmp_path / "signing" / "server-signing.key", "--index", "faces", "--generation", 4,
                     "--query", tmp_path / "q.bin", "--result", tmp_path / "r.bin", "--out", tmp_path / "ct.bin"))
    assert "identification result of index faces generation 4 bound to its query and signed" in out.stdout
    # The server's own step: search and sign in one command.
    out = ok(run_cli("threshold", "search", "--keys", tmp_path / "server", "--index", tmp_path / "index",
                     "--signing-key", tmp_path / "signing" / "server-signing.key", "--query", tmp_path / "q2.bin",
                     "--mode", "membership", "--out", tmp_path / "m.bin"))
    assert "membership result of index" in out.stdout and "signed" in out.stdout
    for i in (1, 2):
        ok(share(i, tmp_path / "m.bin", tmp_path / f"m{i}.bin", parties="1,2"))
    out = ok(run_cli("threshold", "combine", "--receiver", tmp_path / "recv", tmp_path / "m.bin",
                     tmp_path / "m1.bin", tmp_path / "m2.bin"))
    assert f"membership: {int(sr.expected(1, 'membership').count)} match(es)" in out.stdout
    for i in (1, 3):
        ok(share(i, tmp_path / "ct.bin", tmp_path / f"s{i}.bin"))
    again = ok(share(1, tmp_path / "ct.bin", tmp_path / "again.bin", parties="1,2"), code=2)
    assert "already made a decryption share" in again.stderr and not (tmp_path / "again.bin").exists()
    out = ok(run_cli("threshold", "combine", "--receiver", tmp_path / "recv", "--out", tmp_path / "out.npy",
                     tmp_path / "ct.bin", tmp_path / "s1.bin", tmp_path / "s3.bin"))
    assert "parties [1, 3]" in out.stdout
    want = sr.expected(2, "identification")
    assert f"identification: {len(want.positions)} match(es) at {[int(p) for p in want.positions]}" in out.stdout

    fewer = ok(run_cli("threshold", "combine", "--receiver", tmp_path / "recv", tmp_path / "ct.bin",
                       tmp_path / "s1.bin"), code=2)
    assert "missing parties [3]" in fewer.stderr and "fewer than t shares reveal nothing" in fewer.stderr
    data = bytearray((tmp_path / "s3.bin").read_bytes())
    data[100] ^= 0xFF
    (tmp_path / "bad.bin").write_bytes(bytes(data))
    bad = ok(run_cli("threshold", "combine", "--receiver", tmp_path / "recv", tmp_path / "ct.bin",
                     tmp_path / "s1.bin", tmp_path / "bad.bin"), code=2)
    assert "corrupt" in bad.stderr
    share_file = tmp_path / "p2" / th.share_file(2)
    data = bytearray(share_file.read_bytes())
    data[-50] ^= 0xFF
    share_file.write_bytes(bytes(data))
    broken = ok(share(2, tmp_path / "ct.bin", tmp_path / "s2.bin", parties="1,2"), code=2)
    assert "checksum" in broken.stderr


@pytest.mark.secure
def test_secure_preset_two_of_two(tmp_path):
    s = run_setup(tmp_path, 2, 2, preset="default")
    sr = Searcher(s, tmp_path, n=20)
    try:
        bound = sr.bound(0, "identification")
        _, info = s["receiver"].combine(bound, shares_of(s, bound, (1, 2)))
        check_answer(sr, info, 0, "identification")
        assert info["flooding"][0]["flooding_bits"] > 29
    finally:
        sr.close()


def test_threshold_face_search(two_of_three, searcher):
    """Nobody holds the secret key: public-key enrollment and queries, a search, t decryptors, one receiver."""
    s = two_of_three
    for mode in ("membership", "identification"):
        for q in range(DIM):
            bound = searcher.bound(q, mode)
            _, info = s["receiver"].combine(bound, shares_of(s, bound, (1, 3)))
            check_answer(searcher, info, q, mode)
    with pytest.raises(InvalidArgument):
        searcher.querier.encrypt_query(np.zeros(DIM))


def test_threshold_folded_face_search(tmp_path):
    """A folded key set made by 2-out-of-3 parties (collective conjugation key): both modes equal brute force."""
    import encmatch

    s = run_setup(tmp_path, 3, 2, fold=True)
    querier = encmatch.Querier(s["server"])
    assert querier.params.get("fold") is True
    querier.close()
    sr = Searcher(s, tmp_path, seed=4)
    try:
        for mode in ("membership", "identification"):
            for q in range(DIM):
                bound = sr.bound(q, mode)
                _, info = s["receiver"].combine(bound, shares_of(s, bound, (2, 3)))
                check_answer(sr, info, q, mode)
    finally:
        sr.close()
    with pytest.raises(InvalidArgument, match="fold"):
        th.init_setup(tmp_path / "x.json", parties=3, threshold=2, dim=DIM, preset="toy", fold="yes")


def test_service_signs_threshold_searches(two_of_three, searcher, tmp_path):
    """The service searches an index of a threshold key set and signs the result bound to its query
    (``signed=true``, ``serve --signing-key``); t decryptors share it and the receiver reads the
    brute-force answer. A service without a signing key refuses to sign, and the signature names
    the index and generation the service searched."""
    from encmatch.service import ServiceClient
    from encmatch.service.measure import ServerProcess, add_tenant
    from encmatch.service.remote import create_index, enroll

    s = two_of_three
    data_dir = tmp_path / "data"
    token = add_tenant(data_dir, "alice")
    with ServerProcess(data_dir, "--allow-insecure", "--signing-key", s["signing_key"]) as proc, \
            ServiceClient(proc.url, token) as service:
        import encmatch

        index_id = create_index(service, s["server"], DELTA)
        enroll(service, index_id, encmatch.Enroller(s["server"]), searcher.gallery)
        for q, mode in ((0, "membership"), (1, "identification")):
            query = searcher.querier.encrypt_query(searcher.queries[q])
            signed, _ = service.search(index_id, query, mode, signed=True)
            shares = [s["decryptors"][i].decrypt_share(signed, (1, 2), s["receiver"].public_key) for i in (1, 2)]
            assert shares[0][1]["index"] == index_id and shares[0][1]["generation"] == 2  # create, then enroll
            _, info = s["receiver"].combine(signed, [sh for sh, _ in shares])
            check_answer(searcher, info, q, mode)
        plain, _ = service.search(index_id, searcher.querier.encrypt_query(searcher.queries[2]), "membership")
        with pytest.raises(InvalidArgument, match="only a search result bound"):
            s["decryptors"][1].decrypt_share(plain, (1, 2), s["receiver"].public_key)  # unsigned: refused
    assert "signing searches" in proc.log() and "Traceback" not in proc.log()
    with ServerProcess(tmp_path / "data", "--allow-insecure") as proc, ServiceClient(proc.url, token) as service:
        with pytest.raises(InvalidArgument, match="signs no searches"):
            service.search(index_id, searcher.querier.encrypt_query(searcher.queries[0]), "membership", signed=True)
    bad = ServerProcess(tmp_path / "data", "--allow-insecure", "--signing-key", s["receiver"].public_key)
    with pytest.raises(RuntimeError, match="expected a server-signing-key"):
        bad.start(timeout=60)


def test_gpu_engine_signs_threshold_searches(two_of_three, searcher):
    """The GPU engine (its kernels on the CPU here) signs a threshold search as the CPU engine
    does: the same bound bytes, which t decryptors turn into the right answer."""
    from encmatch.gpu import GpuServer

    s = two_of_three
    with GpuServer(searcher.index, s["server"], device="cpu") as gpu:
        for q, mode in ((0, "membership"), (2, "identification")):
            query = searcher.querier.encrypt_query(searcher.queries[q])
            signed = dict(signing_key=s["signing_key"], index="faces", generation=100 + q)
            bound = gpu.search(query, mode, **signed)
            assert bound == searcher.server.search(query, mode, **signed)
            _, info = s["receiver"].combine(bound, shares_of(s, bound, (1, 3)))
            check_answer(searcher, info, q, mode)
        with pytest.raises(InvalidArgument, match="give signing_key too"):
            gpu.search(query, "membership", index="faces")
