"""The process's standard streams, made safe before any work, as coreutils treats them (and its
cycle collector, kept off while the CLI loads).

A closed stdin reads as empty, a closed stdout fails at the first write with one line, a closed
stderr swallows messages (the exit code still tells), and a character the output encoding cannot
hold is replaced rather than fatal. Closed descriptors are filled with /dev/null first, so a file
opened later never lands on 0, 1 or 2 and receives output meant for a stream.
"""

from __future__ import annotations

import errno
import gc
import io
import os
import signal
import sys
from types import FrameType

# What a write to a closed descriptor, a full disk, a quota or a failing device reports.
WRITE_ERRNOS = (errno.EBADF, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EPIPE)
MIN_WIDTH, MAX_WIDTH = 20, 1000  # console columns; COLUMNS outside this range is clamped


class _ClosedOutput(io.RawIOBase):
    """Standard output that was closed when attncli started: every write fails as write(2) would."""

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _fill(fd: int, flags: int) -> None:
    """Put /dev/null on a closed descriptor so that no later open() takes its number."""
    null = os.open(os.devnull, flags)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


_interrupted = False


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def catch_interrupts() -> None:
    """Ctrl-C raises KeyboardInterrupt as by default, and is remembered: a library that swallows
    it mid-import (numpy's C module then refuses a second load) must not turn it into a
    traceback."""
    signal.signal(signal.SIGINT, _on_interrupt)


def was_interrupted() -> bool:
    """Whether Ctrl-C has been pressed since catch_interrupts()."""
    return _interrupted


def after_imports() -> None:
    """Turn the cycle collector back on (main turned it off), with everything the imports made
    moved out of its reach: those objects live until exit, and walking them costs time."""
    if gc.isenabled():
        return  # not started by main (a test, another program): the collector is theirs
    gc.freeze()
    gc.enable()


def setup_streams() -> None:
    """Fill closed descriptors 0-2 and make every text stream replace what it cannot encode."""
    if not _is_open(0):
        _fill(0, os.O_RDONLY)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    if not _is_open(1):
        _fill(1, os.O_WRONLY)
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClosedOutput()), encoding="utf-8")
    if not _is_open(2):
        _fill(2, os.O_WRONLY)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace" if stream is sys.stdout else "backslashreplace")


def clamp_width(width: int) -> int:
    """A console width within MIN_WIDTH..MAX_WIDTH, whatever COLUMNS or the terminal says."""
    return max(MIN_WIDTH, min(MAX_WIDTH, width))


def quiet_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def write_error(err: OSError) -> str:
    """The one line for a failed write to standard output (closed, disk full, I/O error)."""
    return f"write error: {err.strerror or os.strerror(err.errno or errno.EIO)}"
