"""Coloured number tables that fit the terminal width."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from attncli.render.draw.colors import MASKED_MARK, MASKED_STYLE, cell_style, legend
from attncli.render.draw.palette import TRUECOLOR, depth_of

MIN_PRECISION = 2
ROW_LABEL_MAX = 16
LABEL_MAX = 16  # a column label longer than this is cut, even with room


@dataclass(frozen=True)
class Axis:
    """Labels of one axis and the original indices they stand for."""

    labels: Sequence[str]
    indices: Sequence[int]
    show_index: bool = True


def shorten(label: str, limit: int) -> str:
    """Label cut to at most limit cells, with an ellipsis when cut."""
    if cell_len(label) <= limit:
        return label
    out = ""
    for ch in label:
        if cell_len(out + ch) > limit - 1:
            break
        out += ch
    return out + "…"


def _table(rows: Axis, cols: Axis, matrix: Sequence[Sequence[float | None]],
           precision: int, n_cols: int, vmin: float, vmax: float, depth: str | None = TRUECOLOR,
           diverging: bool = False, label_max: int = 0) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    table.add_column("", no_wrap=True, style="bold")
    for j in range(n_cols):
        label = shorten(cols.labels[j].strip() or cols.labels[j], max(precision + 2, 4, label_max))
        header = f"{cols.indices[j]}\n{label}" if cols.show_index else label
        table.add_column(Text(header), justify="right", no_wrap=True)
    for i, row in enumerate(matrix):
        label = shorten(rows.labels[i], ROW_LABEL_MAX)
        cells: list[RenderableType] = [Text(f"{rows.indices[i]} {label}")]
        for value in row[:n_cols]:
            if value is None:
                cells.append(Text(MASKED_MARK, style=MASKED_STYLE, justify="center"))
            else:
                style = "" if depth is None else cell_style(value, vmin, vmax, depth, diverging)
                cells.append(Text(f"{value:.{precision}f}", style=style))
        table.add_row(*cells)
    return table


def table_width(console: Console, table: Table) -> int:
    """The width table needs, unconstrained by the console."""
    return Measurement.get(console, console.options.update(max_width=10**6), table).maximum


def label_width(rows: Axis) -> int:
    """Cells the row-label column of _table needs: its longest 'index label'."""
    return max((cell_len(f"{i} {shorten(label, ROW_LABEL_MAX)}")
                for i, label in zip(rows.indices, rows.labels, strict=True)), default=0)


def column_width(cols: Axis, matrix: Sequence[Sequence[float | None]], precision: int,
                 j: int, label_max: int = 0) -> int:
    """Cells column j of _table needs, without padding: its header lines or widest cell.

    A number's width is its formatted length, and the widest is the column's minimum or maximum.
    """
    label = shorten(cols.labels[j].strip() or cols.labels[j], max(precision + 2, 4, label_max))
    header = f"{cols.indices[j]}\n{label}" if cols.show_index else label
    width = max(cell_len(line) for line in header.split("\n"))
    column = [v for row in matrix if (v := row[j]) is not None]
    if column:
        width = max(width, *(len(f"{v:.{precision}f}") for v in (min(column), max(column))))
    if len(column) < len(matrix):
        width = max(width, cell_len(MASKED_MARK))
    return width


def columns_that_fit(rows: Axis, cols: Axis, matrix: Sequence[Sequence[float | None]],
                     precision: int, width: int, label_max: int = 0) -> int:
    """How many leading columns of _table fit width cells (0: not even one), counted without
    building it: the label column, then per column its cells, a left pad and a divider."""
    used = label_width(rows)
    for j in range(len(cols.labels)):
        used += column_width(cols, matrix, precision, j, label_max) + 2
        if used > width:
            return j
    return len(cols.labels)


def fits(console: Console, rows: Axis, cols: Axis, matrix: Sequence[Sequence[float | None]],
         precision: int) -> bool:
    """Whether the whole table fits the console at MIN_PRECISION decimals (or fewer if asked)."""
    p = min(precision, MIN_PRECISION)
    return columns_that_fit(rows, cols, matrix, p, console.width) == len(cols.labels)


def render_matrix(console: Console, title: str, rows: Axis, cols: Axis,
                  matrix: Sequence[Sequence[float | None]], precision: int,
                  vmin: float | None = None, vmax: float | None = None,
                  show_legend: bool = True, diverging: bool = False,
                  scale: str | None = None) -> RenderableType:
    """A coloured table of matrix; whole labels, fewer decimals, fewer columns, until it fits."""
    values = [v for row in matrix for v in row if v is not None]
    vmin = min(values, default=0.0) if vmin is None else vmin
    vmax = max(values, default=1.0) if vmax is None else vmax
    width = console.width
    n_cols = len(cols.labels)
    parts: list[RenderableType] = [Text(title, style="bold")]
    p = precision
    # Column labels whole while there is room, else cut to the numbers' width.
    whole = columns_that_fit(rows, cols, matrix, p, width, LABEL_MAX) == n_cols
    label_max = LABEL_MAX if whole else 0
    while columns_that_fit(rows, cols, matrix, p, width) < n_cols and p > MIN_PRECISION:
        p -= 1
    n_cols = max(columns_that_fit(rows, cols, matrix, p, width, label_max), 1)
    depth = depth_of(console)
    parts.append(_table(rows, cols, matrix, p, n_cols, vmin, vmax, depth, diverging, label_max))
    if n_cols < len(cols.labels):
        parts.append(Text(
            f"showing columns {cols.indices[0]}–{cols.indices[n_cols - 1]} of "
            f"{len(cols.labels)} ({len(cols.labels) - n_cols} cut to fit {width} columns; "
            "widen the terminal, use --view heatmap, --cols a:b, or --json for every number)",
            style="italic"))
    masked = any(v is None for row in matrix for v in row[:n_cols])
    key = legend(vmin, vmax, p, ramp=depth is not None, masked=masked, depth=depth or TRUECOLOR,
                 diverging=diverging, scale=scale)
    if show_legend and key.plain:
        parts.append(key)
    return Group(*parts)
