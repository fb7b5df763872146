"""The wheel, as Python users install things: ``pip wheel`` makes a platform wheel that carries the core
library and the face model's weights; installed into a fresh virtual environment (the SDK's own
dependencies only, no Go, no npm, no source tree), it runs an encrypted search from elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]

SEARCH = textwrap.dedent("""
    import sys, warnings
    from pathlib import Path
    import numpy as np
    import encmatch
    assert Path(encmatch.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), encmatch.__file__
    assert (Path(encmatch.__file__).parent / "_models" / "MobileFaceNet.tflite").stat().st_size > 1_000_000
    warnings.simplefilter("ignore", encmatch.errors.InsecureParameters)
    rng = np.random.default_rng(2)
    gallery = rng.standard_normal((30, 16)); gallery /= np.linalg.norm(gallery, axis=1, keepdims=True)
    with encmatch.EncryptedIndex.create("ix", dim=16, preset="toy", delta=0.7) as ix:
        ix.add(gallery)
        got = ix.search(gallery[[4, 9]])
    assert [r.positions.tolist() for r in got] == [np.flatnonzero(gallery @ gallery[i] >= 0.7).tolist() for i in (4, 9)]
    print("searched with", encmatch.version()["version"])
""")


def _run(cmd: list, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run ``cmd`` without the source tree on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_wheel_installs_and_searches(tmp_path):
    # built from a copy: setuptools' build/ directory would otherwise be left in the source tree
    src = tmp_path / "src"
    shutil.copytree(PYTHON_DIR, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    dist = tmp_path / "dist"
    p = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, src], tmp_path)
    assert p.returncode == 0, p.stderr
    (wheel,) = dist.glob("encmatch-*.whl")
    assert "-py3-none-" in wheel.name, wheel.name  # tied to the platform (the library), not to a Python ABI
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("encmatch/_lib/libencmatch.so", "encmatch/_models/MobileFaceNet.tflite",
                   "encmatch/gpu/kernels.cu", "encmatch/service/routes/search.py"):
        assert needed in names, needed

    venv = tmp_path / "fresh"
    assert _run([sys.executable, "-m", "venv", venv], tmp_path).returncode == 0
    py = venv / "bin" / "python"
    p = _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel], tmp_path)
    assert p.returncode == 0, p.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    p = _run([py, "-c", SEARCH], work)
    assert p.returncode == 0 and "searched with" in p.stdout, p.stderr
    p = _run([venv / "bin" / "encmatch", "--version"], work)
    assert p.returncode == 0 and "encmatch" in p.stdout, p.stderr
    # the extras are optional: a feature without its extra says which one to install
    p = _run([venv / "bin" / "encmatch", "serve", "--data", work / "d"], work)
    assert p.returncode == 1 and "pip install 'encmatch[service]'" in p.stderr, p.stderr
