"""The `tokens` table (index, id, label, bytes), printed as it is formatted (draw/listing.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from attncli.render.draw.listing import Column, column_widths, make_room, print_listing, width_of

if TYPE_CHECKING:
    from attncli.core.pieces import TokenPiece

# Room a streamed token table keeps for labels and bytes beyond its first chunk's (as far as the
# width allows): most GPT-2 tokens hold up to 16 characters, and a wider cell folds.
LABEL_ROOM, BYTES_ROOM = 16, 16
TOKEN_COLUMNS = (Column("index", "right"), Column("id", "right"), Column("token", fold=True),
                 Column("bytes", style="dim", fold=True))


def _token_cells(p: TokenPiece) -> tuple[str, str, str, str]:
    return (str(p.index), str(p.id), p.label, p.data.hex(" ") if p.data is not None else "")


def print_tokens(console: Console, pieces: Sequence[TokenPiece], encoding: str) -> None:
    """The tokenisation as a table (index, id, label, bytes), printed as it is formatted."""
    title = escape(f"{len(pieces)} tokens ({encoding})")
    widths = _token_widths(console, title, pieces)
    print_listing(console, title, TOKEN_COLUMNS, widths, map(_token_cells, pieces))


def print_token_stream(console: Console, chunks: Iterator[list[TokenPiece]], encoding: str,
                       bounds: tuple[int, int]) -> None:
    """The tokenisation as a table, its rows printed while later chunks are still tokenised.

    A text of one chunk prints as print_tokens does. A longer one cannot know its widest cells
    before its first row: the index and id columns take the width of bounds (the largest index
    and id possible), the label and bytes columns that of the first chunk (a wider cell later
    folds), and the token count comes last, under the table.
    """
    first = next(chunks, [])
    second = next(chunks, None)
    if second is None:
        print_tokens(console, first, encoding)
        return
    title = escape(f"tokens ({encoding})")
    widths = _token_widths(console, title, first, (str(bounds[0]), str(bounds[1]), "", ""))
    make_room(widths, console.width, {2: LABEL_ROOM, 3: 3 * BYTES_ROOM - 1})
    count = 0

    def rows() -> Iterator[tuple[str, str, str, str]]:
        nonlocal count
        for chunk in chain([first, second], chunks):
            count += len(chunk)
            yield from map(_token_cells, chunk)

    print_listing(console, title, TOKEN_COLUMNS, widths, rows())
    console.print(escape(f"{count} tokens ({encoding})"), soft_wrap=True)


def _token_widths(console: Console, title: str, pieces: Sequence[TokenPiece],
                  bound: tuple[str, str, str, str] | None = None) -> list[int]:
    """Column widths of the token table whose rows are pieces (and bound, a row not printed)."""
    widest = [0, 0, 0, 0]
    extremes: list[tuple[str, str, str, str]] = []
    if pieces:
        label_w = [width_of(p.label) for p in pieces]
        # The rows holding each column's widest cell, and the label with the longest word
        # (which decides how narrow a folding column may get).
        picks = [pieces[-1], max(pieces, key=lambda p: p.id or 0),
                 pieces[max(range(len(pieces)), key=label_w.__getitem__)],
                 max(pieces, key=lambda p: len(p.data or b"")),
                 max(pieces, key=lambda p: max(map(width_of, p.label.split() or [""])))]
        extremes = [_token_cells(p) for p in picks]
    if bound is not None:
        extremes.append(bound)
    if extremes:
        widest = [max(width_of(row[k]) for row in extremes) for k in range(4)]
    return column_widths(console, title, TOKEN_COLUMNS, widest, extremes)
