"""Coarse tasks in worker threads of one torch thread each, as SDPA's CPU kernel runs them.

Thousands of small multi-threaded torch ops each end in a barrier, and every barrier stalls while
another process holds one of the cores: on a shared machine, one torch thread per worker and one
task per worker at a time runs many times faster.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

import torch

Task = TypeVar("Task")
State = TypeVar("State")


def each_in_threads(tasks: Sequence[Task], work: Callable[[Task, State], None],
                    setup: Callable[[], State], on_cpu: bool = True) -> None:
    """work(task, state) for every task, state = setup() once per worker thread.

    On CPU, up to torch's thread count of workers take one task at a time; elsewhere (CUDA),
    this thread does them all in order.
    """
    threads = torch.get_num_threads()
    workers = min(threads, len(tasks)) if on_cpu else 1
    pending = iter(tasks)
    lock = threading.Lock()
    stop = threading.Event()

    def worker() -> None:
        if workers > 1:
            torch.set_num_threads(1)  # this thread only
        state = setup()
        with torch.no_grad():  # grad mode is per thread
            while not stop.is_set():
                with lock:
                    task = next(pending, None)
                if task is None:
                    return
                work(task, state)

    if workers <= 1:
        worker()
        return
    pool = ThreadPoolExecutor(workers)
    try:
        futures = [pool.submit(worker) for _ in range(workers)]
        wait(futures, return_when=FIRST_EXCEPTION)
    finally:
        stop.set()  # after an error or Ctrl-C, the other workers stop at the end of their task
        pool.shutdown()
        torch.set_num_threads(threads)  # new threads copy the count the workers last set
    for future in futures:
        future.result()  # raises a worker's error here
