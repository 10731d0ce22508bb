"""--save and --save-json: the rendered output as SVG, HTML or text, and JSON, written whole."""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console

from attncli.errors import AttnCliError

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


def check_writable(path: Path, option: str) -> None:
    """Reject a path that cannot be written, before any work is done."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise AttnCliError(f"{option} {str(path)!r} is a directory, not a file")
    if not parent.is_dir():
        raise AttnCliError(f"{option} {str(path)!r}: the directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise AttnCliError(f"{option} {str(path)!r}: the directory {str(parent)!r} "
                           "is not writable")


def check_save(save: Path | None, save_json: Path | None) -> None:
    """Check --save's extension and both paths, before any work."""
    if save is not None:
        save_format(save)
        check_writable(save, "--save")
    if save_json is not None:
        check_writable(save_json, "--save-json")


def recording_console(width: int) -> Console:
    """A truecolor console that records what is printed, whatever the terminal is."""
    return Console(file=io.StringIO(), record=True, width=width, force_terminal=True,
                   color_system="truecolor", no_color=False, highlight=False, legacy_windows=False)


def offline_svg_format() -> str:
    """Rich's SVG template without its web fonts and link: a system monospace stack instead."""
    from rich._export_format import CONSOLE_SVG_FORMAT

    svg = re.sub(r"\s*@font-face \{\{.*?\}\}", "", CONSOLE_SVG_FORMAT, flags=re.S)
    svg = re.sub(r"\s*<!-- Generated with Rich[^>]*-->", "", svg)
    return svg.replace("font-family: Fira Code, monospace", f"font-family: {MONOSPACE}")


def export(console: Console, path: Path, title: str = "attncli") -> str:
    """What the recording console printed, as SVG, HTML or plain text by path's extension."""
    kind = save_format(path)
    if kind == "svg":
        return console.export_svg(title=title, code_format=offline_svg_format())
    if kind in ("html", "page"):
        return console.export_html()
    return console.export_text()


def write_atomic(path: Path, content: str | Iterable[str], option: str) -> None:
    """Write content (text, or pieces of it) to path through a temporary file and a rename."""
    parent = path.parent if str(path.parent) else Path(".")
    try:
        fd, temp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise AttnCliError(f"cannot write {option} {str(path)!r}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines([content] if isinstance(content, str) else content)
        # mkstemp makes the file private; give it the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
        os.replace(temp, path)
    except OSError as err:
        Path(temp).unlink(missing_ok=True)
        raise AttnCliError(f"cannot write {option} {str(path)!r}: {err.strerror}") from None
