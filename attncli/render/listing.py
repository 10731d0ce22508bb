"""Long listings printed as they are formatted: column widths from the data, rows in chunks.

The lines are those Rich prints for the whole table (box SIMPLE_HEAD, no edge, cells padded by
one space, none at the table's edges), but no table of every row is ever built or measured:
the first line appears at once, memory stays flat, and a closed pipe stops the work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from attncli.core.tokens import TokenPiece

CHUNK_ROWS = 512  # rows formatted before they are written


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


def _print_rows(console: Console, columns: Sequence[Column], widths: Sequence[int],
                pads: list[tuple[int, int]], rows: list[Sequence[str]], plain: bool) -> None:
    lines: list[Text | str] = []
    for row in rows:
        sizes = [cell_len(cell) for cell in row]
        if any(s > w for s, w in zip(sizes, widths, strict=True)) or any("\n" in c for c in row):
            _flush(console, lines, plain)
            lines = []
            one = _table(None, columns, widths, show_header=False)
            one.add_row(*(Text(cell) for cell in row))
            console.print(one)
            continue
        cells = []
        for cell, size, width, (left, right), column in zip(row, sizes, widths, pads, columns,
                                                            strict=True):
            gap = " " * (width - size)
            body = gap + cell if column.justify == "right" else cell + gap
            cells.append((" " * left + body + " " * right, column.style))
        if plain:
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
    widest = [0, 0, 0, 0]
    extremes: list[tuple[str, str, str, str]] = []
    for p in pieces:
        cells = _token_cells(p)
        sizes = [cell_len(c) for c in cells]
        if any(s > w for s, w in zip(sizes, widest, strict=True)):
            widest = [max(s, w) for s, w in zip(sizes, widest, strict=True)]
            extremes.append(cells)
    # The longest word of a label decides how narrow its folding column may get.
    longest = max(pieces, key=lambda p: max(map(cell_len, p.label.split() or [""])),
                  default=None)
    if longest is not None:
        extremes.append(_token_cells(longest))
    widths = column_widths(console, title, TOKEN_COLUMNS, widest, extremes)
    print_listing(console, title, TOKEN_COLUMNS, widths, map(_token_cells, pieces))
