"""Long listings printed as they are formatted: column widths from the data, rows in chunks.

The lines are those Rich prints for the whole table (box SIMPLE_HEAD, no edge, cells padded
on the left and right, none at the table's edges), but no table of every row is ever built or
measured: the first line appears at once, memory stays flat, and a closed pipe stops the work.
A cell is a str (plain text) or a Text, whose styles and justification are kept as a table
cell keeps them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.control import strip_control_codes
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Span, Text

CHUNK_ROWS = 512  # rows formatted before they are written
Cell = str | Text
Pad = tuple[int, int]  # spaces left and right of each cell (none at the table's two edges)


@dataclass(frozen=True)
class Column:
    """One column of a listing: its header, its alignment, and its cells' style."""

    header: str | Text
    justify: str = "left"  # "left", "right" or "center"
    style: str | Style = ""
    fold: bool = False  # long cells fold onto more lines (else the column never shrinks)
    no_wrap: bool = False  # a cell never wraps at its spaces (it is cut with an ellipsis)


def _table(title: str | None, columns: Sequence[Column], widths: Sequence[int] | None = None,
           show_header: bool = True, pad: Pad = (1, 1)) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, show_header=show_header, padding=(0, pad[1], 0, pad[0]))
    for k, column in enumerate(columns):
        table.add_column(column.header, justify=column.justify,  # type: ignore[arg-type]
                         style=column.style or None, overflow="fold" if column.fold else "ellipsis",
                         no_wrap=column.no_wrap, width=None if widths is None else widths[k])
    return table


def _pads(count: int, pad: Pad = (1, 1)) -> list[Pad]:
    """(left, right) padding of each column: pad, none at the table's two edges."""
    return [(0 if k == 0 else pad[0], 0 if k == count - 1 else pad[1]) for k in range(count)]


def listing_width(widths: Sequence[int], pad: Pad = (1, 1)) -> int:
    """Cells a listing with these content widths takes: cells, their padding, the dividers."""
    return sum(widths) + sum(a + b for a, b in _pads(len(widths), pad)) + len(widths) - 1


def column_widths(console: Console, title: str | None, columns: Sequence[Column],
                  widest: Sequence[int], extremes: Sequence[Sequence[Cell]],
                  pad: Pad = (1, 1)) -> list[int]:
    """Content widths Rich gives the whole table whose widest cells are widest.

    When the table fits, each is its widest cell (or header); otherwise Rich's own shrinking
    is asked of a table holding only extremes, the rows with each column's widest cell and
    longest word, which measure as the whole table does.
    """
    widths = [max(w, *(cell_len(line) for line in str(c.header).split("\n")))
              for w, c in zip(widest, columns, strict=True)]
    if listing_width(widths, pad) <= console.width:
        return widths
    table = _table(title, columns, pad=pad)
    for row in extremes:
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    room = console.options.update_width(console.width - table._extra_width)
    full = table._calculate_column_widths(console, room)
    return [w - a - b for w, (a, b) in zip(full, _pads(len(columns), pad), strict=True)]


def width_of(cell: str) -> int:
    """Terminal cells a string takes: its length when ASCII (the common case, in C)."""
    return len(cell) if cell.isascii() else cell_len(cell)


class Listing:
    """A table whose rows are formatted and printed CHUNK_ROWS at a time (print_to), and a Rich
    renderable that renders the same lines (for --save, or inside other renderables)."""

    def __init__(self, columns: Sequence[Column], widths: Sequence[int],
                 rows: Callable[[], Iterable[Sequence[Cell]]], title: str | None = None,
                 pad: Pad = (1, 1)) -> None:
        self.columns, self.widths, self.rows, self.title, self.pad = (
            columns, widths, rows, title, pad)

    def print_to(self, console: Console) -> None:
        """Print the title, the header and the rows, as they are formatted."""
        print_listing(console, self.title, self.columns, self.widths, self.rows(), self.pad)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if _squeezed(self.widths, self.pad):  # as in print_listing
            yield _whole(self.title, self.columns, self.rows(), self.pad)
            return
        yield _table(self.title, self.columns, self.widths, pad=self.pad)
        pads = _pads(len(self.columns), self.pad)
        for row in self.rows():
            line = _styled_line(row, self.widths, self.columns, pads)
            if line is None:
                yield _one_row(row, self.columns, self.widths, self.pad)
            else:
                yield from line.render(console)
                yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        width = listing_width(self.widths, self.pad)
        return Measurement(width, width)


