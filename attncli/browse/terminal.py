"""browse in the terminal: refused before any work without one, run full-screen, and quiet when
the terminal goes away. Nothing here imports Textual or torch until browse runs."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from textual.driver import Driver

    from attncli.browse.app import Saver
    from attncli.browse.source import Source

NO_TERMINAL = ("attncli browse needs a terminal: it draws full-screen and reads keys, and {what} "
               "is not one; `attncli run` (or `heads`) prints the same attention to a pipe or file")


def check_terminal() -> None:
    """Refuse before any work when stdin or stdout is not a terminal (or TERM=dumb, which
    cannot draw full-screen)."""
    for fd, what in ((1, "standard output"), (0, "standard input")):
        if not os.isatty(fd):
            raise AttnCliError(NO_TERMINAL.format(what=what))
    if os.environ.get("TERM") == "dumb":
        raise AttnCliError(NO_TERMINAL.format(what="a TERM=dumb terminal"))


def _quiet_lost_terminal(args: threading.ExceptHookArgs) -> None:
    """A terminal gone (SSH dropped, the pane closed) fails Textual's output thread's writes:
    the hang-up's one line says so, not a traceback."""
    if not issubclass(args.exc_type, OSError):
        threading.__excepthook__(args)


@contextmanager
def drawing_on_stdout() -> Iterator[None]:
    """Inside: file descriptor 2 is stdout's terminal. Textual draws on stderr, and browse's
    terminal is stdout (checked above), while stderr may be a log file; after, stderr is back
    for the messages (a hang-up's line)."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(1, 2)
    try:
        yield
    finally:
        with suppress(OSError):  # the terminal may be gone
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _driver() -> type[Driver] | None:
    """Textual's POSIX terminal driver, reading on past input that is not UTF-8 (a Meta key
    sent as an 8-bit byte, a stray 0xff): Textual's own decodes strictly, and such a byte ended
    its input thread with a traceback over the screen and browse with exit 0."""
    if sys.platform == "win32":
        return None
    from textual.drivers.linux_driver import LinuxDriver

    class Driver(LinuxDriver):
        def run_input_thread(self) -> None:
            while True:
                try:
                    super().run_input_thread()
                    return
                except UnicodeDecodeError:
                    continue  # the read that held it is dropped; the next keys are read

    return Driver


def run_in_terminal(source: Source, save: Saver) -> tuple[int, bool]:
    """Browse source full-screen until q or Ctrl-C: the exit code, and whether a layer's pass is
    still running in a worker thread (after q or Ctrl-C it may be)."""
    from attncli.browse.app import WORKER, BrowseApp

    browser = BrowseApp(source, save=save, driver_class=_driver())
    threading.excepthook = _quiet_lost_terminal
    with drawing_on_stdout():
        browser.run()
    busy = any(t.name == WORKER and t.is_alive() for t in threading.enumerate())
    return browser.return_code or 0, busy
