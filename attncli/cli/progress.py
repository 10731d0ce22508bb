"""What a command is doing, on stderr: a status line naming the step, and a bar for each counted
pass; on a terminal only, once the work has run DELAY_S, never with --quiet, and gone before
anything else is written to the terminal (attncli.activity's hush)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from attncli.activity import listening
from attncli.errors import escaped

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, Task, TaskID
    from rich.text import Text

DELAY_S = 0.5  # a quick run shows nothing; a wait is named well within a second
LABELS = {"attention": "tiled attention", "pooling": "pooling heatmaps",
          "layers": "running the layers"}
KINDS = ("items", "rate", "bytes")  # what a bar counts: items, items with their rate, bytes
BAR = 24  # the bar's cells; a label is cut (…) so that the line never wraps
BESIDE = {"status": 10, "items": BAR + 24, "rate": BAR + 44, "bytes": BAR + 50}  # cells used


class ProgressBar:
    """Hears attncli.activity (doing, counted passes, hush) from any thread on one status line:
    the step now, a bar when the step is a counted pass, and the time since the command began.
    Nothing is drawn until delay has passed; with timer, a thread draws the line then, even while
    the step makes no call."""

    def __init__(self, console: Console | None, delay: float = DELAY_S,
                 clock: Callable[[], float] = time.monotonic, rate: bool = False,
                 timer: bool = True) -> None:
        self.kind = "rate" if rate else "items"  # what the passes counted from now on count
        self._console = console  # None: never draw
        self._delay, self._clock = delay, clock
        self._start = clock()
        self._lock = threading.RLock()
        self._bar: Progress | None = None
        self._line: TaskID | None = None
        self._step: dict[str, Any] = {"description": "working", "total": None, "completed": 0,
                                      "kind": "status", "rate": ""}
        self._counting: str | None = None  # the counted pass on the line, if any
        self._ended = threading.Event()
        if console is not None and timer:
            threading.Thread(target=self._wait, name="attncli-status", daemon=True).start()

    def _wait(self) -> None:
        import rich.progress  # noqa: F401  (imported while the delay runs: the draw is quick)

        if not self._ended.wait(max(self._delay - (self._clock() - self._start), 0.0)):
            with self._lock:
                self._show()

    def _show(self) -> Progress | None:
        """The display, started now if it may be (lock held)."""
        if self._bar is None and self._console is not None and not self._ended.is_set():
            self._bar = _start_bar(self._console, self._clock, self._start)
            self._line = self._bar.add_task(**self._step)
        return self._bar

    def _draw(self, reset: bool) -> None:
        """The line as self._step says, once due (lock held); reset: a new pass's speed."""
        bar = self._bar or (self._show() if self._clock() - self._start >= self._delay
                            else None)
        if bar is None or self._line is None:
            return
        if reset:
            bar.reset(self._line, **self._step)
        else:
            bar.update(self._line, **self._step)

    def _label(self, what: str, kind: str) -> str:
        """what for the line: escaped, and cut to what the terminal leaves beside the rest."""
        width = self._console.width if self._console is not None else 100
        return _one_line(what, max(width - BESIDE[kind], 12))

    def doing(self, what: str) -> None:
        """The status line says what from now on (escaped, one line)."""
        with self._lock:
            self._step.update(description=self._label(what, "status"), total=None, completed=0,
                              kind="status", rate="")
            self._counting = None
            self._draw(reset=True)

    def __call__(self, what: str, done: int, total: int) -> None:
        with self._lock:
            new = what != self._counting
            self._counting = what
            self._step.update(description=self._label(LABELS.get(what, what), self.kind),
                              total=total, completed=done, kind=self.kind)
            self._draw(reset=new)
            if self.kind == "rate" and self._bar is not None and self._line is not None:
                speed = next(t.speed for t in self._bar.tasks if t.id == self._line)
                self._step["rate"] = f"{speed:.2f}/s" if speed else ""
                self._bar.update(self._line, rate=self._step["rate"])

    @property
    def shown(self) -> bool:
        """Whether anything has been drawn."""
        return self._bar is not None

    def hush(self) -> None:
        """Take the display off the terminal, and draw nothing more."""
        self.close()

    def close(self) -> None:
        """Take the display off the terminal, if it was drawn; nothing is drawn after."""
        with self._lock:
            self._ended.set()
            if self._bar is not None:
                self._bar.stop()


def _one_line(text: str, limit: int = 100) -> str:
    """text for the status line: a path's control characters escaped, cut at limit."""
    text = escaped(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _counted(column: ProgressColumn, kinds: tuple[str, ...] = KINDS) -> ProgressColumn:
    """column on the line of a counted pass of these kinds, nothing on the others."""
    from rich.progress import ProgressColumn

    class Counted(ProgressColumn):
        def render(self, task: Task) -> Text | Any:
            from rich.text import Text

            return column.render(task) if task.fields.get("kind") in kinds else Text("")

    return Counted()


def _since(clock: Callable[[], float], start: float) -> ProgressColumn:
    """The seconds since the command began (not since the line was drawn)."""
    from rich.progress import ProgressColumn

    class Since(ProgressColumn):
        def render(self, task: Task) -> Text:
            from rich.text import Text

            took = clock() - start  # tenths while they matter
            return Text(f"{took:.1f} s" if took < 10 else f"{took:.0f} s",
                        style="progress.elapsed")

    return Since()


def _start_bar(console: Console, clock: Callable[[], float] = time.monotonic,
               start: float = 0.0) -> Progress:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = [SpinnerColumn(), TextColumn("{task.description}", markup=False),
               _counted(BarColumn(bar_width=BAR)),
               _counted(TaskProgressColumn(), ("items", "rate")),
               # the task's speed: Rich's estimate of items a second
               _counted(TextColumn("{task.completed}/{task.total} · {task.fields[rate]}"),
                        ("rate",)),
               _counted(DownloadColumn(), ("bytes",)), _counted(TransferSpeedColumn(), ("bytes",)),
               _counted(TimeRemainingColumn(), KINDS), _since(clock, start)]
    bar = Progress(*columns, console=console, transient=True, get_time=clock,
                   redirect_stdout=False, redirect_stderr=False)
    bar.start()
    return bar


_current: ProgressBar | None = None  # the command's display, while it runs


@contextmanager
def showing(quiet: bool = False) -> Iterator[ProgressBar]:
    """The command's display on stderr, hearing attncli.activity inside the block: drawn on a
    terminal only, never with quiet."""
    global _current
    console = None
    if not quiet and _is_terminal():
        from rich.console import Console

        console = Console(stderr=True)
    bar, previous = ProgressBar(console, DELAY_S), _current
    _current = bar
    try:
        with listening(bar):
            yield bar
    finally:
        bar.close()
        _current = previous


@contextmanager
def progress_bar(rate: bool = False, kind: str | None = None) -> Iterator[ProgressBar]:
    """The command's display (a fresh one outside a command), its bars from now on counting
    kind (KINDS; rate: "rate")."""
    kind = kind or ("rate" if rate else "items")
    assert kind in KINDS, kind
    if _current is None:
        with showing() as bar:
            bar.kind = kind
            yield bar
        return
    before, _current.kind = _current.kind, kind
    try:
        yield _current
    finally:
        _current.kind = before


def _is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (OSError, ValueError):  # a closed stderr
        return False
