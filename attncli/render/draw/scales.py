"""--scale: the colour range of a table, shared by every table of one quantity, its own, or 0-1."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

Cells = Sequence[Sequence[float | None]]  # or a float numpy array, NaN where masked
DECADES = 4  # the most powers of ten a log range spans; smaller weights share its bottom colour


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


@dataclass(frozen=True)
class LogRange:
    """A logarithmic colour range low … top: equal colour steps for equal ratios of weight.

    A long causal run's weights fall as 1/i down the rows and its row 0 holds 1.0: on a linear
    range everything below the first rows is one colour, on this one each ×10 is a step.
    """

    low: float
    top: float
    clipped: bool = False  # some weights lie below low (more than DECADES under the top)

    def fraction(self, value: float) -> float:
        """Where value lies between low (0) and top (1), by its logarithm; clipped to the ends."""
        if value <= self.low or self.top <= self.low:
            return 0.0 if value < self.top else 1.0
        if value >= self.top:
            return 1.0
        return math.log(value / self.low) / math.log(self.top / self.low)


def log_range(tables: Iterable[Cells], top: float | None = None) -> LogRange:
    """The log range of weights: from their smallest positive value (at most DECADES powers of
    ten below the top) to top, or to their largest value when top is None."""
    positives = [v for cells in tables for row in cells for v in row
                 if v is not None and v > 0 and v == v]  # v == v: not NaN
    high = top if top is not None else max(positives, default=1.0)
    smallest = min(positives, default=high)
    low = max(smallest, high / 10**DECADES)
    return LogRange(low=low, top=high, clipped=smallest < low)
