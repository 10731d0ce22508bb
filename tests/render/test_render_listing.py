"""Streamed listings print the same lines as the whole Rich table did."""

from __future__ import annotations

import io
import os
import random
import re

import pytest
from rich import box
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.style import Style
from rich.table import Table
from rich.text import Text

from attncli.core.pieces import TokenPiece
from attncli.core.tokens import token_bounds, token_chunks, tokenize
from attncli.render.draw import listing
from attncli.render.draw.listing import Cell, Column, Listing, column_widths
from attncli.render.draw.streamed import print_streamed
from attncli.render.draw.token_table import print_token_stream, print_tokens
from tests.conftest import make_console, styled_chars

TEXTS = ["Your journey starts with one step", "Hello 猫吃鱼 ================ world\n\tx",
         "a", " [bold]markup[/bold] " * 30, "word " * 700 + "=" * 64 + " end", ""]


def render_tokens(pieces: list[TokenPiece], encoding: str) -> RenderableType:
    """The reference: the tokens as the one whole Rich table attncli printed before streaming."""
    table = Table(title=escape(f"{len(pieces)} tokens ({encoding})"), title_justify="left",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("index", justify="right")
    table.add_column("id", justify="right")
    table.add_column("token", overflow="fold")
    table.add_column("bytes", overflow="fold", style="dim")
    for p in pieces:
        table.add_row(str(p.index), str(p.id), Text(p.label),
                      p.data.hex(" ") if p.data is not None else "")
    return table


def _old(text: str, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(render_tokens(tokenize(text, "gpt2", False), "gpt2"))
    return console.file.getvalue()  # type: ignore[attr-defined]


def _new(text: str, width: int, **options: object) -> str:
    console = Console(file=io.StringIO(), width=width, **options)  # type: ignore[arg-type]
    print_tokens(console, tokenize(text, "gpt2", False), "gpt2")
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.parametrize("width", [24, 40, 80, 200])
@pytest.mark.parametrize("text", TEXTS)
def test_streamed_tokens_equal_the_whole_table(text: str, width: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 7)
    assert _new(text, width, color_system=None) == _old(text, width)


def test_colour_dims_the_bytes_and_keeps_the_text() -> None:
    text = "Hello 猫吃鱼 world"
    coloured = _new(text, 80, color_system="truecolor", force_terminal=True)
    assert "\x1b[2m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == _old(text, 80)


def _streamed(text: str, width: int, first: int, size: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    print_token_stream(console, token_chunks(text, first=first, size=size), "gpt2",
                       token_bounds(text))
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [24, 80])
@pytest.mark.parametrize("text", TEXTS)
def test_a_text_of_one_chunk_streams_as_the_whole_table(text: str, width: int) -> None:
    assert _streamed(text, width, 10**6, 10**6) == _new(text, width, color_system=None)


def test_a_streamed_table_takes_its_widths_from_bounds_and_the_first_chunk() -> None:
    # Index and id are as wide as the largest possible (19 bytes: 2 digits; id 50256: 5), label
    # and bytes as the first chunk's widest ("Hi 猫": "猫[1/3]", "20 e7"), then widened towards
    # 16 cells and 16 bytes while the width allows.
    lines = ["tokens (gpt2)                                               ",
             "index      id   token              bytes                    ",
             "────────────────────────────────────────────────────────────",
             "    0   17250   Hi                 48 69                    ",
             "    1   13328    猫[1/3]           20 e7                    ",
             "    2     234   猫[2/3]            8c                       ",
             "    3     104   猫[3/3]            ab                       ",
             "    4     612    there             20 74 68 65 72 65        ",
             "    5      11   ,                  2c                       ",
             "    6     685    [                 20 5b                    ",
             "    7   36575   bold               62 6f 6c 64              ",
             "    8      60   ]                  5d                       ",
             "    9      87   x                  78                       ",
             "10 tokens (gpt2)"]
    assert _streamed("Hi 猫 there, [bold]x", 60, 3, 3) == "\n".join(lines) + "\n"


@pytest.mark.parametrize("width", [24, 40, 80])
def test_a_long_streamed_table_fits_and_counts(width: int) -> None:
    text = "word 猫 " * 300 + "a much longer stretch of words arrives later " * 20
    out = _streamed(text, width, 50, 200).splitlines()
    pieces = tokenize(text, "gpt2", False)
    assert out[0].startswith("tokens (gpt2)") and out[-1] == f"{len(pieces)} tokens (gpt2)"
    assert all(cell_len(line) <= width for line in out)
    firsts = [int(line.split()[0]) for line in out[3:-1] if line[:6].strip().isdigit()]
    assert firsts == list(range(len(pieces)))


def test_a_later_cell_wider_than_the_first_chunks_folds() -> None:
    out = _streamed("Hi 猫 there, [bold]x", 30, 3, 3).splitlines()
    # At 30 cells there is no room beyond the first chunk's "20 e7", so " there" folds.
    assert out[10:13] == ["    4     612    there   20 74",
                          "                         68 65",
                          "                         72 65"]


SEEDS = int(os.environ.get("ATTNCLI_LISTING_SEEDS", "40"))
CELLS = ["", "a", "word", "two words", " lead", "trail ", "猫吃鱼", "🙂x", "[bold]x[/]", "a\rb",
         "tab\there", "bell\x07", "nul\x00x", "zw\u200bsp", "nb\u00a0sp\u3000", "two\nlines",
         "123456789012345678", "é",
         "a much longer cell that will have to fold or be cut"]


def _random_listing(seed: int) -> tuple[list[Column], list[list[Cell]], tuple[int, int]]:
    rng = random.Random(seed)
    columns = [Column(rng.choice(["h", "header", "猫 col", ""]),
                      rng.choice(["left", "right", "center"]),
                      rng.choice(["", "dim", "bold", Style(color="red")]),
                      fold=rng.random() < 0.3, no_wrap=rng.random() < 0.3)
               for _ in range(rng.randint(1, 5))]
    rows: list[list[Cell]] = []
    for _ in range(rng.randint(0, 12)):
        row: list[Cell] = []
        for _ in columns:
            cell = rng.choice(CELLS)
            if rng.random() < 0.5:
                text = Text(cell, style=rng.choice(["", "italic", Style(bgcolor="blue")]),
                            justify=rng.choice([None, "left", "right", "center"]))
                if text.plain:
                    text.stylize("underline", 0, rng.randint(1, len(text.plain)))
                row.append(text)
            else:
                row.append(cell)
        rows.append(row)
    return columns, rows, rng.choice([(1, 1), (1, 0), (0, 1), (2, 0)])


@pytest.mark.parametrize("width", [20, 40, 80])
@pytest.mark.parametrize("seed", range(SEEDS))
def test_a_listing_prints_what_a_whole_rich_table_prints(seed: int, width: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 3)
    columns, rows, pad = _random_listing(seed)
    for colour in (False, True):
        console = make_console(width, colour)
        widest = [max((Measurement.get(console, console.options, Text(c) if isinstance(c, str)
                                       else c).maximum for c in column), default=0)
                  for column in zip(*rows, strict=True)] or [0] * len(columns)
        widths = column_widths(console, "title", columns, widest, rows, pad)
        print_streamed(console, Listing(columns, widths, lambda: rows, "title", pad))
        whole = make_console(width, colour)
        table = _rich_table(columns, pad)
        for row in rows:
            table.add_row(*(c if isinstance(c, Text) else Text(c) for c in row))
        whole.print(table)
        got, want = console.file.getvalue(), whole.file.getvalue()  # type: ignore[attr-defined]
        assert styled_chars(got) == styled_chars(want) if colour else got == want


def _rich_table(columns: list[Column], pad: tuple[int, int]) -> Table:
    table = Table(title="title", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, padding=(0, pad[1], 0, pad[0]))
    for column in columns:
        table.add_column(column.header, justify=column.justify,  # type: ignore[arg-type]
                         style=column.style or None, no_wrap=column.no_wrap,
                         overflow="fold" if column.fold else "ellipsis")
    return table


def test_the_private_rich_widths_column_widths_reads_are_there() -> None:
    """column_widths asks a Rich Table its column widths through Table._extra_width and
    Table._calculate_column_widths (Rich has no public way to): an upgrade that renames them or
    changes what they give fails here. They give each column's width, padding included, as the
    table then draws it."""
    console = Console(width=30, file=io.StringIO(), color_system=None)
    table = Table("a", "bb", box=box.ASCII)
    table.add_row("x" * 40, "y")
    room = console.options.update_width(console.width - table._extra_width)
    widths = table._calculate_column_widths(console, room)
    assert isinstance(widths, list) and sum(widths) + table._extra_width == 30
    console.print(table)
    header = console.file.getvalue().splitlines()[1]  # type: ignore[attr-defined]
    assert [len(part) for part in header.strip("|").split("|")] == widths
