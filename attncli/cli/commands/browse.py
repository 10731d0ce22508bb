"""`attncli browse`."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from attncli.cli.generating import Answering
from attncli.cli.groups import Without, command
from attncli.cli.options import Chapter3, Checkpoint, Compute, Encoding, Source, request_of
from attncli.errors import AttnCliError

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


def _leave(code: int) -> None:
    """Exit now: after q or Ctrl-C a layer's pass may still run in a worker thread, which the
    interpreter's shutdown would meet half-way (it writes nothing: saving happens on the app's
    own thread)."""
    from attncli.browse.app import WORKER
    from attncli.cli.streams import interruption, was_interrupted

    if any(t.name == WORKER and t.is_alive() for t in threading.enumerate()):
        if was_interrupted():  # a hang-up or SIGTERM that ended the app: its one line
            message, code = interruption()
            sys.stderr.write(f"attncli: error: {message}\n")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if code:
        raise typer.Exit(code)


@command()
def browse(
    source: Source,
    checkpoint: Annotated[Checkpoint, Without("predict")],
    encoding: Encoding,
    settings: Chapter3,
    compute: Annotated[Compute, Without("device", "pool", "full", "measure")],
    answering: Annotated[Answering, Without("top_k", "seed", "show_template", "stream")],
    save_dir: Annotated[Path, typer.Option(
        help="Where `e` saves what is on screen (SVG, text or the HTML page).",
        file_okay=False)] = Path("."),
    generate: Annotated[bool, typer.Option(
        "--generate", help="TEXT is a prompt: --model answers it (as `attncli generate`), and "
        "browse shows each answer token's attention from its own decode step.")] = False,
    generation: Annotated[str | None, typer.Option(
        help="Browse a saved `attncli generate --json` file instead.", show_default=False,
        metavar="FILE")] = None,
) -> None:
    """Explore every layer × head interactively, full-screen in the terminal: move through the
    heads, open one, pick a query token and see what it attends to.

    Without --model it shows the four chapter-3 variants (or --variant's) on one text, one row
    each. Long inputs take the tiled path: pooled blocks and exact windows on demand. Keys: ? in
    the app. It needs a terminal: piped, use `attncli run`. With --model, layers that `run` or
    `heads` already looked at start from the hidden states they kept (ATTNCLI_NO_CACHE=1: off;
    see `attncli run --help`).

    Examples:

      attncli browse "Your journey starts with one step"

      attncli browse --file samples/induction.txt --model samples/toy-gpt2

      attncli browse --file book.txt --variant multihead --heads 4
    """
    check_terminal()
    if generate or generation is not None:
        shown = _generation(source, checkpoint, encoding, answering, generation)
    else:
        from attncli.browse.source import source_of
        from attncli.core.compare import Shared

        # Every variant at once (no --variant, no --model) takes --heads as multihead's alone.
        every = settings.variant is None and checkpoint.model is None
        request = request_of(source.read(), checkpoint, encoding, settings, compute,
                             **({"heads": None} if every else {}))
        shown = source_of(request, Shared(d_out=settings.d_out, heads=settings.heads,
                                          dropout=settings.dropout))
    from attncli.browse.app import BrowseApp

    browser = BrowseApp(shown, save=Saver(save_dir), terminal=True)
    threading.excepthook = _quiet_lost_terminal
    browser.run()
    _leave(browser.return_code or 0)


def _generation(source: Source, checkpoint: Checkpoint, encoding: Encoding,
                answering: Answering, saved: str | None) -> Any:
    """browse's source for a generation: --model answering TEXT now, or a saved JSON."""
    from attncli.browse.generation import generation_source

    if saved is not None:
        from attncli.core.saved import read_saved
        from attncli.models.generate.saved import generation_from_dict

        data = read_saved(saved)
        if not isinstance(data, dict):
            raise AttnCliError("--generation takes `attncli generate --json` output")
        return generation_source(generation_from_dict(data))
    if not checkpoint.model:
        raise AttnCliError("browse --generate needs --model: the decoder that answers")
    from attncli.models.generate.run import generate_model

    result = generate_model(checkpoint.model, source.read()[0] or "", answering.sampling(),
                            system=answering.system, raw=answering.raw,
                            allow_special=encoding.allow_special)
    return generation_source(result)


class Saver:
    """`e`: the screen or the row's page, written whole into save_dir under a fresh name."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, kind: str, console: Any, page: Any) -> str:
        from attncli.cli.export import offline_svg_format, write_atomic

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise AttnCliError(f"--save-dir {self.folder}: {err.strerror or err}") from None
        number = 1
        while (path := self.folder / f"attncli-browse-{number}.{kind}").exists():
            number += 1
        if kind == "svg":
            content: Any = console.export_svg(title="attncli browse",
                                              code_format=offline_svg_format())
        elif kind == "txt":
            content = console.export_text()
        else:
            from attncli.render.page import page_extra, render_page

            content = render_page(page.to_dict(), "attncli browse", page_extra(page))
        write_atomic(path, content, "the saved screen")
        return str(path.resolve())
