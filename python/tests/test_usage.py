"""One set of names, units and defaults across the SDK and the command line."""

from __future__ import annotations

import argparse
import warnings

import pytest

import encmatch
from encmatch import EncryptedIndex, cli, presets
from encmatch._util.ui import gigabytes
from encmatch.params import memory_budget_bytes
from encmatch._util.defaults import DEFAULT_KAPPA, DEFAULT_PRESET, PRESETS
from encmatch.errors import InsecureParameters, InvalidArgument
from encmatch._util.units import parse_size

from conftest import KAPPA, TOY


def test_sizes_with_units_mean_the_same_in_the_sdk_and_the_cli():
    for text, expected in (("4GB", 4 * 10**9), ("512 MB", 512 * 10**6), ("1.5GiB", int(1.5 * 2**30)), ("0B", 0)):
        assert memory_budget_bytes(text) == expected
        assert gigabytes(text) == expected
    with pytest.raises(InvalidArgument, match="names no unit"):
        memory_budget_bytes("4")  # 4 bytes or 4 GB? the SDK asks
    assert gigabytes("4") == 4 * 10**9            # a bare number: GB on the command line
    assert memory_budget_bytes(4_000_000) == 4_000_000  # and bytes in the SDK
    assert memory_budget_bytes(None) == 0
    for bad in ("4 parsecs", "-1GB", "nanGB", "GB", "1e999GB"):
        with pytest.raises(InvalidArgument):
            parse_size(bad, bare="B")
        with pytest.raises(argparse.ArgumentTypeError):
            gigabytes(bad)
    with pytest.raises(InvalidArgument):
        memory_budget_bytes(True)


def test_preset_names_and_defaults_agree_with_the_core():
    assert tuple(p["preset"] for p in presets()) == PRESETS
    assert DEFAULT_PRESET == "default"
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for name, p in sub.choices.items():
        for action in p._actions:
            if "--preset" in action.option_strings and name not in ("threshold",):
                assert action.default == DEFAULT_PRESET, name
                assert action.choices and set(action.choices) <= set(PRESETS), name
                assert action.help, name
                checked += 1
            if "--kappa" in action.option_strings:
                assert action.default == DEFAULT_KAPPA, name
            if action.option_strings and action.option_strings != ["-h", "--help"]:
                assert action.help, f"{name} {action.option_strings} has no help text"
    assert checked >= 6  # keygen, validate, strategies, bench, demo, accuracy, calibrate


def test_face_model_names_are_the_same_everywhere():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    seen = set()
    for name, p in sub.choices.items():
        for action in p._actions:
            if "--model" in action.option_strings and action.choices:
                seen.add(tuple(action.choices))
    assert seen == {("mobilefacenet", "dlib")}


def test_insecure_preset_warns_in_the_sdk(tmp_path):
    with pytest.warns(InsecureParameters, match="NO security"):
        index = EncryptedIndex.create(tmp_path / "ix", dim=8, preset=TOY, kappa=KAPPA, delta=0.5,
                                      memory_budget="1GB")
    with index:
        assert index.memory_budget == 10**9
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        EncryptedIndex(tmp_path / "ix").close()  # opening warns no more: the creator was told


def test_create_requires_a_delta(tmp_path):
    with pytest.raises(TypeError, match="delta"):
        EncryptedIndex.create(tmp_path / "ix", dim=8, preset=TOY)  # type: ignore[call-arg]


def test_errors_are_exported():
    for name in ("Unavailable", "ShardUnavailable", "Corrupt", "InvalidArgument"):
        assert issubclass(getattr(encmatch, name), encmatch.EncmatchError)
