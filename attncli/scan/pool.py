"""Where the workers run: a local pool of processes (the standard library's), or Ray actors.
Both run worker.Scorer, take batches of documents, and hand results back to the driver in
the order they finish; only the driver writes."""

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

from attncli.errors import AttnCliError
from attncli.scan.worker import ScanSettings, Scorer, score_in_process, start_process

Batch = list[tuple[str, str | None, str | None, bool]]
Scored = list[dict[str, Any]]


def usable_cores() -> int:
    """The cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


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
    queued at a time."""
    spawn = multiprocessing.get_context("spawn")  # no forked copy of the driver's torch state
    with ProcessPoolExecutor(workers, mp_context=spawn, initializer=_start_orphan_watch,
                             initargs=(settings,)) as pool:
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
            raise AttnCliError("a scan worker process died (out of memory?); the parts written "
                               "are kept, and the same command resumes") from None
        finally:
            for future in pending:
                future.cancel()


class RayScorer(Scorer):
    """The Ray actor: a Scorer (its model loaded once) on a node of the cluster."""


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_ray(address: str = "local") -> None:
    """Ray importable, or one line saying what to install. A cluster on this machine's
    loopback is joined there: Ray otherwise swaps 127.0.0.1 for the machine's own address,
    where a cluster started on loopback does not answer."""
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    if host in LOOPBACK:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read at import
    try:
        import ray  # noqa: F401
    except ImportError:
        raise AttnCliError("--ray needs Ray: pip install 'attncli[cluster]'") from None


def run_ray(settings: ScanSettings, batches: Iterable[Batch], workers: int,
            address: str) -> Iterator[Scored]:
    """Each batch scored by one of workers Ray actors on the cluster at address (`local`: a
    throwaway cluster on this machine, on loopback only, for the run)."""
    check_ray(address)
    import ray
    from ray.util import ActorPool

    own = address == "local"
    try:
        if own:
            ray.init(address="local", num_cpus=workers, include_dashboard=False,
                     _node_ip_address="127.0.0.1", log_to_driver=False,
                     configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise AttnCliError(f"--ray {address}: cannot join the Ray cluster ({err})") from None
    try:
        actor = ray.remote(num_cpus=1)(RayScorer)
        pool = ActorPool([actor.remote(settings) for _ in range(workers)])
        for batch in batches:
            while not pool.has_free():
                yield pool.get_next_unordered()
            pool.submit(lambda a, b: a.score_batch.remote(b), batch)
        while pool.has_next():
            yield pool.get_next_unordered()
    finally:
        ray.shutdown()
