"""scan/pool.py's local pool: the one private attribute of the standard library it reads (the
pool's worker processes, to end them mid-batch) is pinned here, so a Python that moves it fails
this test instead of leaving workers running."""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

from attncli.scan.pool import _let_go, pool_processes


@pytest.mark.process
def test_a_stopped_pool_ends_its_workers_mid_batch() -> None:
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    assert pool.submit(os.getpid).result(timeout=120) > 0  # the worker is up
    workers = pool_processes(pool)
    assert len(workers) == 1 and workers[0].is_alive()  # the private attribute is still there
    asleep = pool.submit(time.sleep, 30)
    while not asleep.running():
        time.sleep(0.01)
    _let_go(pool)
    workers[0].join(timeout=60)
    assert not workers[0].is_alive()
    # Ended, not waited for: the batch under way never finished.
    assert isinstance(asleep.exception(timeout=60), BrokenProcessPool)
