"""`attncli heads`' table of measures prints in chunks, as the whole table printed it."""

from __future__ import annotations

import random

import pytest
from rich import box
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.core.result import ModelInfo
from attncli.records.heads import HeadsResult
from attncli.render import heads as heads_module
from attncli.render.draw import listing
from attncli.render.draw.colors import cell_style
from attncli.render.draw.palette import depth_of
from attncli.render.draw.streamed import print_streamed
from attncli.render.heads import MEASURE_HELP, render_heads, render_measures
from tests.conftest import make_console, rendered, streamed, styled_chars


def _old_measures(result: HeadsResult, precision: int, depth: str | None) -> RenderableType:
    """The reference: the measures as the one whole Rich table attncli printed before."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("layer", justify="right")
    table.add_column("head", justify="right")
    names = list(MEASURE_HELP)
    for name in names:
        table.add_column(name, justify="right")
    ranges = {name: (min(m[name] for m in result.measures), max(m[name] for m in result.measures))
              for name in names}
    for m in result.measures:
        cells = [Text(str(m["layer"])), Text(str(m["head"]))]
        for name in names:
            low, high = (0.0, 1.0) if name in ("prev", "first", "self") else ranges[name]
            style = cell_style(m[name], low, high, depth) if depth is not None else ""
            cells.append(Text(f"{m[name]:.{precision}f}", style=style))
        table.add_row(*cells)
    notes = Text("\n".join(f"{name}: {text}" for name, text in MEASURE_HELP.items()),
                 style="dim")
    return Group(table, notes)


def _heads(layers: int, heads: int, seed: int = 0) -> HeadsResult:
    rng = random.Random(seed)
    measures = [{"layer": layer, "head": head, "entropy": rng.uniform(0, 12),
                 "prev": rng.random(), "first": rng.random(), "self": rng.random(),
                 "distance": rng.uniform(0, 4000)} for layer in range(layers)
                for head in range(heads)]
    rng.shuffle(measures)  # as --sort leaves them
    thumbs = [[[[rng.random() for _ in range(6)] for _ in range(6)] for _ in range(heads)]
              for _ in range(layers)]
    return HeadsResult(config={"num_tokens": 6, "sort": "entropy"},
                       model=ModelInfo("m", layers, heads, 64), tokens=[], measures=measures,
                       thumbnails=thumbs)


@pytest.mark.slow
@pytest.mark.parametrize("width", [20, 40, 80, 200])
@pytest.mark.parametrize(("layers", "heads", "precision"), [(1, 1, 3), (3, 4, 0), (24, 16, 5)])
def test_the_streamed_measures_print_what_the_whole_table_did(
        layers: int, heads: int, precision: int, width: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 9)
    result = _heads(layers, heads)
    old = rendered(lambda c: _old_measures(result, precision, depth_of(c)), width)
    if "\u2026" in old:
        # Too narrow for the whole table: the old table cut its numbers to "…"; now it is shown
        # in parts of whole columns (render/draw/fitted.py), streamed as it is rendered whole,
        # with every number in full.
        new_plain = streamed(lambda c: render_measures(c, result, precision), width)
        if max(cell_len(line) for line in new_plain.splitlines()) <= width:
            assert new_plain == rendered(lambda c: render_measures(c, result, precision), width)
        # else the key columns and one number are wider than the terminal (20 columns): the
        # command streams whole numbers and the terminal wraps them, where a Rich console's
        # print of the same renderable crops its lines to the console's width.
        cells = new_plain.split()
        for m in result.measures:
            for name in MEASURE_HELP:
                assert f"{m[name]:.{precision}f}" in cells
        return
    assert streamed(lambda c: render_measures(c, result, precision), width) == old
    assert rendered(lambda c: render_measures(c, result, precision), width) == old
    if width >= 80:
        assert max(cell_len(line) for line in old.splitlines()) <= width
    coloured = rendered(lambda c: _old_measures(result, precision, depth_of(c)), width, True)
    new = streamed(lambda c: render_measures(c, result, precision), width, colour=True)
    assert styled_chars(new) == styled_chars(coloured)


def test_the_first_rows_go_out_before_the_rest_are_formatted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 10)
    result = _heads(80, 64)  # 5,120 rows
    calls = []

    def style(*args: object, **kw: object) -> object:
        calls.append(args)
        if len(calls) > 10 * 5:  # five coloured cells a row: past the first chunk
            raise RuntimeError("stop")
        return cell_style(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(heads_module, "cell_style", style)
    console = make_console(100, colour=True)
    with pytest.raises(RuntimeError, match="stop"):
        print_streamed(console, render_heads(console, result))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    plain = Text.from_ansi(out).plain.splitlines()
    header = next(k for k, line in enumerate(plain) if line.split()[:2] == ["layer", "head"])
    rows = plain[header + 2:]
    assert len(rows) == 10 and [line.split()[:2] for line in rows] == [
        [str(m["layer"]), str(m["head"])] for m in result.measures[:10]]


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_whole_view_fits_the_width(width: int) -> None:
    result = _heads(12, 12)
    out = streamed(lambda c: render_heads(c, result), width)
    assert max(cell_len(line) for line in out.splitlines()) <= width
    assert out == rendered(lambda c: render_heads(c, result), width)
