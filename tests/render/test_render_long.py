"""The long-run renderers: pooled heatmaps gathered further, top-k tables fitted to the width."""

from __future__ import annotations

import re

import pytest
from rich import box
from rich.cells import cell_len
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from attncli.core.display import Display
from attncli.core.request import Extract, Request
from attncli.core.result import Result
from attncli.long.path import run
from attncli.render.draw import listing
from attncli.render.draw.colors import cell_style
from attncli.render.draw.palette import depth_of
from attncli.render.draw.pooled import groups, layout, repool
from attncli.render.draw.streamed import print_streamed
from attncli.render.draw.tables import shorten, table_width
from attncli.render.long import _TopK, _which, render_long, render_top_k, top_width
from tests.conftest import make_console, rendered, streamed, styled_chars
from tests.tolerance import assert_near

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
        assert_near(got, want, equal_nan=True)  # None where a cell is masked, on both sides


def test_layout_keeps_the_picture_square_in_tokens_and_within_the_width() -> None:
    pmap = long_run().long.maps[0]  # 451 tokens in 113 blocks of 4
    assert len(pmap.edges) - 1 == 113
    assert layout(pmap, 80) == (1, 2, 4)  # 57 columns of 8 keys, rows of 16 queries
    assert layout(pmap, 300) == (2, 1, 1)


def test_no_colour_reads_with_shades_and_escaped_labels() -> None:
    result = long_run()
    out = rendered(lambda c: render_long(c, result, Display(rows=(0, 12))), width=80)
    assert max(len(line) for line in out.splitlines()) <= 80
    # The pooled map's log range (its row 0 holds 1.0), then the window's linear one.
    assert re.search(r"shade \S+ \[ ░▒▓█\] 1\.000 +log scale \(×\S+ a step\)", out), out
    assert "shade 0.0000 [ ░▒▓█] 1.0000" in out
    assert "shared scale" in out and "\x1b[" not in out
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
    assert "--top-keys 0: no keys kept" in out and "top-0" in out


def _top_table(result: Result, head: int, rows: range, ranks: int, limit: int,
               precision: int, depth: str | None) -> Table:
    """The reference: the top-k listing as the one whole Rich table attncli printed before."""
    index, weight = (result.long.stats["top_k"][name][head] for name in ("index", "weight"))
    labels = result.labels
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    table.add_column("query", no_wrap=True)
    for r in range(ranks):
        table.add_column(f"key {r + 1}", no_wrap=True)
    for i in rows:
        cells = [Text(f"{i} {shorten(labels[i], limit)}", style="bold")]
        for j, w in zip(index[i][:ranks], weight[i][:ranks], strict=True):
            label = labels[j].strip() or labels[j]
            cell = Text("" if j < 0 else f"{shorten(label, limit)}({j}) ")
            if j >= 0:
                cell.append(f"{w:.{precision}f}",
                            style=cell_style(w, 0.0, 1.0, depth) if depth is not None else "")
            cells.append(cell)
        table.add_row(*cells)
    return table


def _old_top_k(console: Console, result: Result, head: int, options: Display) -> Group:
    """The reference render_top_k: the same fitting, one whole table."""
    k = len(result.long.stats["top_k"]["index"][head][0])
    start, stop = options.rows or (0, min(len(result.tokens), 20))
    rows = range(start, stop)
    p = min(options.precision, 2)
    tries = [(k, 10, options.precision), (k, 10, p), (k, 6, p),
             *((ranks, 6, p) for ranks in range(k - 1, 0, -1)), (1, 3, p)]
    for ranks, limit, p in tries:
        if top_width(result, head, rows, ranks, limit, p) <= console.width:
            break
    title = Text(f"Top {k} keys per query{_which(result, head)} (label(index) weight)",
                 style="bold")
    notes = []
    if options.rows is None and stop < len(result.tokens):
        notes.append(f"queries {start}–{stop - 1} of {len(result.tokens):,}; see others with "
                     f"--rows a:b (e.g. --rows {stop}:{min(stop + 20, len(result.tokens))})"
                     ", all of them with --json")
    if ranks < k:
        notes.append(f"the top {ranks} of {k} keys fit {console.width} columns; --json has all")
    return Group(title, _top_table(result, head, rows, ranks, limit, p, depth_of(console)),
                 *(Text(note, style="italic") for note in notes))


