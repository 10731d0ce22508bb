"""`attncli compare`: the weights of several variants side by side, on one colour scale."""

from __future__ import annotations

from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import Result
from attncli.render.draw.colors import legend, shade_legend
from attncli.render.draw.palette import depth_of
from attncli.render.draw.scales import weight_top
from attncli.render.draw.views import render_view, uses_heatmap, window
from attncli.render.stages import shown_weights, token_axis


def _header(results: list[Result]) -> Text:
    c = results[0].config
    names = ", ".join(r.variant for r in results)
    return Text.assemble(("Attention weights", "bold"), " (row = query, column = key)\n",
                         f"{names} on the same {c.num_tokens} tokens and embeddings "
                         f"(seed {c.seed})")


def _legend(console: Console, cells: list[list[list[float | None]]], vmax: float,
            heatmap: bool, options: Display) -> Text:
    masked = any(v is None for matrix in cells for row in matrix for v in row)
    depth = depth_of(console)
    if depth is not None or not heatmap:
        return legend(0.0, vmax, options.precision, ramp=depth is not None, masked=masked,
                      depth=depth or "truecolor", scale=options.scale)
    return shade_legend(0.0, vmax, options.precision, masked=masked, scale=options.scale)


def render_compare(console: Console, results: list[Result],
                   options: Display) -> RenderableType:
    """One weights panel per variant and head, side by side where they fit, one legend."""
    axis = token_axis(results[0])
    named = [(r.traits.title
              + (f" · head {h}" if r.num_heads > 1 else ""), shown_weights(r, r.weights[h]))
             for r in results for h in range(r.num_heads)]
    shown = [window(axis, axis, cells, options, True) for _, cells in named]
    # One colour scale for every panel (--scale shared), so equal weights look equal.
    top = weight_top([m for _, _, m in shown], options.scale)
    panels = [render_view(console, title, axis, axis, cells, options, vmin=0.0, vmax=top,
                          show_legend=top is None) for title, cells in named]
    heatmap = any(uses_heatmap(console, *part, options) for part in shown)
    parts: list[RenderableType] = [_header(results), Text(), Columns(panels, padding=(1, 4))]
    if top is not None:
        parts.append(_legend(console, [m for _, _, m in shown], top, heatmap, options))
    return Group(*parts)
