"""Where the workers run: a local pool of processes (the standard library's), or Ray actors
(cluster.py). Both run worker.Scorer, take batches of documents, and hand results back to the
driver in the order they finish; only the driver writes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import attncli.machine as machine
from attncli.errors import AttnCliError
from attncli.machine import size_text
from attncli.scan.plan import MAX_WORKERS
from attncli.scan.worker import ScanSettings, score_in_process, start_process

# A spawned worker once torch and the model are loaded: 0.35 GB resident measured on SmolLM2
# (ps, two workers mid-scan), rounded up; a larger model's layer adds to it.
WORKER_BYTES = 400 * 10**6

Batch = list[tuple[str, str | None, str | None, bool]]
Scored = list[dict[str, Any]]


def usable_cores() -> int:
    """The cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _workers_held(free: int) -> int:
    """How many workers half of free memory holds (the other half for the rest)."""
    return free // 2 // WORKER_BYTES


def default_workers() -> int:
    """--workers when not given: the usable cores, as many as half the memory available holds
    (check_workers' measure), at least one."""
    return max(1, min(usable_cores(), MAX_WORKERS, _workers_held(machine.memory_available())))


def check_workers(workers: int, documents: int) -> None:
    """Refuse, in one line, more worker processes than half the memory available holds: the
    pool starts one a batch in flight, so at most as many as there are documents. One worker
    is a plain run, which the model's own check has let through."""
    started, free = min(workers, max(documents, 1)), machine.memory_available()
    if started > 1 and started > (most := _workers_held(free)):
        need = started * WORKER_BYTES
        raise AttnCliError(f"--workers {workers} starts up to {started} processes, each loading "
                           f"torch and the model (about {size_text(WORKER_BYTES)} each, "
                           f"{size_text(need)} in all), more than half the {size_text(free)} "
                           f"available; give --workers {max(most, 1)} or fewer")


def _start_orphan_watch(settings: ScanSettings) -> None:
    """start_process, plus a thread that ends this process once its driver is gone (a
    SIGKILLed driver cannot shut its pool down)."""
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's: it stops the scan

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
    start_process(settings)


def run_local(settings: ScanSettings, batches: Iterable[Batch], workers: int) -> Iterator[Scored]:
    """Each batch scored by one of workers spawned processes, at most two batches a worker
    queued at a time. Stopped early (a signal, an error), it ends the pool's processes without
    waiting for the batches under way."""
    spawn = multiprocessing.get_context("spawn")  # no forked copy of the driver's torch state
    pool = ProcessPoolExecutor(workers, mp_context=spawn, initializer=_start_orphan_watch,
                               initargs=(settings,))
    pending: set[Future[Scored]] = set()
    try:
        for batch in batches:
            pending.add(pool.submit(score_in_process, batch))
            while len(pending) >= 2 * workers:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                yield from (future.result() for future in done)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            yield from (future.result() for future in done)
    except BrokenProcessPool:
        _let_go(pool)
        raise AttnCliError("a scan worker process died (out of memory?); the parts written "
                           "are kept, and the same command resumes") from None
    except BaseException:
        _let_go(pool)
        raise
    pool.shutdown(wait=True)


def _let_go(pool: ProcessPoolExecutor) -> None:
    """The pool shut down now: its processes ended mid-batch (they hold nothing that is not
    written again), so nothing waits for the batches under way, and nothing is left behind."""
    for process in pool_processes(pool):
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def pool_processes(pool: ProcessPoolExecutor) -> list[multiprocessing.process.BaseProcess]:
    """The pool's live worker processes. The standard library names them only in a private
    attribute before Python 3.14's terminate_workers(); tests/scan/test_pool.py fails on a
    Python whose pool no longer keeps them there."""
    processes = getattr(pool, "_processes", None)
    return list(processes.values()) if isinstance(processes, dict) else []
