"""Two sets of globals while `check` runs: the reader's code runs with the settings their file
made (torch.set_default_dtype(torch.float64), a recursion limit, a monkeypatched torch.softmax),
attncli's reference and report with torch's defaults; the report says what their file changed.

A fork() in the reader's code is caught in the child as it returns from fork, by a hook
os.register_at_fork installs once: while a check runs, the child exits at once (os._exit(0), no
flush), so it never runs attncli's checker or prints attncli's lines. A pid test after their code
returns would miss a fork in a __del__ or a generator's finally that runs inside attncli's own
code, and would let the child run on through the rest of their code first; yours() keeps that
test as well, for a fork whose at-fork hooks were skipped. The cost: their child does not run
either, which is no loss for a class whose forward is being checked.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

import torch
import torch.nn.functional as F

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # attncli's: see cli/streams.py
_REAL_EXIT = os._exit  # captured before guarded() turns their os._exit into an exception
# The names attncli's reference computes with, where a reader's file may replace one.
SPACES: dict[str, object] = {"torch": torch, "torch.nn.functional": F,
                             "torch.Tensor": torch.Tensor}


@dataclass(frozen=True)
class Globals:
    """The settings torch and Python compute with, and the functions the reference calls."""

    dtype: torch.dtype
    device: torch.device
    recursion: int
    names: dict[str, dict[str, object]]  # space → name → value


def _watched(space: str, name: str, value: object) -> bool:
    if isinstance(value, ModuleType | type):  # submodules torch imports lazily, torch.Storage
        return False  # that set_default_dtype swaps: not patches of theirs
    if name == "__slotnames__":  # copyreg's cache, set on a class at its first copy or pickle
        return False  # (a deepcopy of a module's tensors, theirs or attncli's): not a patch
    return space == "torch.Tensor" or (not name.startswith("_") and callable(value))


_MISSING = object()  # a name their code deleted
_KEYS = {space: {n for n, v in vars(obj).items() if _watched(space, n, v)}
         for space, obj in SPACES.items()}  # the names attncli computes with


def _capture() -> Globals:
    names = {}
    for space, obj in SPACES.items():
        now = vars(obj)
        names[space] = {n: now.get(n, _MISSING) for n in _KEYS[space]} | {
            n: v for n, v in now.items() if n not in _KEYS[space] and _watched(space, n, v)}
    return Globals(torch.get_default_dtype(), torch.get_default_device(),
                   sys.getrecursionlimit(), names)


def _apply(g: Globals) -> None:
    torch.set_default_dtype(g.dtype)
    torch.set_default_device(None if g.device == torch.device("cpu") else g.device)
    with contextlib.suppress(RecursionError, ValueError):  # a limit below today's depth
        sys.setrecursionlimit(g.recursion)
    for space, obj in SPACES.items():
        now = vars(obj)
        for name, value in g.names[space].items():
            with contextlib.suppress(AttributeError, TypeError):
                if value is _MISSING and name in now:
                    delattr(obj, name)
                elif value is not _MISSING and now.get(name, _MISSING) is not value:
                    setattr(obj, name, value)
        if space == "torch.Tensor":  # a method they added shadows torch's own: take it away
            for name in [n for n, v in now.items() if n not in g.names[space]
                         and _watched(space, n, v)]:
                with contextlib.suppress(AttributeError, TypeError):
                    delattr(obj, name)


_book = _capture()
BOOK = Globals(torch.float32, torch.device("cpu"), max(_book.recursion, 1000), _book.names)
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _torch_own(value: object, book: object) -> bool:
    """Whether a name's new value is torch's own wrapper of the book's (the first import of
    torch._dynamo, by anything, wraps torch.manual_seed in torch/_compile.py): not theirs."""
    seen = 0
    while value is not book and seen < 8:  # a __wrapped__ chain, bounded
        code = getattr(value, "__code__", None)
        if code is None or not os.path.abspath(code.co_filename).startswith(_TORCH_DIR):
            return False
        value, seen = getattr(value, "__wrapped__", None), seen + 1
        if value is None:
            return False
    return value is book


def _rebase(entry: Globals) -> None:
    """Take torch's own later wrappers (made since attncli started) as the book's names, and
    the function beneath again where one was taken away."""
    for space, names in entry.names.items():
        book = BOOK.names[space]
        for name, value in names.items():
            old = book.get(name, _MISSING)
            if old is not value and old is not _MISSING and (_torch_own(value, old) or
                                                               _torch_own(old, value)):
                book[name] = value


@dataclass
class _Fence:
    entry: Globals
    yours: Globals
    pid: int


_fence: list[_Fence] = []  # the check running now, if any


_guards: list[bool] = []  # fork_guard()s open now


def _child_after_fork() -> None:
    if _fence or _guards:
        _REAL_EXIT(0)  # a fork of theirs: the child leaves before attncli runs another line


@contextlib.contextmanager
def fork_guard() -> Iterator[None]:
    """A fork while attncli prints a check's report (a __del__ of theirs) ends in the child too;
    fenced() guards the check itself."""
    _guards.append(True)
    try:
        yield
    finally:
        _guards.pop()


os.register_at_fork(after_in_child=_child_after_fork)


@contextlib.contextmanager
def fenced() -> Iterator[None]:
    """For one check: attncli computes with BOOK's settings; as it was afterwards."""
    entry = _capture()
    _rebase(entry)
    _fence.append(_Fence(entry, entry, os.getpid()))
    _apply(BOOK)
    try:
        yield
    finally:
        _fence.pop()
        _apply(entry)


