"""Capacity planning (``encmatch plan``): papers/003's scaling law from its published figures."""

from __future__ import annotations

import json

import pytest

from encmatch.cluster.plan import Profile, builtin_profiles, load_profile, plan
from encmatch.errors import InvalidArgument

from conftest import run_cli

PAPER_GALLERY = 640 * 16384  # papers/003's "10 million": 10,485,760 real faces, 640 shards


def test_reproduces_papers003():
    p = plan(PAPER_GALLERY, 48e9, load_profile("l40s-papers003"))
    assert p.shards == 640
    assert (p.min_workers_memory, p.max_shards_per_worker) == (128, 5)  # "at least 128 GPUs", ~80,000 vectors each
    assert p.min_latency_seconds == pytest.approx(0.64)  # one shard per GPU, 640 GPUs
    by_workers = {c["workers"]: c["latency_seconds"] for c in p.curve}
    assert by_workers[640] == pytest.approx(0.64)
    assert by_workers[320] == pytest.approx(1.2)  # two shards per GPU under MPS
    assert by_workers[160] == pytest.approx(4.0)  # four shards per GPU
    fast = plan(PAPER_GALLERY, 48e9, load_profile("l40s-papers003"), target_latency=1.5)
    assert (fast.workers, fast.shards_per_worker) == (320, 2)


def test_latency_is_monotone_and_bounded():
    prof = Profile(name="t", description="", shard_size=100, shard_seconds=2.0, shard_bytes=1e9,
                   worker_overhead_bytes=0.5e9, concurrent=1, overhead_seconds=0.1, measured={2: 3.5})
    p = plan(1000, 4e9, prof)
    assert p.shards == 10 and p.max_shards_per_worker == 3  # (4 - 0.5) / 1 GB
    lat = [c["latency_seconds"] for c in p.curve]
    assert lat == sorted(lat)
    assert lat[:3] == pytest.approx([2.1, 3.6, 3.5 * 3 / 2 + 0.1])
    none = plan(1000, 4e9, prof, target_latency=1.0)
    assert none.workers is None and "kernel-bound" in none.note


def test_refuses_what_cannot_be_planned(tmp_path):
    prof = load_profile("l40s-papers003")
    with pytest.raises(InvalidArgument, match="cannot hold one shard"):
        plan(10**6, 8e9, prof)
    with pytest.raises(InvalidArgument):
        plan(0, 48e9, prof)
    with pytest.raises(InvalidArgument, match="no profile"):
        load_profile(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x"}')
    with pytest.raises(InvalidArgument, match="not a profile"):
        load_profile(str(bad))


def test_every_shipped_profile_plans():
    for name, prof in builtin_profiles().items():
        assert plan(10**7, 64e9, prof).workers, name


def test_cli(tmp_path):
    out = run_cli("plan", "--vectors", str(PAPER_GALLERY), "--memory-per-worker", "48", "--profile", "l40s-papers003",
                  "--target-latency", "1.5", "--plot", str(tmp_path / "plan.png"))
    assert out.returncode == 0, out.stderr
    assert "320 workers x 2 shards" in out.stdout and "memory-bound minimum fleet: 128 workers" in out.stdout
    assert (tmp_path / "plan.png").stat().st_size > 1000
    js = run_cli("plan", "--vectors", "100000", "--memory-per-worker", "48", "--profile", "l40s-papers003", "--json")
    assert json.loads(js.stdout)["shards"] == 7
    slow = run_cli("plan", "--vectors", str(PAPER_GALLERY), "--memory-per-worker", "48", "--profile", "l40s-papers003",
                   "--target-latency", "0.1")
    assert slow.returncode == 1 and "kernel-bound" in slow.stdout
    small = run_cli("plan", "--vectors", "100000", "--memory-per-worker", "4", "--profile", "l40s-papers003")
    assert small.returncode == 2 and "cannot hold one shard" in small.stderr


def test_profile_of_another_comparator_refused():
    """A profile measured at another kappa plans another system: refused, with what to do; one
    that does not state its kappa plans with a warning."""
    profiles = builtin_profiles()
    assert profiles["cpu-2core"].kappa == 13 and profiles["cpu-2core-kappa8"].kappa == 8
    assert plan(10**7, 24e9, profiles["cpu-2core"], kappa=13).workers
    with pytest.raises(InvalidArgument, match="measured at kappa 8, the plan asks for kappa 13"):
        plan(10**7, 24e9, profiles["cpu-2core-kappa8"], kappa=13)
    paper = plan(PAPER_GALLERY, 48e9, profiles["l40s-papers003"], kappa=13)
    assert paper.workers == 128 and "does not state a comparator depth" in paper.note
    out = run_cli("plan", "--vectors", "10000000", "--memory-per-worker", "24")  # the default kappa
    assert out.returncode == 0 and "comparator depth: kappa 13" in out.stdout, out.stderr
    old = run_cli("plan", "--vectors", "10000000", "--memory-per-worker", "24", "--profile", "cpu-2core-kappa8")
    assert old.returncode == 2 and "measured at kappa 8" in old.stderr
    ok = run_cli("plan", "--vectors", "10000000", "--memory-per-worker", "24", "--profile", "cpu-2core-kappa8",
                 "--kappa", "8")
    assert ok.returncode == 0 and "comparator depth: kappa 8" in ok.stdout
