"""Lesson tables that fit the terminal: each row on one line, cut only as far as the width needs.

A renderer offers its layouts from the fullest to the most cut (fewer numbers per cell, fewer
decimals, fewer columns); the first whose width fits the console is printed. Headers wrap at
their spaces onto more lines; cells never wrap.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from attncli.render.draw.tables import LABEL_MAX, Axis, columns_that_fit, shorten
from attncli.render.lessons.lesson_text import text

GAP = 2  # cells between two columns: the left pad and the divider
WIDE_WORD_MIN = 4  # a word of wide (CJK) characters may break between them, two at a time
K = TypeVar("K")


@dataclass(frozen=True)
class FitColumn:
    """One column: its header, its cells as plain text (one per row) and its alignment."""

    header: str
    cells: Sequence[str]
    justify: str = "right"

    @property
    def width(self) -> int:
        """The cells it needs: its widest cell, or its header's longest word."""
        return column_width(self.header, self.cells)


def column_width(header: str, cells: Iterable[str]) -> int:
    """A column's width: its widest cell, or its header's longest word (a word of wide
    characters may break between them, so it needs only WIDE_WORD_MIN cells)."""
    words = [cell_len(w) if cell_len(w) == len(w) else min(cell_len(w), WIDE_WORD_MIN)
             for w in header.split()]
    return max([*words, *(cell_len(c) for c in cells)], default=0)


def first_fit(width: int, layouts: Iterable[tuple[K, Sequence[int]]]) -> K:
    """The first layout whose columns (their widths given) fit width cells, else the last."""
    last: K | None = None
    for layout, widths in layouts:
        last = layout
        if sum(widths) + GAP * max(len(widths) - 1, 0) <= width:
            return layout
    assert last is not None, "a renderer offers at least one layout"
    return last


def fitted_table(console: Console, columns: Sequence[FitColumn],
                 row_styles: Sequence[str] = ()) -> Table:
    """The table of columns, each as wide as it needs; room left over lets headers stay on
    one line, from the left; a header still wider is wrapped at its spaces."""
    widths = [c.width for c in columns]
    room = console.width - sum(widths) - GAP * max(len(widths) - 1, 0)
    for k, column in enumerate(columns):
        grow = min(max(cell_len(column.header) - widths[k], 0), max(room, 0))
        widths[k] += grow
        room -= grow
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    for column, width in zip(columns, widths, strict=True):
        header = Text("\n").join(Text(column.header).wrap(console, width))
        table.add_column(header, justify=column.justify,  # type: ignore[arg-type]
                         no_wrap=True, overflow="ellipsis", min_width=min(width, 1))
    for k, row in enumerate(zip(*(c.cells for c in columns), strict=True)):
        table.add_row(*(Text(cell) for cell in row),
                      style=row_styles[k] if k < len(row_styles) else None)
    return table


def cut_note(lang: str, width: int, dropped: Sequence[str], precision: int,
             asked: int) -> str:
    """The line saying what a table left out to fit width columns ("" when nothing)."""
    parts = [text(lang, "fit.columns", cols=", ".join(dropped))] if dropped else []
    if precision < asked:
        parts.append(text(lang, "fit.decimals", p=precision, asked=asked))
    if not parts:
        return ""
    return text(lang, "fit.note", width=width, what=text(lang, "fit.and").join(parts))


def fitted_labels(console: Console, rows: Axis, cols: Axis,
                  matrix: Sequence[Sequence[float | None]], precision: int) -> Axis:
    """Column labels as whole as the table can give them: each cut to the widest width at which
    every column still fits (render_matrix then keeps them); where none fits, the labels as they
    came, for render_matrix to cut."""
    labels = [label.strip() or label for label in cols.labels]  # as render_matrix shows them
    widest = min(max((cell_len(label) for label in labels), default=0), LABEL_MAX)
    for limit in range(widest, precision + 2, -1):
        cut = Axis([shorten(label, limit) for label in labels], cols.indices, cols.show_index)
        if columns_that_fit(rows, cut, matrix, precision, console.width,
                            LABEL_MAX) == len(cols.labels):
            return cut
    return cols
