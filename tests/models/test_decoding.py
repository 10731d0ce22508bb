"""models/decoding.py's helpers for a prompt's pass: release_freed hands freed heap pages back
(glibc keeps them), measured by the process's resident pages."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

CHILD = r"""
import numpy as np
from attncli.models.decoding import release_freed

def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096

blocks = [np.ones(8192) for _ in range(16_000)]  # 64 KB each: the heap's, not mapped alone
kept = blocks[-1]  # the last one keeps the heap's top from being trimmed on free
del blocks
before = resident()
release_freed()
print(before, resident())
"""


def test_release_freed_hands_freed_heap_pages_back() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        pytest.skip("not glibc: release_freed does nothing there")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          check=True, timeout=120)
    before, after = (int(n) for n in done.stdout.split())
    assert before - after > 800 * 2**20  # most of the 1 GB freed goes back
