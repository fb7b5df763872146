"""Fetch by similarity (issue 18): payloads enrolled beside the vectors, fetched for the matching records.

Plaintext parts first (brute force under both rules with exact ties, the
payload checks, the records files, the result and its errors), then end to
end at the toy preset: real LFW faces, a gallery crowding delta on both
sides (outside the comparator's value band), the strict rule, more matches
than the bound, appends that fill the last group, bad payloads, the CLI and
the service. Every encrypted answer is compared with the exact brute force:
count, positions and payloads, in the order the workload wants (payload,
then position).
"""

from __future__ import annotations

import json
import warnings
import zipfile

import numpy as np
import pytest

import encmatch
from encmatch import Client, EncryptedIndex, Enroller, PayloadIncomplete, PayloadResult
from encmatch.evaluation import bruteforce
from encmatch import _core
from encmatch._core import as_payloads
from encmatch.evaluation.bruteforce import cosine_scores, payload_search
from encmatch.params import comparator
from encmatch.data import load_records
from encmatch.errors import Corrupt, InvalidArgument, PayloadBandWarning
from encmatch._util.journal import batch_digest
from encmatch.results import incomplete_message, payload_result, require_complete, sort_records

from conftest import KAPPA, TOY, run_cli
from nearthreshold import at_scores, filler, orthonormal

WIDTH = 7
I16 = np.iinfo(np.int16)


