"""Where output goes: stdout (JSON as plain UTF-8, renders through Rich), --save and --save-json
files, and pages shown one at a time. rich is imported lazily, so --help stays fast."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from attncli.activity import doing, hush
from attncli.cli.streams import clamp_width
from attncli.errors import AttnCliError, escaped

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

Page = Callable[["Console"], "RenderableType"]


class Dumpable(Protocol):
    """A result record: its JSON is to_dict()."""

    def to_dict(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Dumpable)  # a result delivered with its renderer's arguments, P
P = ParamSpec("P")


def console() -> Console:
    """The stdout console: colour only on a terminal, NO_COLOR respected (by Rich)."""
    from rich.console import Console

    class Stdout(Console):
        def on_broken_pipe(self) -> None:
            # Rich would exit 1 here; a closed pipe (`| head`) is not an error for us,
            # and execute() ends quietly on BrokenPipeError.
            raise BrokenPipeError

    out = Stdout(highlight=False)
    out.width = clamp_width(out.width)  # COLUMNS=0 would print nothing, 10⁸ never finish
    return out


def emit_json(doc: Any, chunk_bytes: int = 2**20) -> None:
    """Write doc to stdout as strict JSON, a megabyte at a time, never as one whole string."""
    from attncli.render.jsonout import json_pieces

    hush()
    sys.stdout.flush()
    batch: list[bytes] = []
    size = 0
    try:
        for chunk in json_pieces(doc):
            batch.append(chunk)
            size += len(chunk)
            if size >= chunk_bytes:
                sys.stdout.buffer.write(b"".join(batch))
                batch, size = [], 0
        sys.stdout.buffer.write(b"".join(batch))
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        # Click turns an EPIPE error into exit 1; without an errno it reaches execute(), which
        # ends quietly, as for the stdout console.
        raise BrokenPipeError from None


def emit_text(text: str) -> None:
    """Write text to stdout: on a terminal with its control characters written out (ESC, BEL,
    NUL, C1, direction overrides; its lines and tabs kept), so a file's text cannot steer the
    terminal; through a pipe or into a file, exactly as it is."""
    hush()
    try:
        shown = escaped(text, lines=True) if sys.stdout.isatty() else text
    except (OSError, ValueError):  # a closed stdout: written as it is, and failing there
        shown = text
    sys.stdout.write(shown)
    sys.stdout.flush()


def emit_streamed(write: Callable[[Console], None]) -> None:
    """Let write print to the stdout console as it goes (a listing printed in chunks)."""
    hush()
    try:
        write(console())
    except BrokenPipeError:
        raise BrokenPipeError from None  # as in emit_json: execute() ends quietly


def emit(out: Console, renderable: RenderableType) -> None:
    """Print a renderable to stdout part by part, a long listing in chunks as it is formatted."""
    from attncli.render.draw.streamed import print_streamed

    hush()
    try:
        print_streamed(out, renderable)
    except BrokenPipeError:
        raise BrokenPipeError from None  # as in emit_json: execute() ends quietly


def check_outputs(save: Path | None, save_json: Path | None, open_page: bool = False) -> None:
    """Reject a bad --save extension or an unwritable path, or --open without --save, before
    any work."""
    if open_page and save is None:
        raise AttnCliError("--open opens the file --save writes: add --save NAME.html (the "
                           "interactive page), .svg or .txt")
    if save is not None or save_json is not None:
        from attncli.cli.export import check_save

        check_save(save, save_json)


def is_page(save: Path | None) -> bool:
    """Whether --save names the interactive page (.html or .htm, not .term.html)."""
    name = "" if save is None else save.name.lower()
    return name.endswith((".html", ".htm")) and not name.endswith(".term.html")


def deliver(doc: dict[str, Any], build: Page, as_json: bool, save: Path | None,
            save_json: Path | None, extra: dict[str, Any] | None = None,
            open_page: bool = False) -> None:
    """Write --save-json and --save, then print the JSON or the rendered view.

    --save x.html writes the interactive page of doc (extra: what only the page draws), which
    open_page opens in the browser.
    """
    from attncli.cli.export import write_atomic

    out = console()
    if save_json is not None:
        from attncli.render.jsonout import json_pieces

        doing(f"writing {save_json}")
        write_atomic(save_json, (piece.decode() for piece in json_pieces(doc)), "--save-json")
    if save is not None:
        doing(f"writing {save}")
    if save is not None and is_page(save):
        from attncli.render.page import render_page

        write_atomic(save, render_page(doc, f"attncli · {save.stem}", extra), "--save")
    elif save is not None:
        save_render([build], save, out.width)
    if as_json:
        emit_json(doc)
    else:
        emit(out, build(out))
    if open_page and save is not None:
        open_in_browser(save)


def open_in_browser(path: Path) -> None:
    """Open a written file in the browser (webbrowser: $BROWSER, else the system's own); one
    line on stderr where none opens it (the file is written all the same)."""
    import webbrowser

    hush()
    try:
        opened = webbrowser.open(path.resolve().as_uri())
    except (webbrowser.Error, OSError):
        opened = False
    if not opened:
        from attncli.errors import escaped

        sys.stderr.write(f"attncli: no web browser opened {escaped(str(path))}; open it "
                         "yourself, or set BROWSER\n")


def save_render(pages: list[Page], save: Path, width: int) -> None:
    """Render pages on a truecolor recording console and write them to save."""
    from attncli.cli.export import export, recording_console, write_atomic

    recorder = recording_console(width)
    for page in pages:
        recorder.print(page(recorder))
    write_atomic(save, export(recorder, save), "--save")


def deliver_pages(pages: list[Page], save: Path | None, pause_lang: str | None,
                  open_page: bool = False) -> None:
    """Print pages one by one, waiting for Enter between them when pause_lang is set; the
    --save file written, and opened with open_page."""
    from rich.text import Text

    from attncli.i18n import text

    out = console()
    for k, page in enumerate(pages):
        emit(out, page(out))
        if pause_lang is not None and 0 < k < len(pages) - 1:
            try:
                answer = out.input(Text(text(pause_lang, "demo.pause"), style="dim") + " ")
            except EOFError:
                pause_lang = None
                continue
            if answer.strip().lower() == "q":
                pages = pages[:k + 1]
                break
    if save is not None:
        save_render(pages, save, out.width)
        if open_page:
            open_in_browser(save)


class Saver:
    """browse's `e`: the screen or the row's page, written whole into folder under a fresh
    name."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, kind: str, shown: str, page: Any) -> str:
        """Write shown (the screen: svg or txt) or page's HTML (html); the path written."""
        from attncli.cli.export import offline_svg, write_atomic

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise AttnCliError(f"--save-dir {self.folder}: {err.strerror or err}") from None
        number = 1
        while (path := self.folder / f"attncli-browse-{number}.{kind}").exists():
            number += 1
        content: str | Iterable[str]
        if kind == "svg":
            content = offline_svg(shown)
        elif kind == "txt":
            content = shown
        else:
            from attncli.render.page import page_extra, render_page

            content = render_page(page.to_dict(), "attncli browse", page_extra(page))
        write_atomic(path, content, "the saved screen")
        return str(path.resolve())
