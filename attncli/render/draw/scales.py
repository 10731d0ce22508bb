"""--scale: the colour range of a table, shared by every table of one quantity, its own, or 0-1."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Cells = Sequence[Sequence[float | None]]


def weight_top(tables: Iterable[Cells], scale: str) -> float | None:
    """The top of the weights' range (the bottom is 0): None lets each table use its own."""
    if scale == "unit":
        return 1.0
    if scale == "table":
        return None
    return max((v for cells in tables for row in cells for v in row if v is not None),
               default=1.0)


def signed_top(tables: Iterable[Cells], scale: str) -> float | None:
    """The half-width of a signed quantity's range, centred on 0: None for each table's own."""
    if scale == "table":
        return None
    return max((abs(v) for cells in tables for row in cells for v in row if v is not None),
               default=1.0)
