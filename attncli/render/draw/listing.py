"""Long listings printed as they are formatted: column widths from the data, rows in chunks.

The lines are those Rich prints for the whole table (box SIMPLE_HEAD, no edge, cells padded by
one space, none at the table's edges), but no table of every row is ever built or measured:
the first line appears at once, memory stays flat, and a closed pipe stops the work.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from attncli.core.tokens import TokenPiece


CHUNK_ROWS = 512  # rows formatted before they are written
# Room a streamed token table keeps for labels and bytes beyond its first chunk's (as far as the
# width allows): most GPT-2 tokens hold up to 16 characters, and a wider cell folds.
LABEL_ROOM, BYTES_ROOM = 16, 16


@dataclass(frozen=True)
class Column:
    """One column of a listing: its header, its alignment, and its cells' style."""

    header: str
    justify: str = "left"  # "left" or "right"
    style: str = ""
    fold: bool = False  # long cells fold onto more lines (else the column never shrinks)


def _table(title: str | None, columns: Sequence[Column], widths: Sequence[int] | None = None,
           show_header: bool = True) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, show_header=show_header)
    for k, column in enumerate(columns):
        table.add_column(column.header, justify=column.justify,  # type: ignore[arg-type]
                         style=column.style or None, overflow="fold" if column.fold else "ellipsis",
                         width=None if widths is None else widths[k])
    return table


def _pads(count: int) -> list[tuple[int, int]]:
    """(left, right) padding of each column: one space, none at the table's two edges."""
    return [(0 if k == 0 else 1, 0 if k == count - 1 else 1) for k in range(count)]


def column_widths(console: Console, title: str | None, columns: Sequence[Column],
                  widest: Sequence[int], extremes: Sequence[Sequence[str]]) -> list[int]:
    """Content widths Rich gives the whole table whose widest cells are widest.

    When the table fits, each is its widest cell (or header); otherwise Rich's own shrinking
    is asked of a table holding only extremes, the rows with each column's widest cell and
    longest word, which measure as the whole table does.
    """
    widths = [max(w, cell_len(c.header)) for w, c in zip(widest, columns, strict=True)]
    total = sum(widths) + sum(a + b for a, b in _pads(len(columns))) + len(columns) - 1
    if total <= console.width:
        return widths
    table = _table(title, columns)
    for row in extremes:
        table.add_row(*(Text(cell) for cell in row))
    room = console.options.update_width(console.width - table._extra_width)
    full = table._calculate_column_widths(console, room)
    return [w - a - b for w, (a, b) in zip(full, _pads(len(columns)), strict=True)]


def print_listing(console: Console, title: str | None, columns: Sequence[Column],
                  widths: Sequence[int], rows: Iterable[Sequence[str]]) -> None:
    """Print the title, the header and the rows, CHUNK_ROWS at a time, as one table would."""
    console.print(_table(title, columns, widths))
    pads = _pads(len(columns))
    plain = console.color_system is None
    batch: list[Sequence[str]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= CHUNK_ROWS:
            _print_rows(console, columns, widths, pads, batch, plain)
            batch = []
    _print_rows(console, columns, widths, pads, batch, plain)


def width_of(cell: str) -> int:
    """Terminal cells a string takes: its length when ASCII (the common case, in C)."""
    return len(cell) if cell.isascii() else cell_len(cell)


def _line(row: Sequence[str], widths: Sequence[int], columns: Sequence[Column],
          pads: list[tuple[int, int]]) -> list[tuple[str, str]] | None:
    """The padded cells of a one-line row with their styles; None when a cell must fold."""
    cells = []
    for cell, width, (left, right), column in zip(row, widths, pads, columns, strict=True):
        gap = width - width_of(cell)
        if gap < 0 or "\n" in cell:
            return None
        body = " " * gap + cell if column.justify == "right" else cell + " " * gap
        cells.append((" " * left + body + " " * right, column.style))
    return cells


def _print_rows(console: Console, columns: Sequence[Column], widths: Sequence[int],
                pads: list[tuple[int, int]], rows: list[Sequence[str]], plain: bool) -> None:
    lines: list[Text | str] = []
    for row in rows:
        cells = _line(row, widths, columns, pads)
        if cells is None:  # a row that folds onto more lines: Rich lays it out, as before
            _flush(console, lines, plain)
            lines = []
            one = _table(None, columns, widths, show_header=False)
            one.add_row(*(Text(cell) for cell in row))
            console.print(one)
        elif plain:
            lines.append(" ".join(text for text, _ in cells))
        else:
            line = Text()
            for k, (text, style) in enumerate(cells):
                line.append(" " if k else "")  # the divider between two columns
                line.append(text, style=style or None)
            lines.append(line)
    _flush(console, lines, plain)


def _flush(console: Console, lines: list[Text | str], plain: bool) -> None:
    if not lines:
        return
    if plain:
        console.file.write("\n".join(lines) + "\n")  # type: ignore[arg-type]
        console.file.flush()
    else:
        console.print(Text("\n").join(lines), soft_wrap=True)  # type: ignore[arg-type]


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
    _make_room(widths, console.width, {2: LABEL_ROOM, 3: 3 * BYTES_ROOM - 1})
    count = 0

    def rows() -> Iterator[tuple[str, str, str, str]]:
        nonlocal count
        for chunk in chain([first, second], chunks):
            count += len(chunk)
            yield from map(_token_cells, chunk)

    print_listing(console, title, TOKEN_COLUMNS, widths, rows())
    console.print(escape(f"{count} tokens ({encoding})"), soft_wrap=True)


def _make_room(widths: list[int], width: int, room: dict[int, int]) -> None:
    """Widen the columns of room towards their widths there, in order, as far as width allows."""
    spare = width - sum(widths) - sum(a + b for a, b in _pads(len(widths))) - (len(widths) - 1)
    for k, target in room.items():
        grow = max(min(spare, target - widths[k]), 0)
        widths[k] += grow
        spare -= grow


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
