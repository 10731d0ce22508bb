"""The long-run renderers: pooled heatmaps gathered further, top-k tables fitted to the width."""

from __future__ import annotations

import pytest

from attncli.core.display import Display
from attncli.core.request import Extract, Request
from attncli.core.result import Result
from attncli.long.path import run
from attncli.render.draw.pooled import groups, layout, repool
from attncli.render.long import render_long
from tests.conftest import rendered

TEXT = "A [bold]tag[/] and [red] brackets stay text. " * 30


def long_run(grid: int = 128, pool: str = "max", **extra: object) -> Result:
    req = Request(text=TEXT, impl="tiled", pool=pool, **extra)  # type: ignore[arg-type]
    result = run(req, Extract(maps=True, grid=grid))
    assert result.long is not None
    return result


@pytest.mark.parametrize("pool", ["max", "mean"])
def test_gathering_blocks_equals_pooling_into_bigger_blocks(pool: str) -> None:
    fine, coarse = long_run(grid=60, pool=pool), long_run(grid=30, pool=pool)
    n = len(fine.tokens)
    assert n == 451
    assert fine.long.maps[0].edges == [*range(0, n, 8), n]  # 8 tokens a block
    assert coarse.long.maps[0].edges == [*range(0, n, 16), n]  # 16 tokens: two fine blocks
    count = len(fine.long.maps[0].edges) - 1
    gathered = repool(fine.long.maps[0], groups(count, 2), groups(count, 2), pool)
    for got, want in zip(gathered, coarse.long.maps[0].values, strict=True):
        assert got == [None if w is None else pytest.approx(w, rel=1e-6) for w in want]


def test_layout_keeps_the_picture_square_in_tokens_and_within_the_width() -> None:
    pmap = long_run().long.maps[0]  # 451 tokens in 113 blocks of 4
    assert len(pmap.edges) - 1 == 113
    assert layout(pmap, 80) == (1, 2, 4)  # 57 columns of 8 keys, rows of 16 queries
    assert layout(pmap, 300) == (2, 1, 1)


def test_no_colour_reads_with_shades_and_escaped_labels() -> None:
    result = long_run()
    out = rendered(lambda c: render_long(c, result, Display(rows=(0, 12))), width=80)
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "shade 0.000 [ ░▒▓█] 1.000" in out and "shared scale" in out and "\x1b[" not in out
    # Token labels are text, never markup: "[", "bold" and "[/" show as they are.
    assert "2 bold     bold(2)" in out and "5 [/       ](3)" in out
    assert "Top 5 keys per query" in out and "queries 0–19" not in out


def test_colour_shows_blocks_in_colour() -> None:
    result = long_run()
    out = rendered(lambda c: render_long(c, result, Display()), width=80, colour=True)
    assert "\x1b[38;2;" in out and "colour 0" in out


def test_no_top_keys_says_so() -> None:
    result = long_run(top_k=0)
    out = rendered(lambda c: render_long(c, result, Display()), width=80)
    assert "--top-k 0: no keys kept" in out and "top-0" in out


@pytest.mark.parametrize("variant", ["causal", "multihead"])
def test_top_k_width_counted_equals_what_rich_measures(variant: str) -> None:
    from rich.console import Console

    from attncli.render.draw.tables import table_width
    from attncli.render.long import _top_table, top_width

    result = run(Request(text="猫吃鱼 [bold] " * 30 + "a long-winded-word " * 10,
                         variant=variant, impl="tiled", top_k=4))
    assert result.long is not None
    console = Console(width=80, color_system=None)
    for rows in (range(0, 3), range(5, 40), range(len(result.tokens) - 7, len(result.tokens))):
        for ranks, limit, precision in ((4, 10, 4), (3, 6, 2), (1, 3, 0), (2, 16, 1)):
            table = _top_table(result, 0, rows, ranks, limit, precision, False)
            assert top_width(result, 0, rows, ranks, limit, precision) == table_width(console,
                                                                                     table)