def print_listing(console: Console, title: str | None, columns: Sequence[Column],
                  widths: Sequence[int], rows: Iterable[Sequence[Cell]],
                  pad: Pad = (1, 1)) -> None:
    """Print the title, the header and the rows, CHUNK_ROWS at a time, as one table would."""
    if _squeezed(widths, pad):
        # Rich squeezed a column to nothing (a terminal far too narrow for the columns): no
        # line can be laid out as it would, so the whole table is Rich's.
        console.print(_whole(title, columns, rows, pad))
        return
    console.print(_table(title, columns, widths, pad=pad))
    pads = _pads(len(columns), pad)
    plain = console.color_system is None
    batch: list[Sequence[Cell]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= CHUNK_ROWS:
            _print_rows(console, columns, widths, pads, batch, plain, pad)
            batch = []
    _print_rows(console, columns, widths, pads, batch, plain, pad)


def _fitted(cell: Cell, width: int, justify: str) -> tuple[str, int] | None:
    """The cell's text as a table lays it out on one line, and the spaces before it; None when
    the cell must fold or wrap."""
    text = cell.plain if isinstance(cell, Text) else cell
    if not text.isprintable():
        # A str loses the control codes a Text drops (bell, backspace, \v, \f, \r); what is
        # still not printable but a space (a new line, a tab, ESC, a format character) Rich lays
        # out.
        text = strip_control_codes(text)
        if any(not ch.isprintable() and unicodedata.category(ch) != "Zs" for ch in text):
            return None
    if justify != "left":
        text = text.rstrip()
    gap = width - width_of(text)
    if gap < 0:
        return None
    return text, gap if justify == "right" else gap // 2 if justify == "center" else 0


def _justify(cell: Cell, column: Column) -> str:
    return (cell.justify if isinstance(cell, Text) else None) or column.justify


def _plain_line(row: Sequence[Cell], widths: Sequence[int], columns: Sequence[Column],
                pads: list[Pad]) -> str | None:
    """A one-line row as plain text; None when a cell must fold."""
    parts = []
    for cell, width, (left, right), column in zip(row, widths, pads, columns, strict=True):
        if type(cell) is str and cell.isascii() and cell.isprintable():
            # The common cell, laid out as _fitted would, without its calls.
            justify = column.justify
            text = cell if justify == "left" else cell.rstrip()
            gap = width - len(text)
            if gap < 0:
                return None
            before = gap if justify == "right" else gap // 2 if justify == "center" else 0
            parts.append(" " * (left + before) + text + " " * (gap - before + right))
            continue
        fitted = _fitted(cell, width, _justify(cell, column))
        if fitted is None:
            return None
        text, before = fitted
        after = width - before - width_of(text)
        parts.append(" " * (left + before) + text + " " * (after + right))
    return " ".join(parts)


def _styled_line(row: Sequence[Cell], widths: Sequence[int], columns: Sequence[Column],
                 pads: list[Pad]) -> Text | None:
    """A one-line row with each cell's styles where a table puts them; None when one folds.

    The column's style lies under the whole cell, padding included; a Text's own style under
    its justified width; its spans over its characters.
    """
    plain: list[str] = []
    spans: list[Span] = []
    pos = 0
    for k, (cell, width, (left, right), column) in enumerate(
            zip(row, widths, pads, columns, strict=True)):
        fitted = _fitted(cell, width, _justify(cell, column))
        if fitted is None:
            return None
        text, before = fitted
        if k:
            plain.append(" ")  # the divider between two columns
            pos += 1
        after = width - before - width_of(text)
        piece = " " * (left + before) + text + " " * (after + right)
        plain.append(piece)
        # Spans count characters, not cells: a wide character is one of each.
        if column.style:
            spans.append(Span(pos, pos + len(piece), column.style))
        if isinstance(cell, Text):
            if cell.style:
                spans.append(Span(pos + left, pos + len(piece) - right, cell.style))
            start = pos + left + before
            spans += [Span(start + s.start, start + min(s.end, len(text)), s.style)
                      for s in cell.spans if s.start < len(text)]
        pos += len(piece)
    return Text("".join(plain), spans=spans)


def _one_row(row: Sequence[Cell], columns: Sequence[Column], widths: Sequence[int],
             pad: Pad) -> Table:
    """A row that folds onto more lines: Rich lays it out, as the whole table would."""
    one = _table(None, columns, widths, show_header=False, pad=pad)
    one.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    return one


def _squeezed(widths: Sequence[int], pad: Pad) -> bool:
    """Whether a column has no width left, with its padding (Rich would give it one cell)."""
    return any(w < 0 or w + a + b <= 0 for w, (a, b) in zip(widths, _pads(len(widths), pad),
                                                            strict=True))


def _whole(title: str | None, columns: Sequence[Column], rows: Iterable[Sequence[Cell]],
           pad: Pad) -> Table:
    table = _table(title, columns, pad=pad)
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    return table


def _print_rows(console: Console, columns: Sequence[Column], widths: Sequence[int],
                pads: list[Pad], rows: list[Sequence[Cell]], plain: bool, pad: Pad) -> None:
    lines: list[Text | str] = []
    for row in rows:
        line = (_plain_line if plain else _styled_line)(row, widths, columns, pads)
        if line is None:
            flush_lines(console, lines, plain)
            lines = []
            console.print(_one_row(row, columns, widths, pad))
        else:
            lines.append(line)
    flush_lines(console, lines, plain)


def flush_lines(console: Console, lines: list[Text | str], plain: bool) -> None:
    """Write lines at once: plain text straight to the file, styled ones through Rich."""
    if not lines:
        return
    if plain:
        console.file.write("\n".join(lines) + "\n")  # type: ignore[arg-type]
        console.file.flush()
    else:
        console.print(Text("\n").join(lines), soft_wrap=True)  # type: ignore[arg-type]


def make_room(widths: list[int], width: int, room: dict[int, int], pad: Pad = (1, 1)) -> None:
    """Widen the columns of room towards their widths there, in order, as far as width allows."""
    spare = width - listing_width(widths, pad)
    for k, target in room.items():
        grow = max(min(spare, target - widths[k]), 0)
        widths[k] += grow
        spare -= grow

