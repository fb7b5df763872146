"""The scripts under ``examples/`` run as a user runs them (``python examples/X.py``), at the toy
preset, from outside the source tree; each checks its own answers against brute force or the
plaintext model and exits non-zero otherwise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(name: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``examples/name`` with ``--preset toy`` in ``tmp_path``."""
    return subprocess.run([sys.executable, str(EXAMPLES / name), "--preset", "toy"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)


def test_every_example_is_tested():
    """A new example gets a test here."""
    tested = {"faces_in_memory.py", "separate_roles.py", "payload_fetch.py", "service_remote.py", "iris_toy.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


@pytest.mark.data
def test_faces_in_memory(tmp_path, data_dir):
    p = _run("faces_in_memory.py", tmp_path)
    assert p.returncode == 0, p.stderr
    assert "enrolled=True" in p.stdout and "enrolled=False" in p.stdout, p.stdout


@pytest.mark.parametrize("name, says", [
    ("separate_roles.py", "matches [42]"),
    ("payload_fetch.py", "4 matching records"),
    ("service_remote.py", "probe of person-077: matches ['person-077']"),
    ("iris_toy.py", "match (enrolled: eye"),
])
def test_example(tmp_path, name, says):
    p = _run(name, tmp_path)
    assert p.returncode == 0, p.stderr
    assert says in p.stdout, p.stdout
    assert not list(tmp_path.iterdir()), "an example leaves nothing behind"
