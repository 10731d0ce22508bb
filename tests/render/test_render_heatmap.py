"""Heatmaps: blocks without digits, index ticks, original indices, shades without colour."""

from __future__ import annotations

import random
import re

import pytest
from rich.cells import cell_len
from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.text import Text

from attncli.render.draw import heatmap, listing
from attncli.render.draw.colors import SHADES, colour_of, legend, shade_legend, shade_of
from attncli.render.draw.heatmap import render_heatmap
from attncli.render.draw.palette import depth_of
from attncli.render.draw.tables import Axis
from tests.conftest import rendered, streamed, styled_chars
from tests.tolerance import assert_near


def _axis(n: int, start: int = 0) -> Axis:
    return Axis([f"tok{i}" for i in range(start, start + n)], list(range(start, start + n)))


def _ramp(rows: int, cols: int) -> list[list[float | None]]:
    return [[(i * cols + j) / (rows * cols - 1) for j in range(cols)] for i in range(rows)]


def _heatmap(matrix, rows: Axis, cols: Axis, width: int = 80, colour: bool = False,  # noqa: ANN001
             windowable: bool = True) -> str:
    return rendered(lambda c: render_heatmap(c, "T", rows, cols, matrix, 4, 0.0, 1.0,
                                             windowable=windowable), width, colour)


def test_shades_follow_the_value() -> None:
    assert [shade_of(v, 0.0, 1.0) for v in (0.0, 0.25, 0.5, 0.75, 1.0)] == list(SHADES)
    assert shade_of(5.0, 0.0, 1.0) == "█" and shade_of(-1.0, 0.0, 1.0) == " "
    assert shade_of(3.0, 3.0, 3.0) == SHADES[2]


def test_no_colour_uses_shades_and_no_digits_in_cells() -> None:
    matrix = [[0.0, 0.5, 1.0], [None, 0.25, 0.75]]
    text = _heatmap(matrix, _axis(2), _axis(3))
    lines = text.splitlines()
    assert lines[0] == "T"
    # The column labels, written downwards above their columns, then the rows.
    assert lines[2:6] == ["       t t t", "       o o o", "       k k k", "       0 1 2"]
    assert lines[6] == "0 tok0   ▒▒██"
    assert lines[7] == "1 tok1 · ░░▓▓"
    assert "shade 0.0000 [ ░▒▓█] 1.0000" in text and "· masked" in text
    assert "\x1b[" not in text
    assert not re.search(r"\d", lines[6].split(" ", 2)[2])


def test_colour_blocks_use_the_viridis_scale() -> None:
    text = _heatmap([[0.0, 1.0]], _axis(1), _axis(2), colour=True)
    low, high = colour_of(0.0, 0, 1), colour_of(1.0, 0, 1)
    assert f"\x1b[38;2;{low[0]};{low[1]};{low[2]}m██" in text
    assert f"\x1b[38;2;{high[0]};{high[1]};{high[2]}m██" in text
    assert "[ ░▒▓█]" not in text


def test_ticks_and_original_indices_of_a_window() -> None:
    rows, cols = _axis(3, start=40), _axis(12, start=10)
    text = _heatmap(_ramp(3, 12), rows, cols)
    lines = text.splitlines()
    # Ticks at the first column and every 5th index, each above its own column (2 cells each).
    label_w = len("40 tok40 ")
    assert lines[1][label_w:].rstrip() == "10        15        20"
    assert [line.split()[0] for line in lines[7:10]] == ["40", "41", "42"]
    assert "cut" not in text


def test_wide_matrix_is_cut_with_a_hint_to_window() -> None:
    n = 120
    text = _heatmap(_ramp(2, n), _axis(2), _axis(n), width=60)
    assert max(len(line) for line in text.splitlines()) <= 60
    shown = len(text.splitlines()[2]) - len("0 tok0 ")
    assert 40 <= shown < n
    note = next(line for line in text.splitlines() if "showing columns" in line)
    assert f"showing columns 0–{shown - 1} of 0–{n - 1}" in note
    assert f"--cols {shown}:{n}" in text.replace("\n", " ")


def test_narrow_cells_before_cutting_and_dimension_hint() -> None:
    # 60 columns fit at one cell each in 80 columns, but not at two.
    text = _heatmap(_ramp(2, 60), _axis(2), _axis(60), width=80)
    assert "cut" not in text
    assert len(text.splitlines()[2]) == len("0 tok0 ") + 60
    assert text.splitlines()[1].split() == ["0", "10", "20", "30", "40", "50"]
    cut = _heatmap(_ramp(2, 200), _axis(2), _axis(200), width=60, windowable=False)
    assert "use --json for every number" in cut.replace("\n", " ")


