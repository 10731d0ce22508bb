"""`attncli demo`."""

from __future__ import annotations

import os
import sys
from functools import partial
from typing import Annotated

import typer

from attncli.cli.app import app
from attncli.cli.options import (
    LangOpt,
    PrecisionOpt,
    SaveOpt,
    View,
    ViewOpt,
)
from attncli.cli.output import Page, check_outputs, deliver_pages


@app.command()
def demo(
    lang: LangOpt = None,
    no_pause: Annotated[bool, typer.Option(
        "--no-pause", help="Do not wait for Enter between steps (it never waits when stdin or "
        "stdout is not a terminal).")] = False,
    view: ViewOpt = View.auto,
    precision: PrecisionOpt = 4,
    save: SaveOpt = None,
) -> None:
    """A guided tour of the book's chapter-3 example, "Your journey starts with one step".

    Simple attention for one query, then all six, then qkv, causal (with dropout) and
    multihead, with the book's settings so the numbers match the book.

    Examples:

      attncli demo

      attncli demo --lang zh --no-pause | less -R

      attncli demo --save demo.html
    """
    from attncli.core.display import Display
    from attncli.i18n import resolve_lang
    from attncli.lessons.tour import tour
    from attncli.render.demo import render_outro, render_page, render_title

    check_outputs(save, None)
    options = Display(precision=precision, view=view,
                      lang=resolve_lang(lang and lang.value, os.environ))
    steps = tour()
    pages: list[Page] = [lambda out: render_title(options.lang)]
    pages += [partial(render_page, step=step, number=k, total=len(steps), options=options)
              for k, step in enumerate(steps, start=1)]
    pages.append(lambda out: render_outro(options.lang))
    paced = not no_pause and sys.stdin.isatty() and sys.stdout.isatty()
    deliver_pages(pages, save, options.lang if paced else None)
