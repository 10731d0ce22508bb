"""`attncli browse`."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from attncli.cli.app import app
from attncli.cli.options import (
    BiasOpt,
    ContextOpt,
    DOutOpt,
    DropoutOpt,
    EmbDimOpt,
    EncodingOpt,
    FileOpt,
    HeadsOpt,
    Impl,
    ImplOpt,
    InputsOpt,
    LayerOpt,
    ModelOpt,
    PositionsOpt,
    SeedOpt,
    SpecialOpt,
    TextArg,
    TopKOpt,
    VariantOpt,
)
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


@app.command()
def browse(
    text: TextArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    model: ModelOpt = None,
    layer: LayerOpt = None,
    variant: VariantOpt = None,
    encoding: EncodingOpt = "gpt2",
    allow_special: SpecialOpt = False,
    seed: SeedOpt = 123,
    emb_dim: EmbDimOpt = 8,
    positions: PositionsOpt = True,
    context_length: ContextOpt = None,
    d_out: DOutOpt = None,
    heads: HeadsOpt = None,
    dropout: DropoutOpt = 0.0,
    qkv_bias: BiasOpt = False,
    impl: ImplOpt = Impl.auto,
    top_k: TopKOpt = None,
    save_dir: Annotated[Path, typer.Option(
        help="Where `e` saves what is on screen (SVG, text or the HTML page).",
        file_okay=False)] = Path("."),
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
    from attncli.cli.requests import read_source
    from attncli.core.compare import Shared
    from attncli.core.request import Request
    from attncli.core.variants import Variant

    source_text, source_inputs = read_source(text, file, inputs)
    request = Request(
        text=source_text, inputs=source_inputs, variant=variant, encoding=encoding,
        allow_special=allow_special, seed=seed, emb_dim=emb_dim, context_length=context_length,
        d_out=d_out, heads=heads if variant is not None or model is not None else None,
        dropout=dropout, qkv_bias=qkv_bias, model=model, layer=layer,
        impl=impl, top_k=top_k, positions=positions)
    if model is not None:
        from attncli.browse.source import model_source

        source = model_source(request)
    else:
        from attncli.browse.source import chapter3_source

        chosen = [variant] if variant is not None else list(Variant)
        source = chapter3_source(request, chosen, Shared(d_out=d_out, heads=heads,
                                                         dropout=dropout))
    from attncli.browse.app import BrowseApp

    browser = BrowseApp(source, save=Saver(save_dir), terminal=True)
    threading.excepthook = _quiet_lost_terminal
    browser.run()
    _leave(browser.return_code or 0)


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
