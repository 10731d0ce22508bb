"""How a matrix is shown: numbers or heatmap, inside the --rows/--cols windows."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, RenderableType

from attncli.core.display import Display
from attncli.render.draw.heatmap import render_heatmap
from attncli.render.draw.tables import Axis, fits, render_matrix

Cells = Sequence[Sequence[float | None]]


def _span(window: tuple[int, int] | None, size: int) -> range:
    return range(size) if window is None else range(*window)


def window(rows: Axis, cols: Axis, matrix: Cells, options: Display,
           token_cols: bool) -> tuple[Axis, Axis, list[list[float | None]]]:
    """The part of matrix inside the windows, with the original indices on both axes."""
    row_span = _span(options.rows, len(rows.labels))
    col_span = _span(options.cols if token_cols else None, len(cols.labels))
    sub_rows = Axis([rows.labels[i] for i in row_span], [rows.indices[i] for i in row_span],
                    rows.show_index)
    sub_cols = Axis([cols.labels[j] for j in col_span], [cols.indices[j] for j in col_span],
                    cols.show_index)
    cells = [[matrix[i][j] for j in col_span] for i in row_span]
    return sub_rows, sub_cols, cells


def uses_heatmap(console: Console, rows: Axis, cols: Axis, cells: Cells,
                 options: Display) -> bool:
    """Whether the (windowed) matrix shows as a heatmap: when asked, or when numbers do not fit."""
    return options.view == "heatmap" or (
        options.view == "auto" and not fits(console, rows, cols, cells, options.precision))


def render_view(console: Console, title: str, rows: Axis, cols: Axis, matrix: Cells,
                options: Display, token_cols: bool = True, vmin: float | None = None,
                vmax: float | None = None, show_legend: bool = True,
                scale: str | None = None) -> RenderableType:
    """The windowed matrix as numbers, or as a heatmap when asked or when numbers do not fit.

    vmin fixed (0 for weights): a sequential map; vmin None: a signed quantity, on a diverging
    map centred on 0. vmax None: this table's range; scale names the range for the legend.
    """
    rows, cols, cells = window(rows, cols, matrix, options, token_cols)
    values = [v for row in cells for v in row if v is not None]
    diverging = vmin is None
    if vmax is None:
        scale = "table"
        vmax = max((abs(v) for v in values) if diverging else values, default=1.0)
    vmin = -vmax if vmin is None else vmin
    if uses_heatmap(console, rows, cols, cells, options):
        return render_heatmap(console, title, rows, cols, cells, options.precision, vmin, vmax,
                              show_legend=show_legend, windowable=token_cols,
                              diverging=diverging, scale=scale)
    return render_matrix(console, title, rows, cols, cells, options.precision, vmin, vmax,
                         show_legend=show_legend, diverging=diverging, scale=scale)
