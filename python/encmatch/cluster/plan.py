"""Capacity planning: how many workers, how many shards each, what latency.

A gallery of N vectors is ceil(N / shard_size) independent shards (a shard
is one group: 16,384 vectors at N = 2^15). Workers hold shards in memory
and search them for every query; the query's latency is the time the
busiest worker needs for its shards (plus the scale-out's fixed overhead).
From a *profile* of measured costs, :func:`plan` derives papers/003's
scaling law:

- the **memory-bound minimum fleet**: a worker holds at most
  ``floor((memory - worker_overhead) / shard_bytes)`` shards, so at least
  ``ceil(shards / that)`` workers are needed to keep the gallery resident;
- the **kernel-bound minimum latency**: with one shard per worker, more
  workers no longer help: the latency is one shard's search time.

Between the two, a worker with k shards answers in the latency measured
for k shards per worker when the profile has it, else in proportion to the
rounds of ``concurrent`` shards (shards one worker searches at once, e.g. 2
under CUDA MPS) from the nearest measured point (:meth:`Profile.latency`). Profiles ship for the CPU worker measured on this project's
machine (``python -m encmatch.cluster.measure``) and for papers/003's L40S
GPUs (its published figures); ``--profile FILE`` takes another. A profile
states the comparator depth (kappa) it was measured at, since the
comparator sets a query's time; a plan for another depth is refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from .._util.plots import pyplot
from ..errors import InvalidArgument

__all__ = ["Profile", "Plan", "load_profile", "plan", "builtin_profiles"]

#: The shipped profiles (python/encmatch/reference/cluster-profiles.json).
PROFILES_FILE = "cluster-profiles.json"


@dataclass
class Profile:
    """Measured costs of one kind of worker (see the module doc)."""

    name: str
    description: str
    shard_size: int
    shard_seconds: float
    shard_bytes: float
    worker_overhead_bytes: float = 0.0
    concurrent: int = 1
    concurrent_seconds: float | None = None
    overhead_seconds: float = 0.0
    #: Measured latency (seconds) of one worker holding k shards, by k.
    measured: dict[int, float] = field(default_factory=dict)
    source: str = ""
    #: The comparator depth the costs were measured at (None: not
    #: encmatch's comparator, or not stated).
    kappa: int | None = None

    def __post_init__(self) -> None:
        self.measured = {int(k): float(v) for k, v in (self.measured or {}).items()}
        if self.shard_size < 1 or self.shard_seconds <= 0 or self.shard_bytes <= 0 or self.concurrent < 1:
            raise InvalidArgument(f"profile {self.name!r}: shard_size, shard_seconds, shard_bytes and concurrent "
                                  "must be positive")

    def check_kappa(self, kappa: int) -> str:
        """Refuses (:class:`InvalidArgument`) a profile measured at another
        comparator depth than ``kappa``: its costs would describe another
        system (the comparator sets a query's time and its error band).
        Returns a warning for a profile that does not state its depth, else
        an empty string."""
        if self.kappa is None:
            return (f"warning: profile {self.name!r} does not state a comparator depth (kappa): its costs are not "
                    f"measured at encmatch's kappa {kappa}")
        if self.kappa != kappa:
            raise InvalidArgument(
                f"profile {self.name!r} was measured at kappa {self.kappa}, the plan asks for kappa {kappa}: "
                f"measure a profile at kappa {kappa} (python -m encmatch.cluster.measure --kappa {kappa}), or plan "
                f"for kappa {self.kappa} (--kappa {self.kappa})")
        return ""

    def points(self) -> dict[int, float]:
        """Every measured latency by shards per worker: one shard, ``concurrent`` shards, and ``measured``."""
        pts = {1: self.shard_seconds}
        if self.concurrent > 1 and self.concurrent_seconds:
            pts[self.concurrent] = self.concurrent_seconds
        pts.update(self.measured)
        return pts

    def latency(self, k: int) -> float:
        """Seconds for one worker to search k shards, plus the scale-out overhead.

        A measured k is taken as measured; beyond the largest measured k0
        below k, the time grows with the rounds of ``concurrent`` shards:
        ``latency(k0) * ceil(k / concurrent) / ceil(k0 / concurrent)``.
        """
        pts = self.points()
        if k in pts:
            return pts[k] + self.overhead_seconds
        k0 = max(j for j in pts if j < k)
        rounds = math.ceil(k / self.concurrent) / math.ceil(k0 / self.concurrent)
        return pts[k0] * rounds + self.overhead_seconds


@dataclass
class Plan:
    """A fleet for one gallery: the recommendation and the curve it comes from."""

    vectors: int
    shards: int
    memory_per_worker: float
    max_shards_per_worker: int
    min_workers_memory: int
    min_latency_seconds: float
    workers: int | None
    shards_per_worker: int | None
    latency_seconds: float | None
    memory_used_per_worker: float | None
    target_latency: float | None
    curve: list[dict]
    profile: Profile
    note: str = ""

    def to_json(self) -> dict:
        """The plan as plain JSON (the profile included)."""
        return asdict(self)


def builtin_profiles() -> dict[str, Profile]:
    """The profiles shipped with encmatch, by name."""
    raw = json.loads(resources.files("encmatch").joinpath("reference", PROFILES_FILE).read_text())
    return {p["name"]: Profile(**p) for p in raw["profiles"]}


def load_profile(name_or_path: str) -> Profile:
    """A shipped profile by name, or a profile JSON file (one profile object)."""
    profiles = builtin_profiles()
    if name_or_path in profiles:
        return profiles[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise InvalidArgument(f"no profile {name_or_path!r}: use one of {sorted(profiles)} or a JSON file")
    try:
        return Profile(**json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError) as exc:
        raise InvalidArgument(f"{path} is not a profile: {exc}") from exc


def plan(vectors: int, memory_per_worker: float, profile: Profile, target_latency: float | None = None,
         kappa: int | None = None) -> Plan:
    """Size a fleet for ``vectors`` vectors with ``memory_per_worker`` bytes each.

    With ``kappa``, the plan is for that comparator depth: a profile
    measured at another is refused (:meth:`Profile.check_kappa`), and one
    that does not state its depth gives a warning in the plan's ``note``.

    Without ``target_latency`` the recommendation is the memory-bound
    minimum fleet; with it, the smallest fleet whose predicted latency
    meets the target (none when the target is below the kernel-bound
    minimum latency; the plan's ``note`` says so).
    """
    if vectors < 1 or memory_per_worker <= 0:
        raise InvalidArgument("vectors and memory per worker must be positive")
    if target_latency is not None and target_latency <= 0:
        raise InvalidArgument("the target latency must be positive")
    warning = profile.check_kappa(kappa) if kappa is not None else ""
    shards = math.ceil(vectors / profile.shard_size)
    fit = int((memory_per_worker - profile.worker_overhead_bytes) // profile.shard_bytes)
    if fit < 1:
        raise InvalidArgument(
            f"a worker with {memory_per_worker / 1e9:.1f} GB cannot hold one shard ({profile.shard_bytes / 1e9:.2f} GB "
            f"plus {profile.worker_overhead_bytes / 1e9:.2f} GB of keys): give workers more memory, or stream "
            "the shards from disk (memory budget) at the cost of latency")
    fit = min(fit, shards)
    curve = []
    for k in range(1, fit + 1):
        workers = math.ceil(shards / k)
        if curve and curve[-1]["workers"] == workers:
            continue  # same fleet as a smaller k: the busiest worker is no better off
        curve.append({"shards_per_worker": k, "workers": workers, "latency_seconds": profile.latency(k),
                      "memory_per_worker": profile.worker_overhead_bytes + k * profile.shard_bytes})
    min_fleet = curve[-1]
    note = ""
    if target_latency is None:
        pick = min_fleet
    else:
        meets = [c for c in curve if c["latency_seconds"] <= target_latency]
        pick = min(meets, key=lambda c: c["workers"]) if meets else None
        if pick is None:
            note = (f"no fleet meets {target_latency:g} s: the minimum latency is kernel-bound at "
                    f"{curve[0]['latency_seconds']:.2f} s (one shard per worker); it needs faster kernels, "
                    "not more workers")
    note = "\n".join(x for x in (warning, note) if x)
    return Plan(
        vectors=vectors, shards=shards, memory_per_worker=memory_per_worker, max_shards_per_worker=fit,
        min_workers_memory=min_fleet["workers"], min_latency_seconds=curve[0]["latency_seconds"],
        workers=pick and pick["workers"], shards_per_worker=pick and pick["shards_per_worker"],
        latency_seconds=pick and pick["latency_seconds"], memory_used_per_worker=pick and pick["memory_per_worker"],
        target_latency=target_latency, curve=curve, profile=profile, note=note,
    )


def render(p: Plan) -> str:
    """A plan as text for people."""
    prof = p.profile
    lines = [
        f"profile {prof.name}: {prof.description}",
        "  comparator depth: " + (f"kappa {prof.kappa}" if prof.kappa is not None else "not stated"),
        f"  measured: {prof.shard_seconds:.3g} s and {prof.shard_bytes / 1e9:.2f} GB per shard of "
        f"{prof.shard_size} vectors, {prof.worker_overhead_bytes / 1e9:.2f} GB of keys per worker"
        + (f", {prof.concurrent} shards at once in {prof.concurrent_seconds:.3g} s" if prof.concurrent > 1 else "")
        + (f", {prof.overhead_seconds:.3g} s scale-out overhead per query" if prof.overhead_seconds else ""),
        f"gallery: {p.vectors:,} vectors = {p.shards} shards; {p.memory_per_worker / 1e9:.1f} GB per worker "
        f"holds at most {p.max_shards_per_worker} shards",
        f"memory-bound minimum fleet: {p.min_workers_memory} workers "
        f"({p.curve[-1]['shards_per_worker']} shards each, {p.curve[-1]['latency_seconds']:.2f} s)",
        f"kernel-bound minimum latency: {p.min_latency_seconds:.2f} s ({p.curve[0]['workers']} workers, one shard each)",
    ]
    if p.workers is not None:
        target = f" for a target of {p.target_latency:g} s" if p.target_latency is not None else ""
        lines.append(f"plan{target}: {p.workers} workers x {p.shards_per_worker} shards, "
                     f"{p.memory_used_per_worker / 1e9:.1f} GB each, expected latency {p.latency_seconds:.2f} s")
    if p.note:
        lines.append(p.note)
    lines.append("workers  shards/worker  latency (s)  memory/worker (GB)")
    for c in p.curve:
        lines.append(f"{c['workers']:7d}  {c['shards_per_worker']:13d}  {c['latency_seconds']:11.2f}  "
                     f"{c['memory_per_worker'] / 1e9:18.1f}")
    return "\n".join(lines)


def plot(p: Plan, path: str | Path) -> None:
    """Latency against fleet size (papers/003 Figure 2's axes), marking both bounds."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([c["workers"] for c in p.curve], [c["latency_seconds"] for c in p.curve], "o-", label=p.profile.name)
    ax.axvline(p.min_workers_memory, color="grey", ls="--", label=f"memory-bound minimum ({p.min_workers_memory})")
    ax.axhline(p.min_latency_seconds, color="grey", ls=":", label=f"kernel-bound minimum ({p.min_latency_seconds:.2f} s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("workers")
    ax.set_ylabel("query latency (s)")
    ax.set_title(f"{p.vectors:,} vectors, {p.memory_per_worker / 1e9:.0f} GB per worker")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def as_json(p: Plan) -> str:
    """The plan as indented JSON."""
    return json.dumps(p.to_json(), indent=2)
