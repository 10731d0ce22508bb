"""Renderables for `attncli run` and `attncli tokens`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import Result
from attncli.render.draw.scales import signed_top, weight_top
from attncli.render.draw.tables import Axis
from attncli.render.draw.views import render_view
from attncli.render.model import describe_model, kv_note, measure_legend
from attncli.render.predictions import and_predictions
from attncli.render.query import render_query
from attncli.render.stages import head_title, render_stage, shown_weights, token_axis

if TYPE_CHECKING:
    pass


def matrix_title(result: Result, h: int) -> str:
    """The title of head h's matrix: its weights, or the measure shown instead."""
    which = f" — {head_title(result, h, 'en')}" if result.config.heads > 1 else ""
    if result.config.measure == "rollout":
        return (f"Attention rollout to layer {result.config.layer}, heads averaged (row = query, "
                "column = key; rows sum to 1)")
    which += kv_note(result, h)
    if result.config.measure == "norm":
        return f"‖α·W_O v‖{which} (row = query, column = key; rows renormalised)"
    return f"Attention weights{which} (row = query, column = key; rows sum to 1)"


def describe(result: Result) -> Text:
    """One line naming the variant and the settings that shaped the numbers (and a second
    saying what --measure shows)."""
    line = _describe(result)
    legend = measure_legend(result.config.measure, result.config.layer)
    return line if legend is None else Text.assemble(line, ("\n" + legend, "dim"))


def _describe(result: Result) -> Text:
    c = result.config
    if result.model is not None:
        return describe_model(result)
    traits = result.traits
    parts = [f"{c.num_tokens} tokens", f"d_in {c.d_in} → d_out {c.d_out}"]
    if traits.multihead:
        parts.append(f"{c.heads} heads")
    if c.dropout:
        parts.append(f"dropout {c.dropout}")
    parts.append(f"seed {c.seed}")
    return Text.assemble((traits.title, "bold"), " · " + " · ".join(parts))


def render_weights(console: Console, result: Result,
                   options: Display) -> list[RenderableType]:
    """One weights view per head shown (rows: queries, columns: keys)."""
    axis = token_axis(result)
    out: list[RenderableType] = []
    # Show masked positions as masked, not as the 0.0 weight they became.
    shown = {h: shown_weights(result, result.weights[h]) for h in range(result.num_heads)}
    top = weight_top(shown.values(), options.scale)
    for h, matrix in shown.items():
        title = matrix_title(result, h)
        out.append(render_view(console, title, axis, axis, matrix, options, vmin=0.0, vmax=top,
                               scale=options.scale))
    return out


def render_context(console: Console, result: Result, options: Display) -> RenderableType:
    """The context vectors: one row per token, one column per output dimension."""
    d_out = len(result.context[0])
    dims = Axis([f"d{j}" for j in range(d_out)], list(range(d_out)), show_index=False)
    return render_view(console, "Context vectors (row = token, column = dimension)",
                       token_axis(result), dims, result.context, options, token_cols=False,
                       vmax=signed_top([result.context], options.scale), scale="shared")


def render_run(console: Console, result: Result,
               options: Display | None = None) -> RenderableType:
    """A description line, the weights and context (or the --show stages), then --query's view.

    A tiled run shows its summary, pooled heatmaps, top keys and window instead.
    """
    options = options or Display()
    if result.long is not None:
        from attncli.render.long import render_long  # a tiled run's views

        return and_predictions(console, result, options,
                               render_long(console, result, options))
    parts: list[RenderableType] = [describe(result), Text()]
    if options.stages:
        tables = [t for name in options.stages for t in render_stage(console, result, name,
                                                                     options)]
    else:
        tables = [*render_weights(console, result, options),
                  render_context(console, result, options)]
    for table in tables:
        parts += [table, Text()]
    if result.query is not None:
        parts += [render_query(console, result, options), Text()]
    return and_predictions(console, result, options, Group(*parts[:-1]))
