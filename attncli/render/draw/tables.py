"""Coloured number tables that fit the terminal width."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.text import Text

from attncli.render.draw.colors import MASKED_MARK, MASKED_STYLE, cell_style, legend
from attncli.render.draw.listing import Cell, Column, Listing, column_widths, listing_width
from attncli.render.draw.palette import TRUECOLOR, depth_of

MIN_PRECISION = 2
ROW_LABEL_MAX = 16
LABEL_MAX = 16  # a column label longer than this is cut, even with room
PAD = (1, 0)  # a space before each number, none after


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


def _header(cols: Axis, j: int, precision: int, label_max: int) -> str:
    label = shorten(cols.labels[j].strip() or cols.labels[j], max(precision + 2, 4, label_max))
    return f"{cols.indices[j]}\n{label}" if cols.show_index else label


def _listing(console: Console, rows: Axis, cols: Axis,
             matrix: Sequence[Sequence[float | None]], precision: int, n_cols: int, vmin: float,
             vmax: float, depth: str | None = TRUECOLOR, diverging: bool = False,
             label_max: int = 0) -> Listing:
    """The table of matrix as a Listing: widths counted from the data, rows made as printed."""
    columns = [Column("", no_wrap=True, style="bold"),
               *(Column(Text(_header(cols, j, precision, label_max)), "right", no_wrap=True)
                 for j in range(n_cols))]
    widest = [label_width(rows), *(column_width(cols, matrix, precision, j, label_max)
                                   for j in range(n_cols))]
    widths = widest
    if listing_width(widest, PAD) > console.width:  # Rich's shrinking, asked of the widest cells
        labels = [f"{i} {shorten(label, ROW_LABEL_MAX)}" for i, label in
                  zip(rows.indices, rows.labels, strict=True)]
        extremes = [[max(labels, key=cell_len, default=""),
                     *(_widest_number(matrix, j, precision) for j in range(n_cols))]]
        widths = column_widths(console, None, columns, widest, extremes, PAD)

    masked = Text(MASKED_MARK, style=MASKED_STYLE, justify="center")  # read, never changed
    plain = console.color_system is None  # no styles: numbers as plain strings, faster

    def cells() -> Iterator[list[Cell]]:
        for i, row in enumerate(matrix):
            out: list[Cell] = [f"{rows.indices[i]} {shorten(rows.labels[i], ROW_LABEL_MAX)}"]
            for value in row[:n_cols]:
                if value is None:
                    out.append(masked)
                elif plain or depth is None:
                    out.append(f"{value:.{precision}f}")
                else:
                    style = cell_style(value, vmin, vmax, depth, diverging)
                    out.append(Text(f"{value:.{precision}f}", style=style))
            yield out

    return Listing(columns, widths, cells, pad=PAD)


def _widest_number(matrix: Sequence[Sequence[float | None]], j: int, precision: int) -> str:
    column = [v for row in matrix if (v := row[j]) is not None]
    numbers = [f"{v:.{precision}f}" for v in (min(column), max(column))] if column else []
    return max([MASKED_MARK, *numbers], key=len)


def table_width(console: Console, table: RenderableType) -> int:
    """The width a table (or any renderable) needs, unconstrained by the console."""
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
    header = _header(cols, j, precision, label_max)
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
    parts.append(_listing(console, rows, cols, matrix, p, n_cols, vmin, vmax, depth, diverging,
                          label_max))
    if n_cols < len(cols.labels):
        parts.append(Text(
            f"showing columns {cols.indices[0]}–{cols.indices[n_cols - 1]} of "
            f"{len(cols.labels)} ({len(cols.labels) - n_cols} cut to fit {width} columns; "
            "widen the terminal, use --draw heatmap, --cols a:b, or --json for every number)",
            style="italic"))
    masked = any(v is None for row in matrix for v in row[:n_cols])
    key = legend(vmin, vmax, p, ramp=depth is not None, masked=masked, depth=depth or TRUECOLOR,
                 diverging=diverging, scale=scale)
    if show_legend and key.plain:
        parts.append(key)
    return Group(*parts)
