"""t-out-of-n threshold key generation and decryption: the SDK roles and the CLI, at the toy preset."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pytest

from encmatch import threshold as th
from encmatch.errors import Corrupt, InvalidArgument, Mismatch

from conftest import run_cli

KAPPA = 7
DIM = 4
#: Decoded values are within 2^-4 of the message (the core's default precision).
TOL = 2.0 ** -4


def run_setup(root: Path, n: int, t: int, preset: str = "toy") -> dict:
    """Run every role of a t-out-of-n setup with the SDK under ``root``; return the paths."""
    setup = root / "setup.json"
    th.init_setup(setup, parties=n, threshold=t, dim=DIM, preset=preset, kappa=KAPPA, strategy="dg")
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
    decryptors = {i: th.Decryptor(root / f"party-{i}" / th.share_file(i)) for i in range(1, n + 1)}
    return {"setup": setup, "server": root / "server", "receiver": receiver, "decryptors": decryptors}


@pytest.fixture(scope="module")
def two_of_three(tmp_path_factory):
    """A finished 2-out-of-3 setup."""
    return run_setup(tmp_path_factory.mktemp("threshold-2of3"), 3, 2)


def shares_of(s: dict, ct: bytes, parties) -> list[bytes]:
    """Each participant's decryption share of ``ct``."""
    pub = s["receiver"].public_key
    return [s["decryptors"][i].decrypt_share(ct, parties, pub)[0] for i in parties]


def test_any_t_parties_decrypt(two_of_three):
    s = two_of_three
    values = np.random.default_rng(0).uniform(-1, 1, size=(2, 32))
    ct = th.encrypt(s["server"], values)
    for parties in itertools.combinations(range(1, 4), 2):
        got, info = s["receiver"].combine(ct, shares_of(s, ct, parties))
        assert info["parties"] == list(parties)
        assert got.shape[0] == 2
        np.testing.assert_allclose(got[:, :32], values, atol=TOL)


def test_three_of_five_and_fewer_refused(tmp_path):
    s = run_setup(tmp_path, 5, 3)
    values = np.array([0.0, 1.0, 0.5, -1.0])
    ct = th.encrypt(s["server"], values)
    shares = shares_of(s, ct, (2, 4, 5))
    got, _ = s["receiver"].combine(ct, shares)
    np.testing.assert_allclose(got[0, :4], values, atol=TOL)
    with pytest.raises(InvalidArgument, match=r"needs t=3 \(missing parties \[5\]\)"):
        s["receiver"].combine(ct, shares[:2])
    with pytest.raises(InvalidArgument, match="exactly t=3"):
        s["decryptors"][1].decrypt_share(ct, (1, 2), s["receiver"].public_key)


def test_flooding_fresh_and_reported(two_of_three):
    s = two_of_three
    ct = th.encrypt(s["server"], [0.25])
    d = s["decryptors"][1]
    a, info = d.decrypt_share(ct, (1, 2), s["receiver"].public_key)
    b, _ = d.decrypt_share(ct, (1, 2), s["receiver"].public_key)
    assert a != b, "two decryption shares of one ciphertext must carry fresh flooding noise"
    f = info["flooding"]
    assert f["flooding_bits"] == pytest.approx(f["max_flooding_bits"])
    assert f["secure_flooding_bits"] > f["flooding_bits"]
    with pytest.raises(InvalidArgument, match="would not decode"):
        d.decrypt_share(ct, (1, 2), s["receiver"].public_key, flooding_bits=50)


def test_bad_shares_refused(two_of_three):
    s = two_of_three
    ct = th.encrypt(s["server"], [0.5])
    other = th.encrypt(s["server"], [0.5])
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


def test_share_of_another_key_set_refused(two_of_three, tmp_path):
    s, g = two_of_three, run_setup(tmp_path, 2, 2)
    ct = th.encrypt(s["server"], [0.5])
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
    values = np.array([[1.0, 0.0, 0.0, 1.0]])
    np.save(tmp_path / "v.npy", values)
    ok(run_cli("threshold", "encrypt", "--keys", tmp_path / "server", "--out", tmp_path / "ct.bin", tmp_path / "v.npy"))
    for i in (1, 3):
        ok(run_cli("threshold", "decrypt-share", "--share", tmp_path / f"p{i}" / th.share_file(i),
                   "--receiver-public", tmp_path / "recv" / "receiver.pub", "--parties", "1,3",
                   "--out", tmp_path / f"s{i}.bin", tmp_path / "ct.bin"))
    out = ok(run_cli("threshold", "combine", "--receiver", tmp_path / "recv", "--out", tmp_path / "out.npy",
                     tmp_path / "ct.bin", tmp_path / "s1.bin", tmp_path / "s3.bin"))
    assert "parties [1, 3]" in out.stdout
    np.testing.assert_allclose(np.load(tmp_path / "out.npy")[:, :4], values, atol=TOL)

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
    broken = ok(run_cli("threshold", "decrypt-share", "--share", share_file, "--receiver-public",
                        tmp_path / "recv" / "receiver.pub", "--parties", "1,2", "--out", tmp_path / "s2.bin",
                        tmp_path / "ct.bin"), code=2)
    assert "checksum" in broken.stderr


@pytest.mark.secure
def test_secure_preset_two_of_two(tmp_path):
    s = run_setup(tmp_path, 2, 2, preset="default")
    values = np.linspace(-1, 1, 64)
    ct = th.encrypt(s["server"], values)
    got, info = s["receiver"].combine(ct, shares_of(s, ct, (1, 2)))
    np.testing.assert_allclose(got[0, :64], values, atol=TOL)
    assert info["flooding"][0]["flooding_bits"] > 29


def test_threshold_face_search(two_of_three, tmp_path):
    """Nobody holds the secret key: public-key enrollment and queries, a search, t decryptors, one receiver."""
    import encmatch
    from encmatch.index import decrypted_to_result
    from encmatch.service.measure import expected_results, same_answer, separated_gallery

    s = two_of_three
    rng = np.random.default_rng(9)
    gallery, _, queries = separated_gallery(rng, DIM, 300, DIM)
    index = tmp_path / "index"
    enroller = encmatch.Enroller(s["server"])
    enroller.create_index(index, 0.5)
    enroller.enroll(index, gallery)
    with encmatch.Querier(s["server"]) as querier, encmatch.Server(index, s["server"]) as server:
        for mode in ("membership", "identification"):
            for q in queries:
                result = server.search(querier.encrypt_query(q), mode)
                _, info = s["receiver"].combine(result, shares_of(s, result, (1, 3)))
                want = expected_results(gallery, q[None, :], 0.5, mode)[0]
                assert same_answer(decrypted_to_result(info["answer"]), want), (mode, info["answer"])
        with pytest.raises(InvalidArgument):
            querier.encrypt_query(np.zeros(DIM))
