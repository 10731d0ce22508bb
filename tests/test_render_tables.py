"""The table's fit is decided arithmetically; it must equal what Rich measures."""

from __future__ import annotations

import random

import pytest
from rich.console import Console

from attncli.render.draw.tables import (
    Axis,
    _table,
    column_width,
    columns_that_fit,
    label_width,
    table_width,
)

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