TOP_TEXT = "猫吃鱼 [bold] " * 30 + "a long-winded-word " * 10 + "🙂 naïve\tcafé " * 5


@pytest.fixture(scope="module")
def top_result() -> Result:
    result = run(Request(text=TOP_TEXT, variant="multihead", heads=2, impl="tiled", top_k=4))
    assert result.long is not None
    return result


@pytest.mark.parametrize("variant", ["causal", "multihead"])
def test_top_k_width_counted_equals_what_rich_measures(variant: str) -> None:
    result = run(Request(text="猫吃鱼 [bold] " * 30 + "a long-winded-word " * 10,
                         variant=variant, impl="tiled", top_k=4))
    assert result.long is not None
    console = Console(width=80, color_system=None)
    for rows in (range(0, 3), range(5, 40), range(len(result.tokens) - 7, len(result.tokens))):
        for ranks, limit, precision in ((4, 10, 4), (3, 6, 2), (1, 3, 0), (2, 16, 1)):
            table = _top_table(result, 0, rows, ranks, limit, precision, None)
            assert top_width(result, 0, rows, ranks, limit, precision) == table_width(console,
                                                                                     table)


ROWS = [None, (0, 3), (5, 60), (200, 240), (0, 1000)]


@pytest.mark.slow
@pytest.mark.parametrize("width", [20, 40, 80, 200])
@pytest.mark.parametrize("rows", ROWS)
def test_the_streamed_top_k_prints_what_the_whole_table_did(
        top_result: Result, width: int, rows: tuple[int, int] | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 7)
    options = Display(rows=None if rows is None else (rows[0], min(rows[1],
                                                                   len(top_result.tokens))))
    for head in (0, 1):
        old = rendered(lambda c, h=head: _old_top_k(c, top_result, h, options), width)
        assert streamed(lambda c, h=head: render_top_k(c, top_result, h, options), width) == old
        assert rendered(lambda c, h=head: render_top_k(c, top_result, h, options), width) == old
        if width >= 40:
            assert max(cell_len(line) for line in old.splitlines()) <= width


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_streamed_top_k_keeps_every_colour(top_result: Result, width: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 5)
    options = Display(rows=(0, 60))
    old = rendered(lambda c: _old_top_k(c, top_result, 1, options), width, colour=True)
    new = streamed(lambda c: render_top_k(c, top_result, 1, options), width, colour=True)
    assert "\x1b[" in new and "48;2;" in new  # weights on coloured cells
    assert styled_chars(new) == styled_chars(old)
    again = rendered(lambda c: render_top_k(c, top_result, 1, options), width, colour=True)
    assert styled_chars(again) == styled_chars(old)


def test_the_first_rows_go_out_before_the_rest_are_formatted(
        top_result: Result, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 8)
    made: list[int] = []
    real = _TopK.plain_cells

    def cells(self: _TopK, i: int, *args: object) -> list[str]:
        made.append(i)
        if len(made) > 8:
            raise RuntimeError("stop")
        return real(self, i, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_TopK, "plain_cells", cells)
    console = make_console(80)
    with pytest.raises(RuntimeError, match="stop"):
        print_streamed(console, render_top_k(console, top_result, 0, Display(rows=(0, 400))))
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0].startswith("Top 4 keys per query") and lines[1].startswith("query")
    assert [line.split()[0] for line in lines[3:]] == [str(i) for i in range(8)]


def test_a_long_run_prints_its_heads_one_after_another(top_result: Result,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Head 1's listing is made only once head 0's rows are out.
    made: list[int] = []
    real = _TopK.__init__

    def init(self: _TopK, result: Result, head: int, rows: range) -> None:
        made.append(head)
        real(self, result, head, rows)

    monkeypatch.setattr(_TopK, "__init__", init)
    console = make_console(100)
    parts = render_long(console, top_result, Display(rows=(0, 30)))
    assert made == []
    print_streamed(console, parts)
    assert made and made == sorted(made) and set(made) == {0, 1}