def random_payloads(rng: np.random.Generator, n: int, width: int = WIDTH) -> np.ndarray:
    """int16 payloads over the whole range, extremes included, with repeated rows and repeated first
    columns (so that the sort must look past column 0, and break full ties by position)."""
    p = rng.integers(I16.min, I16.max + 1, (n, width), dtype=np.int64)
    if n >= 8:
        p[0, :] = I16.min
        p[1, :] = I16.max
        p[2:6, 0] = p[2, 0]           # same first column
        p[6] = p[7]                   # identical rows
        dup = rng.choice(n, min(n // 4, 40), replace=False)
        p[dup[: len(dup) // 2]] = p[dup[len(dup) // 2: 2 * (len(dup) // 2)]]
    return p.astype(np.int16)


# ---------------------------------------------------------------------------
# Fixtures: payload key sets (one more level), shared per dimension
# ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def payload_keys(tmp_path_factory):
    """``payload_keys(dim)``: a toy payload key set, generated once per dimension."""
    cache: dict = {}

    def get(dim: int):
        if dim not in cache:
            d = tmp_path_factory.mktemp(f"payload-keys-{dim}") / "keys"
            Client.generate(d, preset=TOY, kappa=KAPPA, dim=dim, payload=True).close()
            cache[dim] = d
        return cache[dim]

    return get


@pytest.fixture
def payload_index(tmp_path, payload_keys):
    """``payload_index(dim, delta, width=7, rule=None)``: an empty EncryptedIndex with payloads (no rule:
    ``>=`` with the guard band on both sides of delta)."""
    opened: list = []

    def make(dim: int, delta: float, width: int = WIDTH, rule: str | None = None) -> EncryptedIndex:
        path = tmp_path / f"pix{len(opened)}"
        path.mkdir()
        (path / "keys").symlink_to(payload_keys(dim), target_is_directory=True)
        Enroller(path / "keys" / "server").create_index(path / "index", delta, payload_width=width, rule=rule)
        ix = EncryptedIndex(path)
        opened.append(ix)
        return ix

    yield make
    for ix in opened:
        ix.close()


def in_guard_band(ix, scores: np.ndarray) -> np.ndarray:
    """Where answers may be flagged rather than exact: the index's guard band as the core reports it (the
    comparator's value band, centred at delta whatever the rule; an exact tie lies inside it)."""
    band = ix.guard_band
    if band is None:  # a core that does not report it: the comparator's value band at delta
        vb = comparator(KAPPA, ix.delta)["value_band"]
        band = (ix.delta - vb, ix.delta + vb)
    return (scores >= band[0]) & (scores <= band[1])


def check_payloads(ix, gallery, payloads, probes, bound=32, *, require_outside=True, labels=None):
    """Search ``probes`` in payload mode and assert each answer equals brute force exactly (count,
    positions, payloads in order, complete) for every probe with no score within the value band.

    ``require_outside``: the probes were built so; assert it. Returns ``(results, expected, checked)``.
    """
    scores = cosine_scores(gallery, probes)
    outside = (~in_guard_band(ix, scores)).all(axis=1)
    if require_outside:
        assert outside.all(), f"probes {np.flatnonzero(~outside)} have scores within the guard band {ix.guard_band}"
    want = payload_search(gallery, payloads, probes, ix.delta, ix.rule, bound, labels=labels)
    got = ix.search(probes, "payload", bound=bound, strict=False)  # probes inside the band may be incomplete
    checked = 0
    for i, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, PayloadResult) and g.payloads.dtype == np.int16 and g.payloads.shape[1] == ix.payload_width
        if not outside[i]:
            continue
        assert g.count == w.count, f"probe {i}: count {g.count}, brute force {w.count}"
        assert g.complete and g.unresolved == 0, f"probe {i}: {incomplete_message(g)}"
        np.testing.assert_array_equal(g.positions, w.positions, err_msg=f"probe {i}: positions")
        np.testing.assert_array_equal(g.payloads, w.payloads, err_msg=f"probe {i}: payloads")
        np.testing.assert_array_equal(g.matches, np.flatnonzero(bruteforce.matches(scores[i], ix.delta, ix.rule)))
        if labels is not None:
            assert g.labels == w.labels
        assert g == w
        checked += 1
    return got, want, checked


# ---------------------------------------------------------------------------
# Plaintext: brute force, checks, records files, results
# ---------------------------------------------------------------------------


def test_bruteforce_rules_on_exact_ties_and_the_sort():
    rng = np.random.default_rng(0)
    gallery = rng.standard_normal((50, 12))
    probe = rng.standard_normal(12)
    pays = random_payloads(rng, 50, 3)
    scores = cosine_scores(gallery, probe)[0]
    k = int(np.argsort(scores)[-5])          # an achieved score, taken as delta: an exact tie
    delta = float(scores[k])
    ge = payload_search(gallery, pays, probe, delta, ">=")
    gt = payload_search(gallery, pays, probe, delta, ">")
    assert ge.count == 5 and gt.count == 4
    assert k in ge.positions and k not in gt.positions
    assert set(ge.positions) - set(gt.positions) == {k}
    for res in (ge, gt):  # sorted lexicographically by payload (signed), then position
        rows = [tuple(int(v) for v in row) + (int(p),) for row, p in zip(res.payloads, res.positions)]
        assert rows == sorted(rows)
        np.testing.assert_array_equal(res.payloads, pays[res.positions])
    # one identification brute force, the same matches
    np.testing.assert_array_equal(np.sort(ge.positions), bruteforce.search(gallery, probe, delta).positions)
    with pytest.raises(InvalidArgument):
        payload_search(gallery, pays, probe, delta, "=>")
    # bound: complete only up to the bound; every record there all the same
    b = payload_search(gallery, pays, probe, delta, ">=", bound=4)
    assert not b.complete and b.count == 5 and len(b.positions) == 5


def test_sort_breaks_ties_by_position_and_compares_signed():
    pos, pay = sort_records([9, 3, 5, 1], [[1, -2], [1, -2], [-32768, 7], [1, -3]])
    assert pos.tolist() == [5, 1, 3, 9]
    assert pay.tolist() == [[-32768, 7], [1, -3], [1, -2], [1, -2]]


def test_payload_checks():
    ok = as_payloads([[1, 2], [3, -4]], 2, 2)
    assert ok.dtype == np.dtype("<i2") and ok.tolist() == [[1, 2], [3, -4]]
    assert as_payloads(np.array([5.0, -32768.0]), 1, 2).tolist() == [[5, -32768]]  # [W] for one vector
    assert as_payloads(np.array([[32767]], dtype=np.uint64), 1, 1).tolist() == [[32767]]
    bad = {
        "NaN": ([[1.0, np.nan]], 1, 2),
        "infinite": ([[1.0, np.inf]], 1, 2),
        "not integers": ([[1.5, 2]], 1, 2),
        "outside int16": ([[40000, 0]], 1, 2),
        "outside int16 ": ([[-32769, 0]], 1, 2),
        "expected shape": ([[1, 2, 3]], 1, 2),
        "expected shape ": ([1, 2], 2, 1),
        "expected shape  ": ([[1, 2]], 2, 2),
        "expected integers": ([["a", "b"]], 1, 2),
        "expected integers ": ([[True, False]], 1, 2),
    }
    for what, (value, n, w) in bad.items():
        with pytest.raises(InvalidArgument, match=what.strip()):
            as_payloads(value, n, w)
    with pytest.raises(InvalidArgument, match="outside int16"):
        as_payloads(np.array([[2**63 - 1]], dtype=np.int64), 1, 1)


def test_journal_digest_holds_the_payloads():
    v = np.ones((3, 4))
    p = np.arange(6, dtype=np.int16).reshape(3, 2)
    assert batch_digest(v, None) == batch_digest(v, None, None)  # unchanged without payloads
    assert batch_digest(v, None, p) != batch_digest(v, None)
    assert batch_digest(v, None, p) != batch_digest(v, None, p + 1)
    assert batch_digest(v, None, p) == batch_digest(v, None, p.astype(np.int64))


def test_records_files(tmp_path):
    rng = np.random.default_rng(1)
    v = rng.standard_normal((6, 8)).astype(np.float32)
    p = random_payloads(rng, 6, 3)
    np.savez(tmp_path / "r.npz", vectors=v, payloads=p)
    got_v, got_p = load_records(tmp_path / "r.npz")
    np.testing.assert_array_equal(got_v, v)
    np.testing.assert_array_equal(got_p, p)
    np.savez(tmp_path / "emb.npz", emb=v, payloads=p)
    np.testing.assert_array_equal(load_records(tmp_path / "emb.npz")[0], v)
    np.save(tmp_path / "v.npy", v)
    np.save(tmp_path / "p.npy", p)
    got_v, got_p = load_records(tmp_path / "v.npy", tmp_path / "p.npy")
    np.testing.assert_array_equal(got_p, p)
    with pytest.raises(InvalidArgument, match="no payloads"):
        load_records(tmp_path / "v.npy")
    np.save(tmp_path / "short.npy", p[:5])
    with pytest.raises(InvalidArgument, match="for 6 vectors"):
        load_records(tmp_path / "v.npy", tmp_path / "short.npy")
    (tmp_path / "bad.npy").write_bytes((tmp_path / "p.npy").read_bytes()[:70])
    with pytest.raises(Corrupt):
        load_records(tmp_path / "v.npy", tmp_path / "bad.npy")
    with zipfile.ZipFile(tmp_path / "broken.npz", "w") as z:
        z.writestr("vectors.npy", b"\x93NUMPY garbage")
        z.writestr("payloads.npy", b"\x93NUMPY garbage")
    with pytest.raises(Corrupt):
        load_records(tmp_path / "broken.npz")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(Corrupt, match="pickled"):
        load_records(tmp_path / "v.npy", tmp_path / "obj.npy")


def test_payload_result_and_incomplete_messages():
    decrypted = {"mode": "payload", "delta": 0.5, "total": 100, "count": 3, "raw_count": 3.0, "bound": 32,
                 "width": 2, "complete": True, "records": [{"position": 4, "payload": [-1, 2]},
                                                             {"position": 1, "payload": [5, 5]}],
                 "matches": [1, 4, 9], "unresolved": 1, "uncertain": 2}
    res = payload_result(decrypted, ["a", "b", "c", "d", "e"])
    assert res.positions.tolist() == [4, 1] and res.payloads.tolist() == [[-1, 2], [5, 5]]
    assert res.labels == ["e", "b"] and res.count == 3 and res.enrolled and res.payloads.dtype == np.int16
    over = PayloadResult(count=40, positions=np.arange(32), payloads=np.zeros((32, 2), np.int16), complete=False,
                         bound=32, width=2)
    assert incomplete_message(over).startswith("40 records match, more than the bound 32")
    with pytest.raises(PayloadIncomplete, match="40 records match, more than the bound 32") as err:
        require_complete(over)
    assert (err.value.count, err.value.bound, err.value.result) == (40, 32, over)
    assert len(err.value.records) == 32
    assert isinstance(err.value, encmatch.EncmatchError)
    unsep = PayloadResult(count=5, positions=np.arange(3), payloads=np.zeros((3, 2), np.int16), complete=False,
                          bound=32, width=2, unresolved=2)
    assert incomplete_message(unsep).startswith("2 of 5 matches could not be separated")
    assert require_complete(res) is res
    json.dumps(over.to_dict())


# ---------------------------------------------------------------------------
# Key sets and creation
# ---------------------------------------------------------------------------


def test_payload_keys_have_one_more_level(payload_keys, keysets):
    plain = encmatch.describe(TOY, KAPPA, 16)
    more = encmatch.describe(TOY, KAPPA, 16, payload=True)
    assert more["payload"] is True and not plain.get("payload", False)
    assert more["levels"] == plain["levels"] + 1
    with Client(payload_keys(16)) as c:
        assert c.payload and c.params["levels"] == more["levels"]
    assert json.loads((payload_keys(16) / "server" / "keys.json").read_text())["payload"] is True
    with Client(keysets(16)) as c:
        assert not c.payload


def test_creation_options_checked_and_recorded(tmp_path, payload_keys, keysets):
    for kw, what in (({"payload_width": 65}, "payload_width"), ({"payload_width": -1}, "payload_width"),
                     ({"payload_width": 2.5}, "payload_width"), ({"rule": "=>"}, "rule"), ({"rule": "<"}, "rule")):
        with pytest.raises(InvalidArgument, match=what):
            EncryptedIndex.create(tmp_path / "never", dim=16, preset=TOY, kappa=KAPPA, delta=0.5, **kw)
        assert not (tmp_path / "never" / "keys").exists()  # refused before any key was made
    server = payload_keys(16) / "server"
    m = Enroller(server).create_index(tmp_path / "a", 0.5, payload_width=WIDTH, rule=">")
    assert (m["payload_width"], m["rule"]) == (WIDTH, ">")
    m = Enroller(server).create_index(tmp_path / "b", 0.5)
    assert m.get("payload_width", 0) == 0 and m.get("rule", ">=") == ">="
    with pytest.raises(InvalidArgument):  # payloads need a payload key set
        Enroller(keysets(16) / "server").create_index(tmp_path / "c", 0.5, payload_width=3)
    info = encmatch.index_info(tmp_path / "a")
    assert info["payload_width"] == WIDTH and info["rule"] == ">" and info["params"]["payload"] is True


# ---------------------------------------------------------------------------
# End to end, encrypted
# ---------------------------------------------------------------------------


def test_real_faces_payloads_equal_brute_force(lfw, payload_index):
    """LFW MobileFaceNet faces: ~60 people with 3-5 images each plus other faces; probes are held-out
    images of them and of people not enrolled. Every probe's payloads equal brute force."""
    rng = np.random.default_rng(18)
    ids, counts = np.unique(lfw.label, return_counts=True)
    multi = rng.permutation(ids[(counts >= 4) & (counts <= 30)])[:60]
    gallery_rows, probe_rows = [], []
    for i in multi:
        rows = rng.permutation(np.flatnonzero(lfw.label == i))
        probe_rows.append(int(rows[0]))
        gallery_rows += [int(r) for r in rows[1:6]]
    taken = set(multi.tolist())
    others = [int(r) for r in rng.permutation(len(lfw.label)) if int(lfw.label[r]) not in taken][:260]
    gallery_rows += others[:240]
    probe_rows += others[240:]          # people not enrolled
    order = rng.permutation(len(gallery_rows))
    gallery = lfw.emb[np.array(gallery_rows)[order]]
    names = [str(lfw.names[lfw.label[r]]) for r in np.array(gallery_rows)[order]]
    probes = lfw.emb[np.array(probe_rows)]
    pays = random_payloads(rng, len(gallery))
    delta = 0.45
    ix = payload_index(192, delta)
    ix.add(gallery, labels=names, payloads=pays)
    probes = probes[np.r_[0:18, 60:66]]  # 18 enrolled people, 6 not enrolled
    got, want, checked = check_payloads(ix, gallery, pays, probes, require_outside=False, labels=names)
    assert checked >= 18, f"only {checked} of 24 probes had every score outside the value band"
    assert sum(w.count > 0 for w in want) >= 10 and max(w.count for w in want) >= 2  # real matches, several
    hit = next(g for g in got if g.count >= 2)
    assert all(lab for lab in hit.labels)


def crowded(rng, dim, delta, above, below, n_fill, near=0.01):
    """A gallery crowding delta: for each probe j, ``above[j]`` scores in delta + [near, 0.05] and
    ``below[j]`` in delta - [0.05, near], plus filler scoring in [-0.3, 0.3] against every probe."""
    k = len(above)
    basis = orthonormal(rng, dim, k)
    parts = []
    for j in range(k):
        s = np.concatenate([delta + rng.uniform(near, 0.05, above[j]), delta - rng.uniform(near, 0.05, below[j])])
        parts.append(at_scores(rng, basis, j, s))
    parts.append(filler(rng, basis, n_fill, 0.3))
    gallery = np.vstack(parts)
    return gallery[rng.permutation(len(gallery))].astype(np.float32), basis.astype(np.float32)


def test_crowded_threshold_payloads_exact(payload_index):
    """Scores crowding delta on both sides, 0.01-0.05 away (outside the value band, about 0.0076 at kappa
    13), over two groups: counts, positions and payloads exactly brute force's."""
    rng = np.random.default_rng(7)
    delta = 0.6
    ix = payload_index(32, delta)
    band = comparator(KAPPA, delta)["value_band"]
    assert band < 0.01, f"value band {band}: the crowd would be inside it"
    gallery, probes = crowded(rng, 32, delta, above=[24, 31, 0], below=[60, 40, 80], n_fill=2300)
    pays = random_payloads(rng, len(gallery))
    ix.add(gallery, payloads=pays, progress=False)
    assert len(ix.info()["groups"]) == 2
    scores = cosine_scores(gallery, probes)
    near = (np.abs(scores - delta) < 0.06).sum(axis=1)
    assert (near >= [84, 71, 80]).all()  # the crowds are there
    got, want, checked = check_payloads(ix, gallery, pays, probes)
    assert checked == 3 and [w.count for w in want] == [24, 31, 0]
    assert got[2].payloads.shape == (0, WIDTH) and not got[2].enrolled


def test_strict_rule_index(payload_index):
    """The rule is the index's: '>' and '>=' indexes of the same records, scores crowding delta outside the
    guard band (centred at delta whatever the rule), each equal to brute force under its own rule; the
    rule is kept in the manifest and on reopening."""
    rng = np.random.default_rng(11)
    delta = 0.5
    gallery, probes = crowded(rng, 16, delta, above=[5, 12], below=[9, 3], n_fill=150, near=0.015)
    pays = random_payloads(rng, len(gallery))
    for rule in (">", ">="):
        ix = payload_index(16, delta, rule=rule)
        ix.add(gallery, payloads=pays)
        assert ix.rule == rule and ix.info()["rule"] == rule
        lo, hi = ix.guard_band
        assert lo < delta < hi and abs((hi - delta) - (delta - lo)) < 1e-12  # centred at delta
        _, want, _ = check_payloads(ix, gallery, pays, probes)
        assert [w.count for w in want] == [5, 12]
        path = ix.path
        ix.close()
        with EncryptedIndex(path) as again:
            assert again.rule == rule and again.payload_width == WIDTH


def test_exact_tie_is_flagged(payload_index, tmp_path):
    """delta set to the exact (float64) cosine of one record: under either rule the tie decrypts to a value
    that is not clean and is flagged in every mode (identification ``uncertain``, payload incomplete,
    membership ``approximate``), never a clean wrong answer; every other record is exact. The other
    scores are crowded 0.015 to 0.05 from delta on both sides."""
    rng = np.random.default_rng(13)
    gallery, probes = crowded(rng, 16, 0.5, above=[6], below=[6], n_fill=100, near=0.015)
    tie = at_scores(rng, probes.astype(np.float64), 0, [0.5]).astype(np.float32)
    gallery = np.vstack([gallery[:40], tie, gallery[40:]])
    delta = float(cosine_scores(gallery, probes)[0, 40])
    assert abs(delta - 0.5) < 1e-6
    pays = random_payloads(rng, len(gallery))
    for rule in (">=", ">"):
        ix = payload_index(16, delta, rule=rule)
        ix.add(gallery, payloads=pays)
        hit = ix.search(probes[0], "identification")
        assert hit.uncertain.tolist() == [40]
        assert sorted(set(hit.positions.tolist()) - {40}) == sorted(set(np.flatnonzero(
            bruteforce.matches(cosine_scores(gallery, probes)[0], delta, rule)).tolist()) - {40})
        pay = ix.search(probes[0], "payload", strict=False)
        assert not pay.complete and pay.uncertain >= 1 and 40 not in pay.positions.tolist() and pay.count >= 6
        member = ix.search(probes[0], "membership")
        assert member.approximate and abs(member.raw_count - 6.5) < 0.5
    # The command line shows the flags.
    np.save(tmp_path / "q.npy", probes[0])
    p = ok(run_cli("query", "--keys", ix.path / "keys", "--index", ix.path / "index", "--mode", "identification",
                   "--decrypt", tmp_path / "q.npy"))
    assert "uncertain" in p.stdout, p.stdout
    p = ok(run_cli("query", "--keys", ix.path / "keys", "--index", ix.path / "index", "--mode", "membership",
                   "--decrypt", tmp_path / "q.npy"))
    assert "approximate" in p.stdout, p.stdout


def test_payload_band_warning(tmp_path):
    """A payload index whose comparator's value band is wider than +-0.02 (kappa 10) warns at creation, in
    the SDK and on the command line; one at the default depth does not."""
    for kappa, warns in ((10, True), (KAPPA, False)):
        keys = tmp_path / f"keys{kappa}"
        Client.generate(keys, preset=TOY, kappa=kappa, dim=8, payload=True).close()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            Enroller(keys / "server").create_index(tmp_path / f"ix{kappa}", 0.5, payload_width=2)
        got = [w for w in caught if issubclass(w.category, PayloadBandWarning)]
        assert bool(got) == warns, [str(w.message) for w in caught]
        if warns:
            assert "kappa 10" in str(got[0].message) and "undecoded" in str(got[0].message)
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "r.npz", vectors=rng.normal(size=(4, 8)).astype(np.float32),
             payloads=np.zeros((4, 2), np.int16))
    p = ok(run_cli("enroll", "--keys", tmp_path / "keys10", "--index", tmp_path / "cli10", "--delta", 0.5,
                   tmp_path / "r.npz"))
    assert "warning: kappa 10" in p.stderr, p.stderr


def test_more_matches_than_the_bound(payload_index):
    """40 records match: bound 32 raises PayloadIncomplete with the exact count; bound 40 is complete and
    exact; strict=False returns the incomplete answer; the membership count still works."""
    rng = np.random.default_rng(5)
    delta = 0.5
    ix = payload_index(16, delta)
    basis = orthonormal(rng, 16, 2)
    rows = [at_scores(rng, basis, 0, rng.uniform(0.6, 0.9, 40)), at_scores(rng, basis, 1, rng.uniform(0.6, 0.9, 3)),
            filler(rng, basis, 200, 0.3)]
    gallery = np.vstack(rows)[rng.permutation(243)].astype(np.float32)
    pays = random_payloads(rng, len(gallery))
    ix.add(gallery, payloads=pays)
    with pytest.raises(PayloadIncomplete, match="40 records match, more than the bound 32") as err:
        ix.search(basis[0], "payload")
    assert err.value.count == 40 and err.value.bound == 32 and not err.value.result.complete
    with pytest.raises(PayloadIncomplete, match="query 0: 40 records match, more than the bound 39"):
        ix.search(basis, "payload", bound=39)
    loose = ix.search(basis[0], "payload", bound=39, strict=False)
    assert not loose.complete and loose.count == 40 and loose.bound == 39
    assert set(loose.positions.tolist()) <= set(np.flatnonzero(cosine_scores(gallery, basis[0])[0] >= delta))
    check_payloads(ix, gallery, pays, basis, bound=40)
    check_payloads(ix, gallery, pays, basis[1:], bound=3)   # exactly the bound: complete
    assert ix.search(basis[0], "membership").count == 40    # the other modes work on a payload index
    assert ix.search(basis[1], "identification").count == 3


def test_appends_fill_the_last_group_with_their_payloads(payload_index):
    """Owner then public-key enroller then owner: the last group is filled twice and a new group started;
    each record keeps its payload. A rerun of the same records is skipped by the journal; the same
    vectors with other payloads are not."""
    rng = np.random.default_rng(9)
    delta = 0.5
    ix = payload_index(16, delta)
    size = int(ix.params["group_size"])
    n = size + 12
    basis = orthonormal(rng, 16, 4)
    gallery = filler(rng, basis, n, 0.3)
    planted = {0: [5, size - 9, size - 8, size - 2], 1: [size - 7, size - 6, size + 1], 2: [size - 1, size + 11],
               3: []}
    for j, where in planted.items():
        gallery[where] = at_scores(rng, basis, j, rng.uniform(0.6, 0.95, len(where)))
    gallery = gallery.astype(np.float32)
    pays = random_payloads(rng, n)
    ix.add(gallery[: size - 8], payloads=pays[: size - 8], progress=False)
    public = Enroller(ix.client.server_key_dir).enroll(ix.index_dir, gallery[size - 8: size - 6],
                                                       payloads=pays[size - 8: size - 6], progress=False)
    assert public.report == [f"filled group 0 (2 entries, now {size - 6:,} of {size:,})"]
    summary = ix.add(gallery[size - 6:], payloads=pays[size - 6:])
    assert summary.report == [f"filled group 0 (6 entries, now {size:,} of {size:,})",
                                 f"new group 1 (12 entries of {size:,})"]
    assert len(ix) == n
    got, want, _ = check_payloads(ix, gallery, pays, basis)
    assert [w.count for w in want] == [4, 3, 2, 0]
    for j, where in planted.items():
        assert sorted(got[j].positions.tolist()) == sorted(where)
        for p, row in zip(got[j].positions, got[j].payloads):
            np.testing.assert_array_equal(row, pays[p])
    again = ix.add(gallery[size - 6:], payloads=pays[size - 6:])
    assert again.skipped == 18 and again.added == 0 and len(ix) == n
    other = pays[size - 6:].copy()
    other[:, 0] ^= 1
    changed = ix.add(gallery[size - 6:], payloads=other)
    assert changed.added == 18 and len(ix) == n + 18
    check_payloads(ix, np.vstack([gallery, gallery[size - 6:]]), np.vstack([pays, other]), basis)


def test_bad_payloads_refused_before_anything_is_written(payload_index, new_index):
    rng = np.random.default_rng(3)
    ix = payload_index(16, 0.5, width=3)
    v = rng.standard_normal((4, 16)).astype(np.float32)
    good = rng.integers(-5, 5, (4, 3))
    cases = [
        (None, "give payloads"),
        (good[:, :2], "expected shape"),
        (good[:3], "expected shape"),
        (good[0], "expected shape"),
        (np.where(good == good[0, 0], np.nan, good), "NaN"),
        (good + 0.5, "not integers"),
        (good * 0 + 40000, "outside int16"),
        (good * 0 - 32769, "outside int16"),
        (good.astype(str), "expected integers"),
        (good.astype(bool), "expected integers"),
    ]
    for value, what in cases:
        with pytest.raises(InvalidArgument, match=what):
            ix.add(v, payloads=value)
        assert len(ix) == 0 and not list(ix.index_dir.glob("group-*"))
    ix.add(v[0], payloads=[1, -2, 3])       # [W] for one vector
    ix.add(v[1:], payloads=good[1:].astype(np.float64))  # floats holding integers
    assert len(ix) == 4
    res = ix.search(v[0], "payload")
    assert 0 in res.positions.tolist() and res.payloads[res.positions.tolist().index(0)].tolist() == [1, -2, 3]
    with pytest.raises(InvalidArgument, match="bound"):
        ix.search(v[0], "payload", bound=0)
    with pytest.raises(InvalidArgument, match="bound"):
        ix.search(v[0], "payload", bound=4097)
    with pytest.raises(InvalidArgument, match="bound"):
        ix.search(v[0], "identification", bound=5)
    plain = new_index(16, 0.5)
    with pytest.raises(InvalidArgument, match="no payloads"):
        plain.add(v, payloads=good)
    assert len(plain) == 0
    plain.add(v)
    with pytest.raises(InvalidArgument, match="no payloads"):
        plain.search(v[0], "payload")
    # the core checks the input's length itself: vectors without their payloads are refused
    with pytest.raises(InvalidArgument):
        _core.call("enroll", {"index_dir": ix.index_dir, "n": 1, "dim": 16,
                              "server_key_dir": ix.client.server_key_dir}, v[:1])
    with pytest.raises(InvalidArgument):  # and payloads an index without them has no room for
        _core.call("enroll", {"index_dir": plain.index_dir, "n": 1, "dim": 16,
                              "server_key_dir": plain.client.server_key_dir},
                   np.concatenate([v[:1].view(np.uint8).ravel(), np.zeros(6, np.uint8)]))
    assert len(encmatch.index_info(ix.index_dir)["groups"]) == 1 and encmatch.index_info(ix.index_dir)["count"] == 4


def test_empty_payload_index_answers_nothing(payload_index):
    ix = payload_index(16, 0.5)
    res = ix.search(np.ones(16), "payload")
    assert res.count == 0 and res.complete and res.payloads.shape == (0, WIDTH)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def ok(p, code=0):
    assert p.returncode == code, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def test_cli_round_trip(tmp_path):
    rng = np.random.default_rng(21)
    delta, dim = 0.5, 16
    gallery, probes = crowded(rng, dim, delta, above=[6, 3], below=[5, 5], n_fill=60, near=0.015)
    pays = random_payloads(rng, len(gallery))
    names = np.array([f"rec-{i}" for i in range(len(gallery))])
    keys = tmp_path / "keys"
    p = ok(run_cli("keygen", "--keys", keys, "--preset", TOY, "--dim", dim, "--payload"))
    assert "payload: yes" in p.stdout
    np.savez(tmp_path / "records.npz", vectors=gallery, payloads=pays, name=names)
    np.save(tmp_path / "probes.npy", probes)

    # .npz records, strict rule, width from the records
    p = ok(run_cli("enroll", "--keys", keys, "--index", tmp_path / "ix", "--delta", delta, "--rule", ">",
                   "--labels-from", "name", tmp_path / "records.npz"))
    assert "payloads of 7 int16 value(s) per record" in p.stdout and "rule score > delta" in p.stdout
    assert encmatch.index_info(tmp_path / "ix")["rule"] == ">"
    assert "payloads: 7" in ok(run_cli("info", "--index", tmp_path / "ix")).stdout
    p = ok(run_cli("query", "--keys", keys, "--index", tmp_path / "ix", "--mode", "payload", "--decrypt", "--json",
                   tmp_path / "probes.npy"))
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    want = payload_search(gallery, pays, probes, delta, ">", 32, labels=names.tolist())
    assert len(lines) == 2
    for doc, w in zip(lines, want):
        assert doc["mode"] == "payload" and doc["complete"] is True and doc["count"] == w.count
        assert [r["position"] for r in doc["records"]] == w.positions.tolist()
        assert [r["payload"] for r in doc["records"]] == w.payloads.tolist()
        assert doc["matches"] == sorted(w.positions.tolist()) and doc["labels"] == w.labels
        assert doc["bound"] == 32 and doc["width"] == WIDTH

    # two .npy files, default rule; one probe written, then decrypted (JSON and table)
    np.save(tmp_path / "vectors.npy", gallery)
    np.save(tmp_path / "payloads.npy", pays)
    np.save(tmp_path / "probe0.npy", probes[0])
    ok(run_cli("enroll", "--keys", keys, "--index", tmp_path / "ix2", "--delta", delta, "--payload-width", WIDTH,
               tmp_path / "vectors.npy", "--payloads", tmp_path / "payloads.npy"))
    ok(run_cli("query", "--keys", keys, "--index", tmp_path / "ix2", "--mode", "payload", "--bound", 8,
               "--out", tmp_path / "r.bin", tmp_path / "probe0.npy"))
    doc = json.loads(ok(run_cli("decrypt", "--keys", keys, "--json", tmp_path / "r.bin")).stdout)
    w = payload_search(gallery, pays, probes[0], delta, ">=", 8)
    assert doc["bound"] == 8 and doc["count"] == w.count == 6
    assert [r["payload"] for r in doc["records"]] == w.payloads.tolist()
    text = ok(run_cli("decrypt", "--keys", keys, tmp_path / "r.bin")).stdout
    assert "payload: 6 match(es)" in text and "complete" in text
    first = " ".join(str(int(x)) for x in w.payloads[0])
    assert any(" ".join(line.split()[1:]) == first for line in text.splitlines()), text

    # more matches than the bound: the partial answer printed, an error line, exit 1
    p = ok(run_cli("query", "--keys", keys, "--index", tmp_path / "ix2", "--mode", "payload", "--bound", 2,
                   "--decrypt", tmp_path / "probe0.npy"), 1)
    assert "error: probe probe0.npy: 6 records match, more than the bound 2" in p.stderr
    assert "Traceback" not in p.stderr

    # bad input: exit 2, one error line
    (tmp_path / "corrupt.npy").write_bytes((tmp_path / "payloads.npy").read_bytes()[:90])
    for args in (
        ("enroll", "--keys", keys, "--index", tmp_path / "ix2", tmp_path / "vectors.npy", "--payloads",
         tmp_path / "corrupt.npy"),
        ("enroll", "--keys", keys, "--index", tmp_path / "ix2", tmp_path / "vectors.npy"),  # no payloads
        ("enroll", "--keys", keys, "--index", tmp_path / "ix2", "--payload-width", 3, tmp_path / "records.npz"),
        ("enroll", "--keys", keys, "--index", tmp_path / "ix2", "--rule", ">", tmp_path / "records.npz"),
        ("query", "--keys", keys, "--index", tmp_path / "ix2", "--bound", 3, "--decrypt", tmp_path / "probe0.npy"),
        ("query", "--keys", keys, "--index", tmp_path / "ix2", "--mode", "payload", "--bound", 0, "--decrypt",
         tmp_path / "probe0.npy"),
    ):
        p = ok(run_cli(*args), 2)
        assert p.stderr.strip().splitlines()[-1].startswith("error:") and "Traceback" not in p.stderr, p.stderr
    np.save(tmp_path / "wide.npy", np.zeros((len(gallery), 5), np.int16))
    p = ok(run_cli("enroll", "--keys", keys, "--index", tmp_path / "ix2", tmp_path / "vectors.npy",
                   "--payloads", tmp_path / "wide.npy"), 2)
    assert "expected shape" in p.stderr
    assert encmatch.index_info(tmp_path / "ix2")["count"] == len(gallery)  # nothing was added


def test_cli_payload_width_needs_payload_keys(tmp_path, keysets):
    rng = np.random.default_rng(2)
    np.savez(tmp_path / "r.npz", vectors=rng.standard_normal((5, 16)), payloads=np.ones((5, 2), np.int16))
    p = ok(run_cli("enroll", "--keys", keysets(16), "--index", tmp_path / "ix", "--delta", 0.5,
                   tmp_path / "r.npz"), 2)
    assert "keygen --payload" in p.stderr and not (tmp_path / "ix" / "manifest.json").exists()


# ---------------------------------------------------------------------------
# Service
# ---------------------------------------------------------------------------


def test_service_passes_payloads_through(tmp_path, payload_keys):
    from encmatch.service import RemoteIndex
    from encmatch.service.measure import ServerProcess, add_tenant

    data_dir = tmp_path / "svc"
    token = add_tenant(data_dir, "alice")
    proc = ServerProcess(data_dir, "--allow-insecure").start()
    try:
        rng = np.random.default_rng(4)
        delta = 0.5
        gallery, probes = crowded(rng, 16, delta, above=[4, 9], below=[6, 2], n_fill=80, near=0.015)
        pays = random_payloads(rng, len(gallery))
        with RemoteIndex.create(proc.url, token, payload_keys(16), delta, payload_width=WIDTH, rule=">") as ix:
            assert ix.manifest["payload_width"] == WIDTH and ix.manifest["rule"] == ">"
            ix.add(gallery, payloads=pays)
            got = ix.search(probes, "payload", bound=16)
            want = payload_search(gallery, pays, probes, delta, ">", 16)
            assert got == want
            with pytest.raises(PayloadIncomplete, match="9 records match, more than the bound 8"):
                ix.search(probes[1], "payload", bound=8)
            with pytest.raises(InvalidArgument):
                ix.add(gallery[:2])  # no payloads
    finally:
        code = proc.stop()
        proc.kill()
    assert code == 0 and "Traceback" not in proc.log(), proc.log()[-3000:]
