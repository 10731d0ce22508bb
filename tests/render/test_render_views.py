"""Numbers when they fit, a heatmap otherwise; --rows/--cols windows keep original indices."""

from __future__ import annotations

import pytest

from attncli.core.display import Display
from attncli.render.draw.tables import Axis, fits, render_matrix
from attncli.render.draw.views import render_view, window
from tests.conftest import make_console, rendered


def _axis(n: int) -> Axis:
    return Axis([f"t{i}" for i in range(n)], list(range(n)))


def _matrix(rows: int, cols: int) -> list[list[float | None]]:
    return [[round((i - j) / 7, 6) for j in range(cols)] for i in range(rows)]


@pytest.mark.parametrize("n", [3, 8, 9, 10, 11, 14, 20])
@pytest.mark.parametrize("width", [60, 80])
def test_fits_agrees_with_the_rendered_table(n: int, width: int) -> None:
    matrix = _matrix(n, n)
    console = make_console(width)
    full = rendered(lambda c: render_matrix(c, "T", _axis(n), _axis(n), matrix, 2), width=10**4)
    needed = max(len(line) for line in full.splitlines()[1:])
    assert fits(console, _axis(n), _axis(n), matrix, 4) == (needed <= width)


def test_auto_picks_table_or_heatmap() -> None:
    small, big = _matrix(4, 4), _matrix(30, 30)
    table = rendered(lambda c: render_view(c, "T", _axis(4), _axis(4), small, Display()), 80)
    assert "0.4286" in table and "[ ░▒▓█]" not in table
    heat = rendered(lambda c: render_view(c, "T", _axis(30), _axis(30), big, Display()), 80)
    assert "[ ░▒▓█]" in heat and "0.42" not in heat
    forced = rendered(lambda c: render_view(c, "T", _axis(4), _axis(4), small,
                                            Display(view="heatmap")), 80)
    assert "[ ░▒▓█]" in forced
    cut = rendered(lambda c: render_view(c, "T", _axis(30), _axis(30), big,
                                         Display(view="table")), 80)
    assert "cut to fit 80 columns" in cut.replace("\n", " ")


def test_window_keeps_original_indices() -> None:
    matrix = _matrix(10, 10)
    options = Display(rows=(3, 5), cols=(6, 9))
    rows, cols, cells = window(_axis(10), _axis(10), matrix, options, token_cols=True)
    assert list(rows.indices) == [3, 4] and list(cols.indices) == [6, 7, 8]
    assert cells == [[matrix[i][j] for j in (6, 7, 8)] for i in (3, 4)]
    # Dimension columns are never windowed by --cols.
    _, dims, cells = window(_axis(10), _axis(4), _matrix(10, 4), options, token_cols=False)
    assert list(dims.indices) == [0, 1, 2, 3] and len(cells) == 2


def test_windowed_table_shows_original_labels() -> None:
    options = Display(rows=(7, 9), cols=(2, 4))
    text = rendered(lambda c: render_view(c, "T", _axis(10), _axis(10), _matrix(10, 10),
                                          options), 80)
    body = text.splitlines()
    assert body[1].split() == ["2", "3"] and body[2].split() == ["t2", "t3"]
    assert [line.split()[0] for line in body[4:6]] == ["7", "8"]
    assert f"{(7 - 2) / 7:.4f}" in body[4]


def test_table_column_labels_stay_whole_while_there_is_room() -> None:
    from attncli.render.draw.tables import Axis, render_matrix
    from tests.conftest import rendered

    axis = Axis(["a", " extraordinary", "b"], [0, 1, 2])
    matrix = [[0.5, 0.25, 0.25]] * 3
    wide = rendered(lambda c: render_matrix(c, "T", axis, axis, matrix, 4), width=100)
    assert wide.splitlines()[2].split() == ["a", "extraordinary", "b"]
    # Without room for the whole label, it is cut to the numbers' width before any column goes.
    narrow = rendered(lambda c: render_matrix(c, "T", axis, axis, matrix, 4), width=40)
    assert narrow.splitlines()[2].split() == ["a", "extra…", "b"]