def test_column_labels_downwards_only_when_each_character_fits() -> None:
    from attncli.render.draw.heatmap import column_labels

    assert column_labels([" cat", "猫"], 2) == ["c 猫", "a", "t"]
    assert column_labels(["cat"], 1) == []  # one-cell columns: ticks only
    assert column_labels(["a\tb"], 2) == []  # a control character never goes on screen
    assert column_labels(["abcdefghijk"], 2)[-1] == "h"  # at most 8 characters


def test_scale_tops_agree_for_lists_and_masked_arrays() -> None:
    import numpy as np

    from attncli.render.draw.scales import signed_top, weight_top

    lists = [[[0.1, None], [0.7, 0.2]], [[None, None]], [[-0.9, 0.3]]]
    arrays = [np.array([[np.nan if v is None else v for v in row] for row in t], dtype=np.float32)
              for t in lists]
    assert_near(weight_top(arrays, "shared"), weight_top(lists, "shared"))
    assert_near(signed_top(arrays, "shared"), signed_top(lists, "shared"))
    assert weight_top(lists, "shared") == 0.7 and signed_top(lists, "shared") == 0.9
    empty = np.full((2, 2), np.nan)
    assert weight_top([empty], "shared") == weight_top([[[None]]], "shared") == 1.0
    assert weight_top(arrays, "table") is None and weight_top(arrays, "unit") == 1.0


def _old_heatmap(console, title: str, rows: Axis, cols: Axis, matrix, precision: int,  # noqa: ANN001
                 vmin: float, vmax: float) -> RenderableType:
    """The reference: the heatmap with its rows in one Text, as attncli printed it before."""
    depth = depth_of(console)
    labels = heatmap._row_labels(rows)
    room = max(console.width - cell_len(labels[0]) - 1, 1)
    total = len(cols.labels)
    cell_w = 2 if 2 * total <= room else 1
    n_cols = min(total, max(room // cell_w, 1))
    body = Text(no_wrap=True, overflow="crop")
    indent = " " * (cell_len(labels[0]) + 1)
    body.append(indent + heatmap._ticks(cols.indices[:n_cols], cell_w) + "\n", style="dim")
    for line in heatmap.column_labels(cols.labels[:n_cols], cell_w):
        body.append(indent + line + "\n", style="dim")
    for i, row in enumerate(matrix):
        body.append(labels[i] + " ", style="bold")
        for value in row[:n_cols]:
            text, style = heatmap.heat_piece(value, vmin, vmax, cell_w, depth)
            body.append_text(Text(text, style=style or ""))
        if i < len(matrix) - 1:
            body.append("\n")
    parts: list[RenderableType] = [Text(title, style="bold"), body]
    if n_cols < total:
        parts.append(heatmap._cut_note(cols, n_cols, console.width, True))
    masked = any(v is None for row in matrix for v in row[:n_cols])
    parts.append(legend(vmin, vmax, precision, masked=masked, depth=depth) if depth is not None
                 else shade_legend(vmin, vmax, precision, masked=masked))
    return Group(*parts)


@pytest.mark.slow
@pytest.mark.parametrize("width", [20, 40, 80, 200])
@pytest.mark.parametrize("seed", range(6))
def test_the_streamed_heatmap_prints_what_one_text_did(seed: int, width: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 3)
    rng = random.Random(seed)
    n_rows, n_cols = rng.randint(1, 40), rng.randint(1, 150)
    rows = Axis([rng.choice(["猫", " the", "[bold]", "a long label here"]) for _ in range(n_rows)],
                list(range(9990, 9990 + n_rows)))
    cols = Axis([rng.choice(["猫", " the", "x", "é"]) for _ in range(n_cols)],
                list(range(99990, 99990 + n_cols)))
    matrix = [[None if rng.random() < 0.2 else rng.random() for _ in range(n_cols)]
              for _ in range(n_rows)]
    args = ("T", rows, cols, matrix, 3, 0.0, 1.0)
    for colour in (False, True):
        old = rendered(lambda c: _old_heatmap(c, *args), width, colour)
        new = streamed(lambda c: render_heatmap(c, *args), width, colour)
        assert styled_chars(new) == styled_chars(old)
        assert styled_chars(rendered(lambda c: render_heatmap(c, *args), width, colour)) == \
            styled_chars(old)  # each character in the same colour (runs of one colour are merged)
        assert max(cell_len(line) for line in Text.from_ansi(new).plain.splitlines()) <= width
        # Side by side (as `compare` lays heatmaps out), the lines measure as one Text did.
        side = rendered(lambda c: Columns([render_heatmap(c, *args), render_heatmap(c, *args)]),
                        width, colour)
        assert styled_chars(side) == styled_chars(rendered(
            lambda c: Columns([_old_heatmap(c, *args), _old_heatmap(c, *args)]), width, colour))
