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
                 clock: Callable[[], float] = time.monotonic) -> None:
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
                self._bar = _start_bar(self._console)
            if what not in self._tasks:
                self._tasks[what] = self._bar.add_task(LABELS.get(what, what), total=total)
            self._bar.update(self._tasks[what], completed=done, total=total)

    @property
    def shown(self) -> bool:
        """Whether the bar has been drawn."""
        return self._bar is not None

    def close(self) -> None:
        """Take the bar off the terminal, if it was drawn."""
        with self._lock:
            if self._bar is not None:
                self._bar.stop()


def _start_bar(console: Console) -> Progress:
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                   TimeRemainingColumn(), console=console, transient=True)
    bar.start()
    return bar


@contextmanager
def progress_bar() -> Iterator[ProgressBar]:
    """A ProgressBar on stderr when stderr is a terminal; one that draws nothing otherwise."""
    console = None
    if sys.stderr.isatty():
        from rich.console import Console

        console = Console(stderr=True)
    bar = ProgressBar(console, DELAY_S)
    try:
        yield bar
    finally:
        bar.close()
