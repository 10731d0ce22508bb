"""Heatmaps: one coloured block per cell, for matrices too large to show as numbers."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.render.draw.colors import (
    MASKED_MARK,
    MASKED_STYLE,
    block_style,
    has_colour,
    legend,
    shade_legend,
    shade_of,
)
from attncli.render.draw.tables import Axis, shorten

LABEL_MAX = 12


def _row_labels(rows: Axis) -> list[str]:
    digits = len(str(max(rows.indices)))
    labels = [f"{i:>{digits}} {shorten(label, LABEL_MAX)}" for i, label in
              zip(rows.indices, rows.labels, strict=True)]
    width = max(cell_len(label) for label in labels)
    return [label + " " * (width - cell_len(label)) for label in labels]


def _ticks(indices: Sequence[int], cell_w: int) -> str:
    """Column indices above their columns: the first, then every 5th (10th when narrow)."""
    step = 5 if cell_w > 1 else 10
    line = ""
    for j, index in enumerate(indices):
        pos = j * cell_w
        if (j == 0 or index % step == 0) and pos >= len(line) + (1 if line else 0):
            line += " " * (pos - len(line)) + str(index)
    return line


def heat_cell(value: float | None, vmin: float, vmax: float, cell_w: int, colour: bool) -> Text:
    """One cell: a coloured block, a shade without colour, or the masked mark."""
    if value is None:
        return Text(MASKED_MARK.center(cell_w), style=MASKED_STYLE)
    if colour:
        return Text("█" * cell_w, style=block_style(value, vmin, vmax))
    return Text(shade_of(value, vmin, vmax) * cell_w)


def _cut_note(cols: Axis, n_cols: int, width: int, windowable: bool) -> Text:
    first, last, end = cols.indices[0], cols.indices[n_cols - 1], cols.indices[-1] + 1
    hint = (f"see the rest with --cols {last + 1}:{end}" if windowable
            else "use --json for every number")
    return Text(f"showing columns {first}–{last} of {first}–{end - 1} "
                f"({len(cols.labels) - n_cols} cut to fit {width} columns; {hint})",
                style="italic")


def render_heatmap(console: Console, title: str, rows: Axis, cols: Axis,
                   matrix: Sequence[Sequence[float | None]], precision: int, vmin: float,
                   vmax: float, show_legend: bool = True,
                   windowable: bool = True) -> RenderableType:
    """Rows of coloured blocks (shades without colour) under index ticks, cut to the width."""
    colour = has_colour(console)
    labels = _row_labels(rows)
    room = max(console.width - cell_len(labels[0]) - 1, 1)
    total = len(cols.labels)
    cell_w = 2 if 2 * total <= room else 1
    n_cols = min(total, max(room // cell_w, 1))
    body = Text(no_wrap=True, overflow="crop")
    body.append(" " * (cell_len(labels[0]) + 1) + _ticks(cols.indices[:n_cols], cell_w) + "\n",
                style="dim")
    for i, row in enumerate(matrix):
        body.append(labels[i] + " ", style="bold")
        for value in row[:n_cols]:
            body.append_text(heat_cell(value, vmin, vmax, cell_w, colour))
        if i < len(matrix) - 1:
            body.append("\n")
    parts: list[RenderableType] = [Text(title, style="bold"), body]
    if n_cols < total:
        parts.append(_cut_note(cols, n_cols, console.width, windowable))
    masked = any(v is None for row in matrix for v in row[:n_cols])
    if show_legend:
        parts.append(legend(vmin, vmax, precision, masked=masked) if colour
                     else shade_legend(vmin, vmax, precision, masked=masked))
    return Group(*parts)
