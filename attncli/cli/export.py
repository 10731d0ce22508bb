"""--save and --save-json: the rendered output as SVG, HTML or text, and JSON, written whole."""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console

from attncli.cli.streams import raise_if_interrupted, signal_at, signals_held
from attncli.errors import WRITE_ERRNOS, AttnCliError

# Names of the process's own streams: written through the open stream, not opened again.
STANDARD_STREAMS = {"/dev/stdout": "stdout", "/dev/fd/1": "stdout", "/proc/self/fd/1": "stdout",
                    "/dev/stderr": "stderr", "/dev/fd/2": "stderr", "/proc/self/fd/2": "stderr"}
SAVE_FORMATS = {".svg": "svg", ".html": "page", ".htm": "page", ".term.html": "html",
                ".txt": "text"}
# A system monospace stack: a saved picture fetches no font and looks the same offline.
MONOSPACE = ("ui-monospace, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', "
             "'Noto Sans Mono', monospace")


def save_format(path: Path) -> str:
    """svg, page (the interactive page), html (.term.html: the terminal's look) or text."""
    name = path.name.lower()
    kind = "html" if name.endswith(".term.html") else SAVE_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise AttnCliError(f"--save {str(path)!r}: unknown extension {path.suffix or '(none)'!r} "
                           f"(use {', '.join(SAVE_FORMATS)})")
    return kind


SYSTEM_DIRS = ("/dev", "/proc", "/sys")  # the kernel's: attncli writes into files there, never
# creates one, and never renames over one


def system_dir(path: Path) -> str | None:
    """/dev, /proc or /sys when path lies under it, as written or once its links are followed."""
    names = (os.path.abspath(path), os.path.realpath(path))
    return next((top for name in names for top in SYSTEM_DIRS if name.startswith(top + "/")),
                None)


def check_writable(path: Path, option: str) -> None:
    """Reject a path that cannot be written, before any work is done."""
    try:
        node = os.stat(path)
    except FileNotFoundError:
        node = None
    except OSError as err:  # a name too long, a loop of links, a component that is a file
        raise AttnCliError(f"{option} {str(path)!r}: {err.strerror}") from None
    if node is not None and stat.S_ISDIR(node.st_mode):
        raise AttnCliError(f"{option} {str(path)!r} is a directory, not a file")
    if node is None and system_dir(path):
        raise AttnCliError(f"{option} {str(path)!r} does not exist, and attncli creates no "
                           f"file under {system_dir(path)}")
    if node is not None and (not stat.S_ISREG(node.st_mode) or system_dir(path)):
        if not os.access(path, os.W_OK):  # a device or FIFO is written into, as `>` would
            raise AttnCliError(f"{option} {str(path)!r} is not writable")
        return
    parent = Path(os.path.realpath(path)).parent
    if not parent.is_dir():
        shown = path.parent if str(path.parent) else Path(".")
        raise AttnCliError(f"{option} {str(path)!r}: the directory {str(shown)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise AttnCliError(f"{option} {str(path)!r}: the directory {str(parent)!r} "
                           "is not writable")


def check_save(save: Path | None, save_json: Path | None) -> None:
    """Check --save's extension and both paths, and that they are two files, before any work."""
    if save is not None:
        save_format(save)
        check_writable(save, "--save")
    if save_json is not None:
        check_writable(save_json, "--save-json")
    if save is not None and save_json is not None and _same_file(save, save_json):
        raise AttnCliError(f"--save {str(save)!r} and --save-json {str(save_json)!r} name the "
                           "same file; give them two paths")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def recording_console(width: int) -> Console:
    """A truecolor console that records what is printed, whatever the terminal is."""
    return Console(file=io.StringIO(), record=True, width=width, force_terminal=True,
                   color_system="truecolor", no_color=False, highlight=False, legacy_windows=False)


def offline_svg(svg: str) -> str:
    """An SVG that Rich exported (or Textual, through Rich), without its web fonts and link: a
    system monospace stack instead, so it fetches nothing. It reads what Rich's public
    export_svg writes: a change there fails test_no_url_in_any_saved_picture (tests/render/
    test_page.py) and browse's save test."""
    svg = re.sub(r"\s*@font-face \{[^{}]*\}", "", svg)
    svg = re.sub(r"\s*<!-- Generated with Rich[^>]*-->", "", svg)
    return svg.replace("font-family: Fira Code, monospace", f"font-family: {MONOSPACE}")


