"""models/decoding.py's helpers for a prompt's pass: release_freed hands freed heap pages back
(glibc keeps them), measured by this process's resident pages."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from attncli.models.decoding import release_freed


def _resident() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * 4096


def test_release_freed_hands_freed_heap_pages_back() -> None:
    try:
        glibc = hasattr(ctypes.CDLL("libc.so.6"), "malloc_trim")
    except OSError:
        glibc = False
    if not glibc:
        pytest.skip("not glibc: release_freed does nothing there")
    blocks = [np.ones(8192) for _ in range(4_000)]  # 64 KB each: the heap's, not mapped alone
    kept = blocks[-1]  # the last one keeps the heap's top from being trimmed on free
    del blocks
    before = _resident()
    release_freed()
    assert before - _resident() > 200 * 2**20  # most of the 256 MB freed goes back
    assert kept.sum() == 8192
