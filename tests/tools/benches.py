"""A bench script of bench/ imported as a module, for the tests that run its functions."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

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
