"""--scale: the colour range of a table, shared by every table of one quantity, its own, or 0-1."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

Cells = Sequence[Sequence[float | None]]  # or a float numpy array, NaN where masked


def _largest(cells: Any, signed: bool) -> float | None:
    """The largest value (|value| if signed) of one table; None if it has none."""
    numpy = sys.modules.get("numpy")  # a tiled run's windows are float32 arrays: no Python loop
    if numpy is not None and isinstance(cells, numpy.ndarray):
        values = cells[~numpy.isnan(cells)]
        return float(numpy.abs(values).max() if signed else values.max()) if values.size else None
    values = [abs(v) if signed else v for row in cells for v in row if v is not None]
    return max(values) if values else None


def _top(tables: Iterable[Cells], signed: bool) -> float:
    tops = [top for cells in tables if (top := _largest(cells, signed)) is not None]
    return max(tops) if tops else 1.0


def weight_top(tables: Iterable[Cells], scale: str) -> float | None:
    """The top of the weights' range (the bottom is 0): None lets each table use its own."""
    if scale == "unit":
        return 1.0
    if scale == "table":
        return None
    return _top(tables, signed=False)


def signed_top(tables: Iterable[Cells], scale: str) -> float | None:
    """The half-width of a signed quantity's range, centred on 0: None for each table's own."""
    if scale == "table":
        return None
    return _top(tables, signed=True)