@contextlib.contextmanager
def yours() -> Iterator[None]:
    """Run the reader's code with the settings their file made (and keep what it makes); the
    signal handlers it sets are theirs only while it runs."""
    handlers = {signum: signal.getsignal(signum) for signum in SIGNALS}
    try:
        with _settings():
            yield
    finally:
        for signum, handler in handlers.items():
            if handler is not None and signal.getsignal(signum) is not handler:
                with contextlib.suppress(ValueError, TypeError):  # not the main thread
                    signal.signal(signum, handler)  # a Ctrl-C is attncli's again


@contextlib.contextmanager
def _settings() -> Iterator[None]:
    """The reader's settings (torch's defaults, ...) while their code runs, the book's after."""
    if not _fence:
        yield
        return
    fence = _fence[-1]
    if not _same(fence.yours, BOOK):
        _apply(fence.yours)
    try:
        yield
    finally:
        if os.getpid() != fence.pid:  # their child, should at-fork hooks not have run
            _REAL_EXIT(0)
        fence.yours = _capture()
        if not _same(fence.yours, BOOK):
            _apply(BOOK)


def _same(a: Globals, b: Globals) -> bool:
    """Whether two sets of globals are the same objects (most readers' files change none)."""
    if (a.dtype, a.device, a.recursion) != (b.dtype, b.device, b.recursion):
        return False
    return all(len(a.names[s]) == len(b.names[s]) and
               all(v is b.names[s].get(n, _MISSING) for n, v in a.names[s].items())
               for s in SPACES)


def changed() -> list[str]:
    """What the reader's settings change from the ones attncli's reference computes with."""
    if not _fence:
        return []
    theirs = _fence[-1].yours
    out = []
    if theirs.dtype != BOOK.dtype:
        out.append(f"torch.set_default_dtype({theirs.dtype})")
    if theirs.device != BOOK.device:
        out.append(f"torch.set_default_device({str(theirs.device)!r})")
    if theirs.recursion < BOOK.recursion:
        out.append(f"sys.setrecursionlimit({theirs.recursion})")
    for space, names in theirs.names.items():
        book = BOOK.names[space]
        out += [f"{'deleted' if v is _MISSING else 'replaced'} {space}.{n}"
                for n, v in names.items() if book.get(n, _MISSING) is not v]
    return out
