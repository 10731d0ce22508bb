"""Any computation stage of a Result as titled matrices: per head, windowed, table or heatmap."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.console import Console, RenderableType

from attncli.core.display import Display
from attncli.core.result import Result
from attncli.i18n import STRINGS, text
from attncli.render.draw.scales import signed_top, weight_top
from attncli.render.draw.tables import Axis
from attncli.render.draw.views import render_view
from attncli.render.model import kv_note

TOKEN_STAGES = ("scores", "scaled", "capped", "masked", "softmax", "dropped",
                "weights")  # [h][T][T]
HEAD_STAGES = ("queries", "keys", "values", "queries_norm", "keys_norm", "queries_rope",
               "keys_rope")  # [h][T][head_dim]
WEIGHT_STAGES = ("softmax", "dropped", "weights")  # in [0, 1]; masked cells shown as masked


@dataclass(frozen=True)
class Panel:
    """One matrix of a stage, ready to show."""

    caption: str
    cols: Axis
    cells: list[list[float | None]]
    token_cols: bool
    vmin: float | None = None
    vmax: float | None = None  # the shared top of the stage's range (None: the table's own)


def token_axis(result: Result) -> Axis:
    """The token labels and their indices."""
    return Axis(result.labels, list(range(len(result.tokens))))


def dim_axis(size: int, names: list[str] | None = None) -> Axis:
    """Dimension columns d0, d1, … (or the given names), without index ticks."""
    return Axis(names or [f"d{j}" for j in range(size)], list(range(size)), show_index=False)


def text_key(name: str, variant: str, kind: str) -> str:
    specific = f"{kind}.{name}.{variant}"
    return specific if specific in STRINGS else f"{kind}.{name}"


def d_k(result: Result) -> int:
    """The key width the scores are scaled by (head_dim), from the keys when they are kept; a
    checkpoint's own divisor² where it has one (Gemma's query_pre_attn_scalar), read off its
    scores and scaled scores."""
    scores, scaled = result.stages.get("scores"), result.stages.get("scaled")
    if result.model is not None and scores and scaled:
        cells = ((w, s) for h_w, h_s in zip(scores, scaled, strict=True)
                 for r_w, r_s in zip(h_w, h_s, strict=True)
                 for w, s in zip(r_w, r_s, strict=True))
        ratio = next(((w / s) ** 2 for w, s in cells
                      if w is not None and s is not None and abs(s) > 1e-3), None)
        if ratio is not None:
            return round(ratio)
    keys = result.stages.get("keys")
    if keys:
        return len(keys[0][0])
    model = result.model
    return model.head_dim if model is not None else result.config.d_out // result.config.heads


def stage_title(result: Result, name: str, lang: str) -> str:
    """The stage's title in lang, with its numbers (d_k, p) filled in."""
    values: dict[str, Any] = {}
    if name == "scaled":
        values = {"d_k": d_k(result), "root": f"{math.sqrt(d_k(result)):.4f}"}
    elif name == "dropped":
        values = {"p": result.config.dropout}
    elif name == "inputs" and result.model is not None:
        values = {"norm": result.model.norm}
    family = result.model.family if result.model is not None else None
    if name == "scores" and family is not None and family.nope:  # no RoPE on this layer
        return text(lang, "title.scores", **values)
    return text(lang, text_key(name, result.variant, "title"), **values)


def shown_weights(result: Result,
                  cells: Sequence[Sequence[float | None]]) -> list[list[float | None]]:
    """Weights with every masked cell as None, so it shows as masked, not as the 0 softmax made
    it: the future of a causal run, and keys at or past a sliding window behind the query."""
    if not result.traits.causal:
        return [list(row) for row in cells]
    window = result.key_window
    return [[w if j <= i and (window is None or i - j < window) else None
             for j, w in enumerate(row)] for i, row in enumerate(cells)]


def head_title(result: Result, position: int, lang: str) -> str:
    """"head h of n" for the head held at position."""
    return text(lang, "head", h=result.head_number(position), n=result.config.heads)


def _head_caption(result: Result, head: int, axes: str, lang: str) -> str:
    if result.config.heads == 1:
        return text(lang, axes)
    return f"{head_title(result, head, lang)}{kv_note(result, head)} · {text(lang, axes)}"


def panels(result: Result, name: str, options: Display) -> list[Panel]:
    """The matrices that show one stage, on one range when --scale is shared (or unit)."""
    found = _panels(result, name, options)
    cells = [panel.cells for panel in found]
    top = (weight_top(cells, options.scale) if name in WEIGHT_STAGES
           else signed_top(cells, options.scale))
    return [replace(panel, vmax=top) for panel in found]


def _panels(result: Result, name: str, options: Display) -> list[Panel]:
    data, lang = result.stages[name], options.lang
    if name in TOKEN_STAGES:
        return [Panel(_head_caption(result, h, "axes.tokens", lang), token_axis(result),
                      shown_weights(result, data[h]) if name in WEIGHT_STAGES else data[h],
                      True, 0.0 if name in WEIGHT_STAGES else None)
                for h in range(result.num_heads)]
    if name in HEAD_STAGES:
        return [Panel(_head_caption(result, h, "axes.vectors", lang), dim_axis(len(data[h][0])),
                      data[h], False) for h in range(result.num_heads)]
    if name == "heads_context":
        width = len(data[0]) // result.config.heads
        return [Panel(_head_caption(result, h, "axes.vectors", lang), dim_axis(width),
                      [row[n * width:(n + 1) * width] for row in data], False)
                for h, n in ((h, result.head_number(h)) for h in range(result.num_heads))]
    axes = text(lang, "axes.vectors")
    if name == "context" and result.stages.get("heads_context") is not None:
        concat = result.stages["heads_context"]
        width = len(concat[0]) // result.config.heads
        names = [f"h{j // width}·d{j % width}" for j in range(len(concat[0]))]
        return [Panel(f"{text(lang, 'label.concat')} · {axes}", dim_axis(len(names), names),
                      concat, False),
                Panel(f"{text(lang, 'label.projected')} · {axes}", dim_axis(len(data[0])), data,
                      False)]
    return [Panel(axes, dim_axis(len(data[0])), data, False)]


def render_panel(console: Console, title: str, result: Result, panel: Panel,
                 options: Display) -> RenderableType:
    """One panel as a table or heatmap, inside the windows."""
    return render_view(console, title, token_axis(result), panel.cols, panel.cells, options,
                       token_cols=panel.token_cols, vmin=panel.vmin, vmax=panel.vmax,
                       scale="shared" if options.scale == "unit" and panel.vmin is None
                       else options.scale)


def render_stage(console: Console, result: Result, name: str,
                 options: Display) -> list[RenderableType]:
    """A stage's matrices, each titled with the stage title and its caption."""
    title = stage_title(result, name, options.lang)
    return [render_panel(console, f"{title} — {panel.caption}", result, panel, options)
            for panel in panels(result, name, options)]
