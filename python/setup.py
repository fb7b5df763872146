"""The wheel is a platform wheel: it carries the core library (``encmatch/_lib/libencmatch.so``, built by
``make core``) and the MobileFaceNet weights (``make models``), loaded through ctypes, so it is tied to
the platform but not to a Python ABI (``py3-none-<platform>``). Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
NEEDED = ("encmatch/_lib/libencmatch.so", "encmatch/_models/MobileFaceNet.tflite")


class PlatformWheel(bdist_wheel):
    """bdist_wheel for a package with a shared library it loads with ctypes."""

    def finalize_options(self) -> None:
        """Refuse to build a wheel without the library and the weights."""
        missing = [p for p in NEEDED if not (HERE / p).is_file()]
        if missing:
            raise SystemExit(f"error: {', '.join(missing)} missing: run `make core models` first")
        super().finalize_options()

    def get_tag(self) -> tuple[str, str, str]:
        """Any Python 3, no Python ABI, this platform."""
        return "py3", "none", super().get_tag()[2]


class LibraryDistribution(Distribution):
    """A distribution whose files go to the platform's library directory (it holds a shared library)."""

    def has_ext_modules(self) -> bool:
        """True: the package carries compiled code, though not as a Python extension."""
        return True


setup(cmdclass={"bdist_wheel": PlatformWheel}, distclass=LibraryDistribution)
