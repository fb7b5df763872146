"""The optional dependency groups: the SDK and the core commands run without any extra installed, and
a feature whose extra is missing ends with an error naming it (``pip install 'encmatch[extra]'``).

Each case runs in a child process in which the extras' modules cannot be imported (``sys.modules[name]
= None``, as if they were not installed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from encmatch._util.extras import EXTRAS

BLOCK = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for mods in EXTRAS.values() for m in mods)


def _run(body: str, tmp_path) -> subprocess.CompletedProcess:
    """Run ``body`` with every extra missing; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(body)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_the_sdk_needs_no_extra(tmp_path):
    """Create, add and search an encrypted index (toy preset) with no extra: answers equal brute force."""
    p = _run("""
        import warnings
        import numpy as np
        import encmatch
        warnings.simplefilter("ignore", encmatch.errors.InsecureParameters)
        rng = np.random.default_rng(7)
        gallery = rng.standard_normal((40, 16)); gallery /= np.linalg.norm(gallery, axis=1, keepdims=True)
        queries = np.vstack([gallery[3], gallery[17], -gallery[0]])
        with encmatch.EncryptedIndex.create("ix", dim=16, preset="toy", delta=0.6) as ix:
            ix.add(gallery)
            got = [r.positions for r in ix.search(queries)]
        want = [sorted(np.flatnonzero(gallery @ q >= 0.6).tolist()) for q in queries]
        assert [sorted(g) for g in got] == want, (got, want)
        for name in ("fastapi", "ray", "matplotlib", "PIL", "dlib", "httpx"):
            assert sys.modules.get(name) is None, name
        print("ok")
    """, tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


@pytest.mark.parametrize("extra, body", [
    ("service", "from encmatch.cli import main; sys.exit(main(['serve', '--data', 'd']))"),
    ("service", "from encmatch.service import RemoteIndex"),
    ("ray", "from encmatch.cluster import RayBackend"),
    ("plots", "from encmatch.cli import main; sys.exit(main(['bench', '--preset', 'toy', '--out', 'o']))"),
    ("faces", "open('a.jpg', 'wb').write(b'not a photo'); from encmatch.faces import load_image; load_image('a.jpg')"),
    ("faces", "from encmatch.cli import main; open('a.jpg', 'wb').write(b'x'); sys.exit(main(['embed', 'a.jpg', '-o', 'e.npz']))"),
])
def test_a_missing_extra_is_named(tmp_path, extra, body):
    """The command line says ``error: ... pip install 'encmatch[extra]'`` and exits 1; the SDK raises
    MissingExtra (an ImportError) naming the extra."""
    p = _run(body, tmp_path)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert f"pip install 'encmatch[{extra}]'" in p.stderr, p.stderr
    if "main(" in body:
        assert p.stderr.splitlines()[-1].startswith("error: ") and "Traceback" not in p.stderr, p.stderr
    else:
        assert "MissingExtra" in p.stderr, p.stderr
    assert not list(tmp_path.glob("o/*")), "nothing written before the check"


def test_the_command_line_starts_without_extras(tmp_path):
    """``encmatch --help`` and ``encmatch info`` need no extra."""
    p = _run("from encmatch.cli import main; sys.exit(main(['info']))", tmp_path)
    assert p.returncode == 0, p.stderr
    p = _run("from encmatch.cli import main; sys.exit(main(['--help']))", tmp_path)
    assert p.returncode == 0 and "encmatch" in p.stdout, p.stderr
