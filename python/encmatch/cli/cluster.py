"""Command-line pieces of the scale-out: ``encmatch plan`` and the ``--backend ray`` options."""

from __future__ import annotations

import argparse
from pathlib import Path

from .._util.defaults import DEFAULT_KAPPA
from .._util.ui import gigabytes
from ..errors import InvalidArgument

__all__ = ["add_commands", "add_backend_arguments", "backend_from_args"]


def add_backend_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--backend local|ray`` and the Ray placement options to ``p``."""
    g = p.add_argument_group("scale-out (Ray)")
    g.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="search in this process (default) or on Ray actors holding the index's groups")
    g.add_argument("--ray-address", default=None,
                   help="Ray cluster to join (default: the RAY_ADDRESS environment variable, else a new local one)")
    g.add_argument("--shards-per-actor", type=int, default=1, help="groups (shards) per actor (default: %(default)s)")
    g.add_argument("--ray-workers", type=int, default=None,
                   help="number of actors sharing the groups evenly (overrides --shards-per-actor)")
    g.add_argument("--actor-cpus", type=float, default=1.0, help="CPUs per actor (default: %(default)s)")
    g.add_argument("--actor-gpus", type=float, default=0.0,
                   help="GPUs per actor, fractions allowed so shards share a GPU (default: %(default)s)")
    g.add_argument("--actor-engine", choices=("cpu", "gpu"), default="cpu",
                   help="search engine of each actor: the core on CPUs (default) or encmatch.gpu on the actor's "
                        "GPU (needs --actor-gpus; membership and identification)")
    g.add_argument("--max-restarts", type=int, default=3,
                   help="restarts of a dead actor before its shard is unavailable (default: %(default)s)")
    g.add_argument("--spread", action="store_true",
                   help="place the actors on as many Ray nodes as possible (a lost node takes fewer shards)")
    g.add_argument("--recovery-wait", type=float, default=120.0, metavar="S",
                   help="seconds a query waits for a lost node's shards to come back on another node "
                        "(default: %(default)s)")


def backend_from_args(args: argparse.Namespace):
    """The :class:`RayBackend` the options ask for, or ``None`` for the in-process backend."""
    if args.backend == "local":
        return None
    from ..cluster.ray_backend import RayBackend

    return RayBackend(address=args.ray_address, shards_per_actor=args.shards_per_actor, workers=args.ray_workers,
                      num_cpus=args.actor_cpus, num_gpus=args.actor_gpus, max_restarts=args.max_restarts,
                      spread=args.spread, recovery_wait=args.recovery_wait, engine=args.actor_engine)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``encmatch plan`` to the subcommands ``sub``."""
    s = sub.add_parser("plan", help="workers, shards per worker, memory and latency for a gallery size")
    s.add_argument("--vectors", type=int, required=True, help="gallery size (vectors)")
    s.add_argument("--memory-per-worker", type=gigabytes, required=True, metavar="GB",
                   help="memory of one worker (GB; GPU memory for GPU workers)")
    s.add_argument("--target-latency", type=float, default=None, metavar="S",
                   help="latency to meet (seconds); default: the memory-bound minimum fleet")
    s.add_argument("--profile", default="cpu-2core",
                   help="measured costs: a shipped profile (cpu-2core, l40s-papers003) or a JSON file "
                        "(default: %(default)s)")
    s.add_argument("--kappa", type=int, default=DEFAULT_KAPPA,
                   help="comparator depth to plan for; a profile measured at another is refused (default: %(default)s)")
    s.add_argument("--json", action="store_true", help="print the plan as JSON")
    s.add_argument("--plot", type=Path, default=None, help="write latency against fleet size to this PNG")
    s.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    """Print a capacity plan; exit 1 when no fleet meets the target latency."""
    from ..cluster.plan import as_json, load_profile, plan, plot, render

    if args.memory_per_worker <= 0:
        raise InvalidArgument("--memory-per-worker must be > 0")
    p = plan(args.vectors, args.memory_per_worker, load_profile(args.profile), args.target_latency, kappa=args.kappa)
    print(as_json(p) if args.json else render(p))
    if args.plot:
        plot(p, args.plot)
    return 0 if p.workers is not None else 1
