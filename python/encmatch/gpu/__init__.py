"""The GPU search engine (papers/000 and papers/003 run this search on GPUs).

:class:`GpuServer` is a shard of an encrypted index held in GPU memory: it
answers membership and identification queries with the same result bytes
as the core's CPU engine (it replays the core's computation, operation
for operation, with the RNS kernels of ``kernels.cu``), so results merge
and decrypt as the core's do. Without a GPU, the same kernels run on the
CPU (``device="cpu"``), which is how the suite tests them everywhere.

- :mod:`encmatch.gpu.backend`: CUDA through CuPy, or the CPU.
- :mod:`encmatch.gpu.ring`: RNS-CKKS operations, equal to Lattigo's.
- :mod:`encmatch.gpu.program`: the comparator's recorded program.
- :mod:`encmatch.gpu.server`: the shard engine.
- :mod:`encmatch.gpu.bench`: conformance and timings on a GPU machine.
"""

from .backend import cuda_available, get_backend
from .server import GpuServer

__all__ = ["GpuServer", "cuda_available", "get_backend"]
