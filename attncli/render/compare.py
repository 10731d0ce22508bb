"""`attncli compare`: the weights of several variants side by side, on one colour scale."""

from __future__ import annotations

from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import Result
from attncli.core.variants import traits_of
from attncli.render.draw.colors import has_colour, legend, shade_legend
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
    if has_colour(console) or not heatmap:
        return legend(0.0, vmax, options.precision, ramp=has_colour(console), masked=masked)
    return shade_legend(0.0, vmax, options.precision, masked=masked)


def render_compare(console: Console, results: list[Result],
                   options: Display) -> RenderableType:
    """One weights panel per variant and head, side by side where they fit, one legend."""
    axis = token_axis(results[0])
    named = [(traits_of(r.variant).title
              + (f" · head {h}" if r.num_heads > 1 else ""), shown_weights(r, r.weights[h]))
             for r in results for h in range(r.num_heads)]
    shown = [window(axis, axis, cells, options, True) for _, cells in named]
    # One colour scale for every panel, so equal weights look equal across variants.
    vmax = max((v for _, _, m in shown for row in m for v in row if v is not None), default=1.0)
    panels = [render_view(console, title, axis, axis, cells, options, vmin=0.0, vmax=vmax,
                          show_legend=False) for title, cells in named]
    heatmap = any(uses_heatmap(console, *part, options) for part in shown)
    return Group(_header(results), Text(), Columns(panels, padding=(1, 4)),
                 _legend(console, [m for _, _, m in shown], vmax, heatmap, options))
