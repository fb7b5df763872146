"""A Ray cluster of several nodes on one host, started the way an operator starts a real one.

Each node is its own ``ray start`` (the head with ``--head``, the others
with ``--address``), started on loopback (Ray advertises the host's own
address for it), with its own temporary directory (its session, logs and
sockets), its own object store and its own ports, and the cluster's own
authentication token (Ray's token mode: a process without it is refused), so
that a sharded search crosses nodes exactly as it would across machines:
the query and the evaluation keys are fetched from one node's object store
into the other's. :meth:`LocalNode.kill` kills a node's processes with
SIGKILL (a machine lost, not a clean shutdown). Used to test and measure
scale-out where only one machine is available
(``python -m encmatch.cluster.measure --two-nodes``,
``python/tests/test_cluster_nodes.py``).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"


class NodeError(RuntimeError):
    """A local node could not be started or did not join in time."""


#: Worker ports per node (Ray starts one worker process per port).
WORKER_PORTS = 200


def free_port(taken: set[int]) -> int:
    """A TCP port on loopback that nothing listens on right now and not in ``taken`` (added to it).

    The kernel picks it from its ephemeral range (``ip_local_port_range``).
    """
    while True:
        with socket.socket() as s:
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
        if port not in taken:
            taken.add(port)
            return port


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def worker_port_ranges(nodes: int) -> list[tuple[int, int]]:
    """Disjoint worker-port ranges for ``nodes`` nodes, below the kernel's ephemeral range, so that no port
    that :func:`free_port` hands out (or that another program gets from the kernel) falls inside one.

    A random band of them, so that two clusters on one host rarely collide.
    """
    span = WORKER_PORTS * nodes
    top = _ephemeral_start() - 1
    bands = max(1, (top - 10000) // span)
    first = top - span * (1 + secrets.randbelow(bands))
    return [(first + i * WORKER_PORTS, first + (i + 1) * WORKER_PORTS - 1) for i in range(nodes)]


def _ray_cli() -> list[str]:
    """The ``ray`` command of this Python environment."""
    return [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())"]


@dataclass
class LocalNode:
    """One ``ray start`` node: its temporary directory and the ports that tell its processes apart."""

    name: str
    temp_dir: Path
    num_cpus: int
    resources: dict[str, float] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    worker_ports: tuple[int, int] = (0, 0)

    def start(self, token: str, taken: set[int], head_address: str | None = None,
              object_store_bytes: int = 400 * 2**20) -> None:
        """``ray start`` this node with the cluster's ``token``: the head if ``head_address`` is None,
        else a node joining it. Its ports are drawn outside ``taken`` (the cluster's, updated)."""
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        names = ["node-manager-port", "object-manager-port", "metrics-export-port", "dashboard-agent-listen-port",
                 "dashboard-agent-grpc-port", "runtime-env-agent-port"]
        self.ports = {n: free_port(taken) for n in names}
        low, high = self.worker_ports
        args = _ray_cli() + ["start", "--node-ip-address", LOOPBACK, "--temp-dir", str(self.temp_dir),
                             "--num-cpus", str(self.num_cpus), "--num-gpus", "0",
                             "--object-store-memory", str(object_store_bytes),
                             "--resources", json.dumps(self.resources),
                             "--min-worker-port", str(low), "--max-worker-port", str(high),
                             "--disable-usage-stats"]
        args += [f"--{n}={p}" for n, p in self.ports.items()]
        if head_address is None:
            self.ports["port"] = free_port(taken)
            args += ["--head", "--port", str(self.ports["port"]), "--include-dashboard=false"]
        else:
            args += ["--address", head_address]
        env = {**os.environ, **auth_env(token), "RAY_USAGE_STATS_ENABLED": "0"}
        out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=180)
        if out.returncode != 0:
            raise NodeError(f"ray start of node {self.name} failed ({out.returncode}): {out.stderr[-2000:]}")

    @property
    def address(self) -> str:
        """The head's GCS address (``host:port``), for ``ray.init`` and ``ray start --address``."""
        return f"{LOOPBACK}:{self.ports['port']}"

    def pids(self) -> list[int]:
        """Processes of this node: everything whose command line names its temporary directory or
        node-manager port (raylet, object store, agents, the actors' worker processes)."""
        marks = (str(self.temp_dir), f"--node_manager_port={self.ports.get('node-manager-port')}")
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(m in cmd for m in marks):
                found.append(int(entry.name))
        return found

    def kill(self) -> int:
        """SIGKILL every process of this node (a lost machine); returns how many were killed."""
        killed = 0
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        return killed


def auth_env(token: str) -> dict[str, str]:
    """The environment that makes a Ray process use ``token`` (Ray's token authentication)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}


def _reload_ray_auth() -> None:
    """Make this process's Ray re-read its authentication mode and token from the environment."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


class LocalCluster:
    """A head and ``workers`` more nodes on this host; a context manager that stops them all.

    ``cpus`` are each node's logical CPUs (``head_cpus`` the head's, if
    given); every node declares the custom
    resource ``node-<name>`` = 1 so that a test can see where actors run.
    ``root`` holds the nodes' temporary directories; it must be short (Ray
    puts Unix sockets 70 characters below it, and a socket's path is
    limited to 107 bytes).
    """

    def __init__(self, root: os.PathLike | str, workers: int = 1, cpus: int = 2, head_cpus: int | None = None) -> None:
        root = Path(root).resolve()
        if len(str(root)) > 30:
            raise NodeError(f"{root}: too long for Ray's socket paths (at most 30 characters, e.g. a mkdtemp in /tmp)")
        self.token = secrets.token_hex(32)
        self.nodes = [LocalNode("head", root / "head", cpus if head_cpus is None else head_cpus, {"node-head": 1})]
        self.nodes += [LocalNode(f"worker{i}", root / f"worker{i}", cpus, {f"node-worker{i}": 1})
                       for i in range(1, workers + 1)]

    @property
    def address(self) -> str:
        """The head's GCS address."""
        return self.nodes[0].address

    def __enter__(self) -> "LocalCluster":
        try:
            taken: set[int] = set()
            for node, ports in zip(self.nodes, worker_port_ranges(len(self.nodes))):
                node.worker_ports = ports
            self.nodes[0].start(self.token, taken)
            for node in self.nodes[1:]:
                node.start(self.token, taken, self.address)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def connect(self) -> None:
        """Connect this process to the cluster as its driver (``ray.init``), with the cluster's token.

        Ray caches its authentication settings when first imported: they are
        reloaded here (as Ray's own tests do) so that a process that imported
        Ray before can still join.
        """
        import ray

        os.environ.update(auth_env(self.token))
        _reload_ray_auth()
        ray.init(address=self.address, include_dashboard=False, log_to_driver=False)

    def disconnect(self) -> None:
        """Leave the cluster (``ray.shutdown``) and drop its token from this process."""
        import ray

        ray.shutdown()
        for name in auth_env(""):
            os.environ.pop(name, None)
        _reload_ray_auth()

    def wait_alive(self, count: int, timeout: float = 60.0) -> None:
        """Wait until the connected Ray driver sees ``count`` live nodes."""
        import ray

        deadline = time.monotonic() + timeout
        while sum(1 for n in ray.nodes() if n["Alive"]) != count:
            if time.monotonic() > deadline:
                raise NodeError(f"the cluster did not reach {count} live nodes in {timeout:g} s")
            time.sleep(0.5)

    def stop(self) -> None:
        """Kill every node's processes (workers first, then the head)."""
        for node in reversed(self.nodes):
            node.kill()
