"""Import a reader's file and find their class: FILE.py:Class, or FILE.py with one class.

This runs the reader's code (that is the point of `check`); what it raises is shown as theirs,
in one line with the line of their file it came from, never as attncli's traceback.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import inspect
import io
import os
import sys
import traceback
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

from attncli.core.tokens import visible
from attncli.errors import AttnCliError


def said(value: object, limit: int = 200, as_repr: bool = False) -> str:
    """str() (or repr()) of a value of the reader's in one escaped line: a __str__ that raises,
    a control byte or a megabyte of text cannot break the line it goes in."""
    try:
        text = repr(value) if as_repr else str(value)
        text = text if isinstance(text, str) else ""
    except Exception:  # their __str__ may raise anything
        return f"<{type(value).__name__} that cannot be printed>"
    lines = text.strip().splitlines()
    first = visible(lines[0] if lines else "")
    return first if len(first) <= limit else first[:limit - 3] + "..."


def shown_path(path: str, limit: int = 120) -> str:
    """A file name as an error line shows it: escaped, and shortened in the middle."""
    text = visible(path)
    return text if len(text) <= limit else text[:limit // 2 - 2] + "..." + text[-(limit // 2 - 1):]


def theirs(err: BaseException, file: str | None = None) -> str:
    """An exception of the reader's code in one line: type, message, where in their file."""
    message = said(err)
    where = ""
    try:
        frames = traceback.extract_tb(err.__traceback__)
    except Exception:  # a frame of theirs whose source cannot be read
        frames = traceback.StackSummary()
    own = [f for f in frames if "/attncli/" not in f.filename.replace("\\", "/")
           and "/torch/" not in f.filename.replace("\\", "/")]
    if isinstance(err, SyntaxError) and err.lineno is not None:
        where = f" ({visible(Path(err.filename or file or '?').name)}, line {err.lineno})"
        message = said(err.msg)
    elif own:
        where = f" ({visible(Path(own[-1].filename).name)}, line {own[-1].lineno})"
    return visible(type(err).__name__) + (f": {message}" if message else "") + where


@contextlib.contextmanager
def yours() -> Iterator[None]:
    """The reader's settings around their code, while a check runs (defaults.yours)."""
    if "attncli.checker.defaults" not in sys.modules:  # no check runs: nothing to switch
        yield
        return
    from attncli.checker.defaults import yours as switched

    with switched():
        yield


def class_name(cls: type, qualified: bool = False) -> str:
    """A class's name, escaped, read past its metaclass (whose __getattribute__ may raise)."""
    try:
        name = type.__dict__["__qualname__" if qualified else "__name__"].__get__(cls)
    except Exception:  # not a type after all
        return "<class>"
    return visible(name if isinstance(name, str) else "<class>")


def split_target(target: str) -> tuple[str, str | None]:
    """FILE.py:Class → (FILE.py, Class); a bare FILE.py → (FILE.py, None). C:\\ is a path."""
    if not target.strip():
        raise AttnCliError("give your class as FILE.py:Class (or FILE.py with one class)")
    if target == "-":
        raise AttnCliError("check imports a file, and standard input cannot be imported: save "
                           "your class as FILE.py")
    path, sep, name = target.rpartition(":")
    if sep and path and not (len(path) == 1 and path.isalpha()):
        if name.isidentifier():
            return path, name
        if _is(Path(path), Path.is_file):
            raise AttnCliError(f"{said(name, as_repr=True)} is not a class name: give "
                               "FILE.py:Class" if name else
                               f"give the class after the colon: {shown_path(path)}:Class")
    return target, None


def _is(file: Path, test: Callable[[Path], bool]) -> bool:
    """A test of the file system that is False, not OSError, for a name too long or refused."""
    try:
        return test(file)
    except (OSError, ValueError):  # ENAMETOOLONG, EACCES, a NUL byte
        return False


