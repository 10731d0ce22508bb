"""A progress bar on stderr for long passes: on a terminal only, once the work has run a while."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

DELAY_S = 1.0  # quick runs never show a bar
LABELS = {"attention": "tiled attention", "pooling": "pooling heatmaps"}


class ProgressBar:
    """Called as (what, done, total) from any thread; draws nothing until delay has passed."""

    def __init__(self, console: Console | None, delay: float = DELAY_S,
                 clock: Callable[[], float] = time.monotonic, rate: bool = False) -> None:
        self._rate = rate  # show items per second beside the bar
        self._console = console  # None: never draw
        self._delay, self._clock = delay, clock
        self._start = clock()
        self._lock = threading.Lock()
        self._bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, what: str, done: int, total: int) -> None:
        if self._console is None:
            return
        with self._lock:
            if self._bar is None:
                if self._clock() - self._start < self._delay:
                    return
                self._bar = _start_bar(self._console, self._rate, self._clock)
            if what not in self._tasks:
                self._tasks[what] = self._bar.add_task(LABELS.get(what, what), total=total,
                                                       rate="")
            task = self._tasks[what]
            self._bar.update(task, completed=done, total=total)
            if self._rate:
                speed = next(t.speed for t in self._bar.tasks if t.id == task)
                self._bar.update(task, rate=f"{speed:.2f}/s" if speed else "")

    @property
    def shown(self) -> bool:
        """Whether the bar has been drawn."""
        return self._bar is not None

    def close(self) -> None:
        """Take the bar off the terminal, if it was drawn."""
        with self._lock:
            if self._bar is not None:
                self._bar.stop()


def _start_bar(console: Console, rate: bool = False,
               clock: Callable[[], float] = time.monotonic) -> Progress:
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = [TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
               TimeRemainingColumn()]
    if rate:  # the task's speed: Rich's estimate of items a second
        columns.insert(3, TextColumn("{task.completed}/{task.total} · "
                                     "{task.fields[rate]}"))
    bar = Progress(*columns, console=console, transient=True, get_time=clock)
    bar.start()
    return bar


@contextmanager
def progress_bar(rate: bool = False) -> Iterator[ProgressBar]:
    """A ProgressBar on stderr when stderr is a terminal; one that draws nothing otherwise.
    With rate, items per second are shown too."""
    console = None
    if sys.stderr.isatty():
        from rich.console import Console

        console = Console(stderr=True)
    bar = ProgressBar(console, DELAY_S, rate=rate)
    try:
        yield bar
    finally:
        bar.close()
