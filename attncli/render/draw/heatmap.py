"""Heatmaps: one coloured block per cell, for matrices too large to show as numbers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.style import Style
from rich.text import Text

from attncli.render.draw.colors import (
    MASKED_MARK,
    MASKED_STYLE,
    block_style,
    legend,
    shade_legend,
    shade_of,
)
from attncli.render.draw.palette import depth_of
from attncli.render.draw.streamed import Lines
from attncli.render.draw.tables import Axis, shorten

LABEL_MAX = 12
COLUMN_LABEL_MAX = 8  # characters of a column's label, written downwards above it


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


def column_labels(labels: Sequence[str], cell_w: int) -> list[str]:
    """Column labels written downwards, one character a line, when each character fits a cell."""
    cut = [(label.strip() or label)[:COLUMN_LABEL_MAX] for label in labels]
    if cell_w < 2 or any(cell_len(ch) > cell_w or not ch.isprintable() for s in cut for ch in s):
        return []
    depth = max((len(s) for s in cut), default=0)
    return ["".join((s[k] if k < len(s) else "") + " " * (cell_w - cell_len(s[k] if k < len(s)
                                                                             else ""))
                    for s in cut).rstrip() for k in range(depth)]


def heat_piece(value: float | None, vmin: float, vmax: float, cell_w: int,
               depth: str | None, diverging: bool = False) -> tuple[str, Style | None]:
    """One cell: a coloured block at depth, a shade without colour, or the masked mark."""
    if value is None:
        return MASKED_MARK.center(cell_w), MASKED_STYLE
    if depth is not None:
        return "█" * cell_w, block_style(value, vmin, vmax, depth, diverging)
    return shade_of(value, vmin, vmax, diverging) * cell_w, None


def append_cells(body: Text, cells: Iterable[tuple[str, Style | None]]) -> None:
    """Append cells to body, one span per run of equal style: Rich's cost grows with spans."""
    run: list[str] = []
    run_style: Style | None = None
    for text, style in cells:
        if style is not run_style and run:  # styles are cached: one colour, one object
            body.append("".join(run), run_style)
            run = []
        run.append(text)
        run_style = style
    if run:
        body.append("".join(run), run_style)


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
                   windowable: bool = True, diverging: bool = False,
                   scale: str | None = None) -> RenderableType:
    """Rows of coloured blocks (shades without colour) under labels or ticks, cut to the width."""
    depth = depth_of(console)
    labels = _row_labels(rows)
    room = max(console.width - cell_len(labels[0]) - 1, 1)
    total = len(cols.labels)
    cell_w = 2 if 2 * total <= room else 1
    n_cols = min(total, max(room // cell_w, 1))
    indent = " " * (cell_len(labels[0]) + 1)

    plain = console.color_system is None  # no styles at all: lines as plain strings, faster

    def lines() -> Iterator[Text | str]:  # made as they are printed: a window may hold 8,192 rows
        yield Text().append(indent + _ticks(cols.indices[:n_cols], cell_w), style="dim")
        for label in column_labels(cols.labels[:n_cols], cell_w):
            yield Text().append(indent + label, style="dim")
        for i, row in enumerate(matrix):
            if plain:
                yield labels[i] + " " + "".join(
                    heat_piece(v, vmin, vmax, cell_w, None, diverging)[0] for v in row[:n_cols])
                continue
            line = Text().append(labels[i] + " ", style="bold")
            append_cells(line, (heat_piece(value, vmin, vmax, cell_w, depth, diverging)
                                for value in row[:n_cols]))
            yield line

    parts: list[RenderableType] = [Text(title, style="bold"), Lines(lines)]
    if n_cols < total:
        parts.append(_cut_note(cols, n_cols, console.width, windowable))
    masked = any(v is None for row in matrix for v in row[:n_cols])
    if show_legend:
        parts.append(legend(vmin, vmax, precision, masked=masked, depth=depth, diverging=diverging,
                            scale=scale) if depth is not None
                     else shade_legend(vmin, vmax, precision, masked=masked, diverging=diverging,
                                       scale=scale))
    return Group(*parts)