def import_file(path: str) -> ModuleType:
    """The reader's file as a module (its folder first on sys.path, as python runs it)."""
    file, shown = Path(path), shown_path(path)
    if "\0" in path or not _is(file, Path.exists):
        raise AttnCliError(f"no such file: {shown}")
    if _is(file, Path.is_dir):
        raise AttnCliError(f"{shown} is a directory, not a Python file")
    if not _is(file, Path.is_file):  # a FIFO would block, a device never end
        raise AttnCliError(f"{shown} is not a regular file")
    name = f"attncli_yours_{zlib.crc32(str(file.resolve()).encode()):08x}"
    loader = importlib.machinery.SourceFileLoader(name, os.fspath(file))
    spec = importlib.util.spec_from_loader(name, loader)
    if spec is None:
        raise AttnCliError(f"cannot load {shown} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up
    folder = os.fspath(file.resolve().parent)
    sys.path.insert(0, folder)
    try:
        with yours():  # their file's torch.set_default_dtype(...) is theirs, not attncli's
            loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except SystemExit as err:
        raise AttnCliError(f"{shown} exited while it was imported (SystemExit "
                           f"{said(err.code, as_repr=True)}): keep module-level code under "
                           "`if __name__ == \"__main__\":`") from None
    except BaseException as err:
        raise AttnCliError(f"{shown} does not import: {theirs(err, path)}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def find_class(module: ModuleType, path: str, name: str | None) -> type:
    """The named class of module, or its one class that subclasses torch.nn.Module."""
    try:
        return _find_class(module, shown_path(path), name)
    except (AttnCliError, KeyboardInterrupt):
        raise
    except BaseException as err:  # a metaclass of theirs that raises when it is looked at
        raise AttnCliError(f"{shown_path(path)}: looking at its classes raised "
                           f"{theirs(err)}") from None


def _find_class(module: ModuleType, shown: str, name: str | None) -> type:
    from torch import nn

    own = [v for v in vars(module).values()
           if inspect.isclass(v) and v.__module__ == module.__name__]
    if name is not None:
        found = getattr(module, name, None)
        if found is None:
            listed = ", ".join(class_name(c) for c in own) or "none"
            raise AttnCliError(f"{shown} has no class {name!r} (its classes: {listed})")
        if not inspect.isclass(found):
            raise AttnCliError(f"{shown}:{name} is a {visible(type(found).__name__)}, "
                               "not a class")
        return found
    modules = [c for c in own if issubclass(c, nn.Module)]
    if len(modules) == 1:
        return modules[0]
    listed = ", ".join(class_name(c) for c in modules) or "none"
    raise AttnCliError(f"{shown} holds {len(modules)} nn.Module classes ({listed}): name one "
                       f"as {shown}:Class")


def load_target(target: str) -> tuple[type, str]:
    """The reader's class for FILE.py[:Class], and how the report names it (escaped)."""
    path, name = split_target(target)
    module = import_file(path)
    cls = find_class(module, path, name)
    return cls, f"{shown_path(path)}:{class_name(cls)}"


class _Stderr(io.TextIOBase):
    """Their sys.stdout: writes reach stderr, and close() leaves stderr open."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    @property
    def buffer(self) -> BinaryIO:
        return sys.stderr.buffer

    def close(self) -> None:
        self.flush()


def _exit_refused(code: int) -> None:
    raise SystemExit(code)  # an os._exit of theirs, turned into the exit `check` reports


@contextlib.contextmanager
def guarded(descriptors: bool) -> Iterator[None]:
    """While the reader's code runs, attncli computes with torch's defaults (defaults.py), a
    fork of theirs ends in the child, and os._exit is an exception. With descriptors (the CLI), what
    it prints goes to stderr, file descriptor 1 included, so os.write(1, ...) and
    sys.__stdout__ cannot reach the report; closing their sys.stdout closes nothing."""
    from attncli.checker.defaults import fenced

    with fenced():
        with _printing(descriptors):
            yield


@contextlib.contextmanager
def _printing(descriptors: bool) -> Iterator[None]:
    real_exit = os._exit
    if not descriptors:  # a notebook: their prints stay where the notebook shows them
        os._exit = _exit_refused  # type: ignore[assignment]
        try:
            yield
        finally:
            os._exit = real_exit
        return
    sys.stdout.flush()
    saved = os.dup(1)
    target = _Stderr()
    stderr = sys.stderr  # theirs to replace while their code runs (to silence it), not after
    os._exit = _exit_refused  # type: ignore[assignment]
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(target):
            yield
    finally:
        os._exit = real_exit
        sys.stderr = stderr
        for stream in (target, sys.__stdout__):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()  # type: ignore[union-attr]
        os.dup2(saved, 1)
        os.close(saved)
