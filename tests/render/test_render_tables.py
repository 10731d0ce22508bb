"""The table's fit is decided arithmetically; it must equal what Rich measures."""

from __future__ import annotations

import random

import pytest
from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.render.draw import listing
from attncli.render.draw.colors import MASKED_MARK, MASKED_STYLE, cell_style, legend
from attncli.render.draw.palette import TRUECOLOR, depth_of
from attncli.render.draw.tables import (
    LABEL_MAX,
    MIN_PRECISION,
    ROW_LABEL_MAX,
    Axis,
    column_width,
    columns_that_fit,
    label_width,
    render_matrix,
    shorten,
    table_width,
)
from tests.conftest import rendered, streamed, styled_chars


def _table(rows: Axis, cols: Axis, matrix: list[list[float | None]], precision: int,
           n_cols: int, vmin: float, vmax: float, depth: str | None = TRUECOLOR,
           diverging: bool = False, label_max: int = 0) -> Table:
    """The reference: a matrix as the one whole Rich table attncli printed before streaming."""
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


def _old_matrix(console: Console, title: str, rows: Axis, cols: Axis,
                matrix: list[list[float | None]], precision: int, vmin: float,
                vmax: float) -> Group:
    """The reference render_matrix: the same fitting, one whole table."""
    width, n_cols, p = console.width, len(cols.labels), precision
    whole = columns_that_fit(rows, cols, matrix, p, width, LABEL_MAX) == n_cols
    label_max = LABEL_MAX if whole else 0
    while columns_that_fit(rows, cols, matrix, p, width) < n_cols and p > MIN_PRECISION:
        p -= 1
    n_cols = max(columns_that_fit(rows, cols, matrix, p, width, label_max), 1)
    depth = depth_of(console)
    parts: list[RenderableType] = [Text(title, style="bold"),
                                   _table(rows, cols, matrix, p, n_cols, vmin, vmax, depth,
                                          False, label_max)]
    if n_cols < len(cols.labels):
        parts.append(Text(
            f"showing columns {cols.indices[0]}–{cols.indices[n_cols - 1]} of "
            f"{len(cols.labels)} ({len(cols.labels) - n_cols} cut to fit {width} columns; "
            "widen the terminal, use --draw heatmap, --cols a:b, or --json for every number)",
            style="italic"))
    masked = any(v is None for row in matrix for v in row[:n_cols])
    key = legend(vmin, vmax, p, ramp=depth is not None, masked=masked, depth=depth or TRUECOLOR,
                 scale="shared")
    if key.plain:
        parts.append(key)
    return Group(*parts)

LABELS = [" hello", "猫", "[bold]", "x", " a much longer label than sixteen", "", "\\n", "é"]


def _case(seed: int) -> tuple[Axis, Axis, list[list[float | None]]]:
    rng = random.Random(seed)
    n_rows, n_cols = rng.randint(1, 6), rng.randint(1, 9)
    rows = Axis([rng.choice(LABELS) for _ in range(n_rows)],
                [rng.randint(0, 20000) for _ in range(n_rows)])
    cols = Axis([rng.choice(LABELS) for _ in range(n_cols)],
                [rng.randint(0, 20000) for _ in range(n_cols)], show_index=rng.random() < 0.7)
    scale = rng.choice([1.0, 10.0, 1000.0])
    matrix = [[None if rng.random() < 0.3 else rng.uniform(-scale, scale) for _ in range(n_cols)]
              for _ in range(n_rows)]
    return rows, cols, matrix


@pytest.mark.parametrize("seed", range(40))
def test_arithmetic_width_equals_rich_measure(seed: int) -> None:
    rows, cols, matrix = _case(seed)
    console = Console(width=80, color_system=None)
    for precision in range(5):
        for n in range(1, len(cols.labels) + 1):
            expected = table_width(console, _table(rows, cols, matrix, precision, n, -1.0, 1.0))
            widths = [column_width(cols, matrix, precision, j) + 2 for j in range(n)]
            assert label_width(rows) + sum(widths) == expected


@pytest.mark.parametrize("seed", range(40))
def test_columns_that_fit_is_the_most_that_rich_fits(seed: int) -> None:
    rows, cols, matrix = _case(seed)
    console = Console(width=200, color_system=None)
    for width in (10, 30, 60, 120):
        n = columns_that_fit(rows, cols, matrix, 2, width)
        if n:
            assert table_width(console, _table(rows, cols, matrix, 2, n, -1.0, 1.0)) <= width
        if n < len(cols.labels):
            assert table_width(console, _table(rows, cols, matrix, 2, n + 1, -1.0, 1.0)) > width


@pytest.mark.parametrize("width", [20, 40, 80, 200])
@pytest.mark.parametrize("seed", range(12))
def test_the_streamed_matrix_prints_what_the_whole_table_did(
        seed: int, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 2)
    rows, cols, matrix = _case(seed)
    lo = min((v for row in matrix for v in row if v is not None), default=0.0)
    hi = max((v for row in matrix for v in row if v is not None), default=1.0)
    args = ("title", rows, cols, matrix, 4, lo, hi)
    old = rendered(lambda c: _old_matrix(c, *args), width)
    assert streamed(lambda c: render_matrix(c, *args, scale="shared"), width) == old
    assert rendered(lambda c: render_matrix(c, *args, scale="shared"), width) == old
    if width >= 40:
        assert max(cell_len(line) for line in old.splitlines()) <= width
    coloured = rendered(lambda c: _old_matrix(c, *args), width, colour=True)
    new = streamed(lambda c: render_matrix(c, *args, scale="shared"), width, colour=True)
    assert styled_chars(new) == styled_chars(coloured)
