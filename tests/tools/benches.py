"""A bench script of bench/ imported as a module, for the tests that run its functions."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest

from tests.conftest import ROOT

BENCH = ROOT / "bench"


def bench_module(name: str) -> ModuleType:
    """bench/<name>.py as a module, bench/ on the import path only while it is imported (its
    own imports of the other bench scripts included)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def skip_without_llama_cpp(module: ModuleType) -> None:
    """Skip, saying why, where the bench module's SmolLM2 is not fetched or llama.cpp's CPU
    build cannot be installed (bench/llamacpp.py) with its shim."""
    if not module.SMOLLM2.exists():
        pytest.skip("SmolLM2 is not fetched (scripts/fetch_model.py)")
    if module.llamacpp.install() is None or module.llamacpp.shim() is None:
        pytest.skip("llama-cpp-cffi 0.4.42 could not be installed, or its shim not compiled")
