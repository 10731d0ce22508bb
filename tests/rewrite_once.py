"""The test modules' asserts rewritten once, before xdist starts its workers.

pytest rewrites each test module's asserts (for its failure messages) and keeps the result in
__pycache__; a worker that finds none there rewrites every module it collects. Workers started
together on a fresh clone all find none, so each rewrote all ~340 modules (about 10 s of CPU
apiece). The controller, which collects nothing itself, writes them here first, through pytest's
own rewriting, into the cache that the workers then read. Nothing is written where bytecode is
not to be (PYTHONDONTWRITEBYTECODE), nor under --assert=plain.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


def rewrite_test_modules(config: pytest.Config) -> int:
    """The number of test modules whose rewritten bytecode was written now."""
    try:  # pytest's own functions, not public: where they change, each worker rewrites as before
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
            try_makedirs,
        )
        from _pytest.pathlib import fnmatch_ex
    except ImportError:
        return 0
    state = config.stash.get(assertstate_key, None)
    if sys.dont_write_bytecode or state is None or state.mode != "rewrite":
        return 0
    patterns = config.getini("python_files")
    roots = [config.rootpath / p for p in config.getini("testpaths")] or [config.rootpath]
    written = 0
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            if path.name != "conftest.py" and not any(fnmatch_ex(p, path) for p in patterns):
                continue
            cache = get_cache_dir(path)
            pyc = cache / (path.name[:-3] + PYC_TAIL)
            if _read_pyc(path, pyc, state.trace) is not None or not try_makedirs(cache):
                continue
            source_hash, code = _rewrite_test(path, config)
            _write_pyc(state, code, source_hash, pyc)
            written += 1
    return written
