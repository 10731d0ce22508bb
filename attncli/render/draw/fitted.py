"""Number tables that fit a narrow terminal by parts, one under the other, each repeating the key
columns: a number is shown whole or not at all, never cut to `0.…`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from rich.console import Console, RenderableType
from rich.text import Text

from attncli.render.draw.listing import Cell, Column, Listing, Pad, column_widths, listing_width

Rows = Callable[[], Iterator[list[Cell]]]


def column_parts(widths: Sequence[int], keys: int, width: int,
                 pad: Pad = (1, 1)) -> list[list[int]]:
    """The columns of a table too wide for width, in parts that fit it: each part the first
    keys columns, then as many of the rest, in order, as fit (one at least, whatever its
    width)."""
    parts: list[list[int]] = []
    current = list(range(keys))
    for k in range(keys, len(widths)):
        if len(current) > keys and listing_width([widths[i] for i in [*current, k]], pad) > width:
            parts.append(current)
            current = list(range(keys))
        current.append(k)
    return [*parts, current]


def fitted_listings(console: Console, columns: list[Column], widest: list[int],
                    extremes: Sequence[Sequence[Cell]], rows: Rows, keys: int,
                    pad: Pad = (1, 1)) -> list[RenderableType]:
    """The listing whole where its columns fit the console at their natural widths (headers
    included), else in parts of whole columns, each with the first keys columns."""
    natural = [max(w, *(len(line) for line in str(c.header).split("\n")))
               for w, c in zip(widest, columns, strict=True)]
    if listing_width(natural, pad) <= console.width:
        return [Listing(columns, column_widths(console, None, columns, widest, extremes, pad),
                        rows, pad=pad)]
    shown: list[RenderableType] = []
    for part in column_parts(natural, keys, console.width, pad):
        if shown:
            shown.append(Text())
        shown.append(Listing([columns[i] for i in part], [natural[i] for i in part],
                             _picked(rows, part), pad=pad))
    return shown


def _picked(rows: Rows, part: list[int]) -> Rows:
    """rows with only the cells of part."""
    return lambda: ([row[i] for i in part] for row in rows())
