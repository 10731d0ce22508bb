"""The demo's pages for the lessons: a rule with the title, the narration, the lesson's view."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.rule import Rule
from rich.text import Text

from attncli.render.draw.prose import prose
from attncli.render.lessons.lesson_text import text


def render_chapter(console: Console, key: str, result: Any, number: int, total: int,
                   lang: str) -> RenderableType:
    """One lesson chapter of the tour, in the look of the book's pages."""
    title = Text(f"{number}/{total} · {text(lang, f'demo.{key}.title')}", style="bold")
    narration = text(lang, f"demo.{key}.text", n=f"{result.rows[-1].tokens:,}"
                     if key == "cost" else "")
    return Group(Text(), Rule(title, align="left"), prose(console, narration), Text(),
                 _view(console, key, result, lang))


def _view(console: Console, key: str, result: Any, lang: str) -> RenderableType:
    if key == "order":
        from attncli.render.lessons.permute import render_permute

        return render_permute(console, result, lang)
    if key == "kvcache":
        from attncli.render.lessons.kvcache import render_kvcache

        return render_kvcache(console, result, lang)
    if key == "flash":
        from attncli.render.lessons.flash import render_flash

        return render_flash(console, result, lang)
    from attncli.render.lessons.cost import render_cost

    return render_cost(console, result, lang)
