"""The pages of `attncli demo`: a title, the narration, then the explained stages."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.rule import Rule
from rich.text import Text

from attncli.core.display import Display
from attncli.i18n import text
from attncli.render.draw.prose import prose
from attncli.render.explain import render_step, steps_for
from attncli.render.query import render_query

if TYPE_CHECKING:
    from attncli.records.lessons import Step

TRY_IT = ('attncli explain "Your journey starts with one step" --variant multihead',
          'attncli run "Your journey starts with one step" --query journey',
          'attncli compare "Your journey starts with one step" --draw heatmap')


def render_title(lang: str) -> RenderableType:
    """The tour's first line."""
    return Text(text(lang, "demo.title"), style="bold")


def render_page(console: Console, step: Step, number: int, total: int,
                options: Display) -> RenderableType:
    """One step of the tour: a rule with its title, the narration, then each stage explained."""
    lang = options.lang
    title = Text(f"{number}/{total} · {text(lang, f'demo.{step.key}.title')}", style="bold")
    parts: list[RenderableType] = [Text(), Rule(title, align="left"),
                                   prose(console, text(lang, f"demo.{step.key}.text"))]
    view = replace(options, rows=step.rows)
    for k, (name, names) in enumerate(steps_for(step.stages), start=1):
        parts += [Text(), *render_step(console, step.result, name, names, f"{number}.{k}", view)]
    if step.result.query is not None:
        parts += [Text(), render_query(console, step.result, view)]
    return Group(*parts)


def render_outro(lang: str) -> RenderableType:
    """Where to go next: commands to try on your own text."""
    lines: list[RenderableType] = [Text(), Rule(), Text(text(lang, "demo.outro"), style="bold")]
    lines += [Text(f"  {command}") for command in TRY_IT]
    return Group(*lines)
