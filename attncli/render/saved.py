"""`attncli show` of bare weights: a header, the weights of each head, and --query's view."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import Result
from attncli.render.query import render_query
from attncli.render.run import render_weights


def render_saved(console: Console, result: Result, options: Display) -> RenderableType:
    """Saved weights without attncli's settings: only what the file says."""
    heads = result.num_heads
    header = Text.assemble(("saved weights", "bold"),
                           f" · {len(result.tokens)} tokens · {heads} head{'s' * (heads != 1)}")
    parts: list[RenderableType] = [header, Text()]
    for table in render_weights(console, result, options):
        parts += [table, Text()]
    if result.query is not None:
        parts += [render_query(console, result, options), Text()]
    return Group(*parts[:-1])
