"""What attncli is doing now, for whoever shows it: the computation names its steps (`doing`) and
counts its long passes (`counted`); the command line's status line on stderr listens
(cli/progress.py). Where no one listens (the Python API, a pipe), each call is one test of None.

A part that is about to take the terminal (a full-screen app, an answer streamed token by token)
calls `hush` first, so that the status line is gone before it writes.

A step that a signal must not split (an answer token kept and streamed) runs inside `whole()`:
where the command line catches signals (cli/streams.py hands its hold to `hold_signals_with`),
a Ctrl-C that arrives inside is raised when the step ends; elsewhere the block is plain. A
computation that takes a Ctrl-C as "stop here" (generate keeps the answer written so far) calls
`spent()`, so that the rest of the run goes on and a later Ctrl-C interrupts it again.
`reached(phase)` names a point of the computation for the command line's test hook
(ATTNCLI_SELF_SIGNAL), which signals the process there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Protocol


class Listener(Protocol):
    """Whoever shows the steps: the status line and its bars."""

    def doing(self, what: str) -> None:
        """A step begins: what it does, in a few words ("reading the model")."""

    def __call__(self, what: str, done: int, total: int) -> None:
        """A counted pass: done of total (called from worker threads too)."""

    def hush(self) -> None:
        """Stop showing: the terminal is about to be written."""


_listener: Listener | None = None
_said = ""  # the step said last
_hold: Callable[[], AbstractContextManager[object]] = nullcontext
_spend: Callable[[], None] | None = None
_reached: Callable[[str], None] | None = None


def hold_signals_with(hold: Callable[[], AbstractContextManager[object]],
                      spend: Callable[[], None]) -> None:
    """whole() runs its block inside hold(): a context in which a signal is only remembered,
    and raised when it ends; spent() calls spend(), which forgets a Ctrl-C remembered so far
    (and raises again for a signal that must end the run)."""
    global _hold, _spend
    _hold, _spend = hold, spend


def hook_phases(hook: Callable[[str], None]) -> None:
    """reached(phase) calls hook(phase) from now on."""
    global _reached
    _reached = hook


def reached(phase: str) -> None:
    """The computation is at phase (a test hook may signal here)."""
    if _reached is not None:
        _reached(phase)


def whole() -> AbstractContextManager[object]:
    """A step that a signal must not split: one that arrives inside is raised after it."""
    return _hold()


def spent() -> None:
    """The KeyboardInterrupt just caught was taken as "stop here": the run goes on, and only a
    later Ctrl-C interrupts it (SIGTERM or a hang-up raises again: the run ends)."""
    if _spend is not None:
        _spend()


def doing(what: str) -> None:
    """Say what the step beginning now does (shown until the next step)."""
    global _said
    _said = what
    if _listener is not None:
        _listener.doing(what)


@contextmanager
def step(what: str) -> Iterator[None]:
    """doing(what) inside the block; afterwards, the step said before it again."""
    before = _said
    doing(what)
    try:
        yield
    finally:
        if before:
            doing(before)


def counted(what: str, done: int, total: int) -> None:
    """Say how far a counted pass is: done of total."""
    if _listener is not None:
        _listener(what, done, total)


def hush() -> None:
    """Take the status line off the terminal for good: it is about to be written."""
    if _listener is not None:
        _listener.hush()


@contextmanager
def listening(listener: Listener | None) -> Iterator[None]:
    """listener hears the steps inside the block (None: no one does)."""
    global _listener
    previous, _listener = _listener, listener
    try:
        yield
    finally:
        _listener = previous
