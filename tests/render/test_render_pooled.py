"""The long run's pooled heatmap on a log range: the rows after row 0 and the sink keep their
structure instead of one flat colour."""

from __future__ import annotations

import math
import re

import pytest
from rich.console import Console

from attncli.core.request import Extract, Request
from attncli.core.result import PooledMap
from attncli.long.path import run
from attncli.render.draw.colors import log_legend, short_number
from attncli.render.draw.palette import lightness
from attncli.render.draw.pooled import render_pooled
from attncli.render.draw.scales import DECADES, LogRange, log_range
from tests.conftest import make_console, styled_chars
from tests.tolerance import assert_near

TEXT = "A long text, where every query spreads its weight over the keys before it. " * 40


@pytest.fixture(scope="module")
def pmap() -> PooledMap:
    result = run(Request(text=TEXT, impl="tiled"), Extract(maps=True, grid=64))
    assert result.long is not None and len(result.tokens) > 600
    return result.long.maps[0]


def test_log_range_steps_by_ratios() -> None:
    span = LogRange(low=0.001, top=1.0)
    assert span.fraction(0.001) == 0.0 and span.fraction(1.0) == 1.0
    assert_near(span.fraction(math.sqrt(0.001)), 0.5)
    assert_near(span.fraction(0.01) - span.fraction(0.001),
                span.fraction(1.0) - span.fraction(0.1))
    assert span.fraction(0.0) == 0.0 and span.fraction(5.0) == 1.0
    assert LogRange(low=0.5, top=0.5).fraction(0.5) == 1.0


def test_log_range_spans_at_most_its_decades_and_says_when_it_cut() -> None:
    assert log_range([[[0.5, None, 0.01], [0.0, 0.2, None]]]) == LogRange(0.01, 0.5, False)
    tiny = log_range([[[1.0, 1e-9]]])
    assert_near(tiny.low, 10.0**-DECADES)
    assert tiny.clipped
    assert log_range([[[None]]], top=1.0) == LogRange(1.0, 1.0, False)
    assert log_range([[[0.3, 0.1]]], top=1.0).top == 1.0


def _cells(pmap: PooledMap, console: Console) -> list[list[str]]:
    """The colour of each heatmap cell, row by row (the masked mark left out)."""
    console.print(render_pooled(console, pmap, 1, "max"))
    lines: list[list[str]] = [[]]
    for ch, style in styled_chars(console.file.getvalue()):
        if ch == "\n":
            lines.append([])
        elif ch == "█" and "on " not in style:
            lines[-1].append(style)
    rows = [line for line in lines if line]
    return rows[:-1]  # the last is the legend's ramp


def _star(style: str) -> float:
    r, g, b = (int(style[k:k + 2], 16) for k in (1, 3, 5))
    return lightness((r, g, b))


def test_pooled_map_of_a_long_causal_run_is_not_one_flat_colour(pmap: PooledMap) -> None:
    values = [v for row in pmap.values for v in row if v is not None]
    top = max(values)
    assert_near(top, 1.0)  # row 0's one weight
    # The trap: on a linear 0..1 range nearly every block sits in the lowest tenth.
    assert sum(v < 0.1 * top for v in values) / len(values) > 0.9
    rows = _cells(pmap, make_console(80, colour=True))
    assert len(rows) > 20
    rest = [style for row in rows[1:] for style in row[1:]]  # leave out row 0 and the sink
    stars = [_star(style) for style in rest]
    most = max(rest.count(style) for style in set(rest))
    assert len(set(rest)) >= 12 and most / len(rest) < 0.2
    # The rest spreads over a good part of the ramp's lightness (viridis: L* 15 … 91).
    assert max(stars) - min(stars) > 25
    # Queries further on hold smaller weights (about 1/i): their rows are darker, in order.
    means = [sum(map(_star, row)) / len(row) for row in rows[1:]]
    assert means[0] > means[len(means) // 2] > means[-1]


def test_the_legend_names_the_log_range() -> None:
    line = log_legend(4.1e-4, 1.0, 3, masked=True, depth=None, scale="shared").plain
    assert re.fullmatch(r"shade 4\.1e-04 \[ ░▒▓█\] 1\.000 +log scale \(×7 a step\) +· masked "
                        r"\(future token\) +shared scale", line), line
    assert "less as 0.010" in log_legend(0.01, 1.0, 3, clipped=True).plain
    assert short_number(0.25, 3) == "0.250" and short_number(2e-5, 3) == "2.0e-05"