def export(console: Console, path: Path, title: str = "attncli") -> str:
    """What the recording console printed, as SVG, HTML or plain text by path's extension."""
    kind = save_format(path)
    if kind == "svg":
        return offline_svg(console.export_svg(title=title))
    if kind in ("html", "page"):
        return console.export_html()
    return console.export_text()


def write_atomic(path: Path, content: str | Iterable[str], option: str) -> None:
    """Write content (text, or pieces of it) to path: the whole new file or nothing.

    A regular file (or a new one) is written to a temporary file beside it and renamed over it,
    whatever interrupts the write (Ctrl-C, SIGTERM included); a link is followed, so the file it
    points to is replaced. A device, FIFO or file under /dev or /proc is written into directly,
    as a shell's `>` would, and never created. A failed write (a full disk, a closed stdout) is
    a write error, exit 1; a closed pipe on /dev/stdout ends quietly, as on stdout.
    """
    pieces = [content] if isinstance(content, str) else content
    stream = STANDARD_STREAMS.get(str(path))
    try:
        node = os.stat(path)
    except OSError:
        node = None
    try:
        if stream is not None:  # into the open stream itself, after what was printed before
            _write_stream(stream, pieces)
        elif node is not None and not stat.S_ISREG(node.st_mode) or system_dir(path):
            _write_into(path, pieces)
        else:
            _replace(Path(os.path.realpath(path)), pieces, node)
    except BrokenPipeError:
        if stream is None:
            raise _failed(option, path, errno.EPIPE, os.strerror(errno.EPIPE)) from None
        raise  # stdout's reader went away: execute() ends quietly
    except OSError as err:
        if stream is not None and err.errno in WRITE_ERRNOS:
            raise  # a write error on stdout, reported as any other (exit 1)
        raise _failed(option, path, err.errno, err.strerror) from None
    signal_at("saved")


def _failed(option: str, path: Path, code: int | None, reason: str | None) -> AttnCliError:
    """The one line for a file that could not be written: exit 1 for a failed write."""
    if code in WRITE_ERRNOS:
        error = AttnCliError(f"write error: {option} {str(path)!r}: {reason}")
        error.exit_code = 1
        return error
    return AttnCliError(f"cannot write {option} {str(path)!r}: {reason}")


def _write_stream(name: str, pieces: Iterable[str]) -> None:
    stream = getattr(sys, name)
    stream.flush()
    for piece in pieces:
        stream.write(piece)
    stream.flush()


def _write_into(path: Path | str, pieces: Iterable[str]) -> None:
    """Write into an existing device, FIFO or kernel file, as `>` would, creating nothing."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOCTTY)
    with open(fd, "w", encoding="utf-8", errors="replace") as handle:
        handle.writelines(pieces)


def _replace(target: Path, pieces: Iterable[str], node: os.stat_result | None) -> None:
    """Write pieces to a temporary file beside target and rename it over target.

    Signals are held from the temporary file's creation to its rename or removal, and acted on
    between pieces, so no interruption leaves it behind.
    """
    temp = ""
    try:
        with signals_held():
            # A short temporary name: one built from a 250-byte target name would pass 255 bytes.
            fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".attncli-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
                for piece in pieces:
                    handle.write(piece)
                    signal_at("save")
                    raise_if_interrupted()
            _settle(target, temp, node)
    except BaseException:
        with signals_held():
            if temp:
                Path(temp).unlink(missing_ok=True)
        raise


def _settle(target: Path, temp: str, node: os.stat_result | None) -> None:
    """Give temp the target's permissions and rename it over target; a FIFO or device that took
    target's name meanwhile is written into instead, never replaced."""
    try:
        now = os.lstat(target)
    except FileNotFoundError:
        now = None
    if now is not None and not stat.S_ISREG(now.st_mode):
        with open(temp, encoding="utf-8") as written:
            _write_into(target, iter(lambda: written.read(2**20), ""))
        Path(temp).unlink()
        return
    if node is not None:
        os.chmod(temp, stat.S_IMODE(node.st_mode))  # the file keeps its permissions
    else:
        # mkstemp makes the file private; give it the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
    os.replace(temp, target)
