"""`attncli demo`."""

from __future__ import annotations

import sys
from functools import partial
from typing import TYPE_CHECKING, Annotated

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.options import Look, Output
from attncli.cli.output import Page, deliver_pages
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType


@command()
def demo(
    look: Annotated[Look, Fields("precision", "draw", "lang")],
    output: Annotated[Output, Fields("save", "open_page")],
    no_pause: Annotated[bool, typer.Option(
        "--no-pause", help="Do not wait for Enter between steps (it never waits when stdin or "
        "stdout is not a terminal).")] = False,
    chapter: Annotated[str | None, typer.Option(
        help="Show only this chapter: intro, query, all, qkv, causal, dropout, multihead, "
        "order, kvcache, flash or cost.", show_default=False, metavar="NAME")] = None,
) -> None:
    """A guided tour of the book's chapter-3 example, "Your journey starts with one step".

    Simple attention for one query, then all six, then qkv, causal (with dropout) and
    multihead, with the book's settings so the numbers match the book. Then why attention
    matters: word order (猫吃鱼/鱼吃猫), the KV cache, flash attention and the O(n²) cost.

    Examples:

      attncli demo

      attncli demo --lang zh --no-pause | less -R

      attncli demo --save demo.html

      attncli demo --chapter kvcache --lang zh
    """
    from attncli.core.display import Display
    from attncli.lessons.chapters import CHAPTERS
    from attncli.lessons.tour import tour
    from attncli.render.demo import render_outro, render_page, render_title

    output.check()
    options = Display(precision=look.precision, view=look.draw, lang=look.language())
    steps = tour()
    total = len(steps) + len(CHAPTERS)
    book: list[Page] = [partial(render_page, step=step, number=k, total=total, options=options)
                        for k, step in enumerate(steps, start=1)]
    lessons: list[Page] = [
        partial(_chapter_page, key=key, number=k, total=total, lang=options.lang)
        for k, key in enumerate(CHAPTERS, start=len(steps) + 1)]
    names = [step.key for step in steps] + list(CHAPTERS)
    chosen = [*book, *lessons]
    if chapter is not None:
        if chapter not in names:
            raise AttnCliError(f"unknown chapter {chapter!r} (choose from {', '.join(names)})")
        chosen = [chosen[names.index(chapter)]]
    pages: list[Page] = [lambda out: render_title(options.lang), *chosen]
    pages.append(lambda out: render_outro(options.lang))
    paced = not no_pause and sys.stdin.isatty() and sys.stdout.isatty()
    deliver_pages(pages, output.save, options.lang if paced else None, output.open_page)


def _chapter_page(out: Console, key: str, number: int, total: int,
                  lang: str) -> RenderableType:
    """One of the lesson chapters, computed only when its page is shown."""
    from attncli.lessons.chapters import chapter
    from attncli.render.lessons.chapters import render_chapter

    return render_chapter(out, key, chapter(key), number, total, lang)
