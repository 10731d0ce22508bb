"""The process's standard streams and signals, made safe before any work, as coreutils treats
them (and its cycle collector, kept off while the CLI loads).

A closed stdin reads as empty, a closed stdout fails at the first write with one line, a closed
stderr swallows messages (the exit code still tells), and a character the output encoding cannot
hold is replaced rather than fatal. Closed descriptors are filled with /dev/null first, so a file
opened later never lands on 0, 1 or 2 and receives output meant for a stream. SIGINT, SIGTERM
and SIGHUP become KeyboardInterrupt, held while torch and numpy import and at a save's critical
steps, and end the run with one line and exit 130, 143 or 129.
"""

from __future__ import annotations

import errno
import gc
import io
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, ModuleType
from typing import Any

from attncli.activity import hold_signals_with, hook_phases

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


# The signals that end attncli like Ctrl-C: the line they print and the exit code (128 + n).
INTERRUPTS = {signal.SIGINT: ("interrupted", 130), signal.SIGTERM: ("terminated", 143),
              signal.SIGHUP: ("hung up", 129)}
# Packages whose import runs C++ that calls back into Python: a KeyboardInterrupt raised there
# can abort the process (SIGABRT) or be swallowed, leaving torch loaded without numpy.
DEFERRED_IMPORTS = ("torch", "numpy")
SELF_SIGNAL = "ATTNCLI_SELF_SIGNAL"  # test hook: PHASE:SIG, e.g. import:numpy:INT, save:TERM

_interrupted = False
_signal = signal.SIGINT
_deferring = 0


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    global _interrupted, _signal
    if not _interrupted:
        _signal = signal.Signals(signum)
    _interrupted = True
    if not _deferring:
        raise KeyboardInterrupt


def _unraisable(unraisable: Any) -> None:
    """A Ctrl-C that lands in a finalizer (a weakref callback, a __del__) is remembered, not
    printed as Python's "Exception ignored ... Traceback"; anything else is printed as ever."""
    if not (_interrupted and isinstance(unraisable.exc_value, KeyboardInterrupt)):
        sys.__unraisablehook__(unraisable)


def catch_interrupts() -> None:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt and are remembered (a library that
    swallows it must not turn it into a traceback); a signal the parent ignores stays ignored
    (nohup, a background job); imports of torch and numpy hold it until they are done."""
    for signum in INTERRUPTS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _on_interrupt)
    sys.unraisablehook = _unraisable
    hold_signals_with(signals_held, settle_interrupt)
    hook_phases(signal_at)
    if not any(isinstance(finder, _DeferredImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _DeferredImports())
    phase = os.environ.get(SELF_SIGNAL, "")
    if phase.startswith("import:"):
        sys.meta_path.insert(0, _SignalAtImport(phase.split(":")[1]))
    signal_at("start")


def was_interrupted() -> bool:
    """Whether Ctrl-C (or SIGTERM, SIGHUP) has arrived since catch_interrupts()."""
    return _interrupted


def interruption() -> tuple[str, int]:
    """The line and the exit code for the signal that arrived first."""
    return INTERRUPTS.get(_signal, INTERRUPTS[signal.SIGINT])


def leave(code: int, busy: bool) -> None:
    """End with code; busy: a worker thread still runs (browse's layer pass after q or Ctrl-C),
    which the interpreter's shutdown would meet half-way, so exit now, after a signal's one line
    (such a thread writes nothing: saving happens on the app's own thread)."""
    if busy:
        if was_interrupted():  # a hang-up or SIGTERM that ended the app: its one line
            message, code = interruption()
            sys.stderr.write(f"attncli: error: {message}\n")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if code:
        import typer

        raise typer.Exit(code)


@contextmanager
def signals_held() -> Iterator[None]:
    """Inside: a signal is only remembered; it raises KeyboardInterrupt once the block ends."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring:
        raise_if_interrupted()


def settle_interrupt() -> None:
    """A Ctrl-C that the computation took as "stop here" (generate keeps the answer written so
    far) is spent, so the rest of the run (its views, --save) goes on and a later Ctrl-C
    interrupts it again; SIGTERM and SIGHUP still end the run with their code."""
    global _interrupted
    if _interrupted and _signal == signal.SIGINT:
        _interrupted = False
    raise_if_interrupted()


def raise_if_interrupted() -> None:
    """A safe point inside signals_held: raise the KeyboardInterrupt of a signal held so far."""
    if _interrupted:
        raise KeyboardInterrupt


def signal_at(phase: str) -> None:
    """Test hook: send this process the signal that ATTNCLI_SELF_SIGNAL names for phase."""
    wanted, _, name = os.environ.get(SELF_SIGNAL, "").rpartition(":")
    if wanted == phase and name in ("INT", "TERM", "HUP"):
        os.kill(os.getpid(), getattr(signal, f"SIG{name}"))


class _HeldLoader:
    """A module's own loader, run with signals held."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def exec_module(self, module: ModuleType) -> None:
        from attncli.activity import step
        from attncli.machine import check_loadable

        check_loadable(module.__name__)  # under a tight ulimit -v: one line, not a C crash
        with signals_held(), step(f"importing {module.__name__}"):
            try:
                self._loader.exec_module(module)
            finally:
                module.__loader__ = self._loader  # torch reads its loader back, as its own
                if module.__spec__ is not None:
                    module.__spec__.loader = self._loader


class _DeferredImports:
    """Finds torch and numpy as usual, and loads them with signals held."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        if fullname not in DEFERRED_IMPORTS or _deferring:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, _SignalAtImport):
                continue
            spec = getattr(finder, "find_spec", lambda *_: None)(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HeldLoader(spec.loader)
                return spec
        return None


class _SignalAtImport:
    """Test hook: the signal of ATTNCLI_SELF_SIGNAL=import:NAME:SIG when NAME starts to load."""

    def __init__(self, name: str) -> None:
        self._name = name

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> None:
        if fullname == self._name:
            signal_at(f"import:{fullname}")
        return None


def after_imports() -> None:
    """Turn the cycle collector back on (main turned it off), with everything the imports made
    moved out of its reach: those objects live until exit, and walking them costs time."""
    signal_at("input")
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
