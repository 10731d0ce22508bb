"""The growth exponent of a measured series, given only where the sizes let it show.

The exponent p of c + a·N^p is fitted on a log-log scale to what each doubling adds (the fixed c
cancels). It is a finding only when the last FIT_POINTS doublings all added something and agree
with each other: each doubling's own exponent, log2 of the ratio of two increments, lies within
SLOPE_SPREAD of the others, and the fitted p is positive. Otherwise the exponent is None and the
reason says that the range is too short (too few sizes, noise larger than the growth, or sizes
too small for the asymptote to settle).
"""

from __future__ import annotations

import math

from attncli.records.lessons import Fit

FIT_POINTS = 3  # increments fitted: those of the largest sizes
MIN_SIZES = FIT_POINTS + 1  # sizes measured for FIT_POINTS increments
SLOPE_SPREAD = 0.25  # the most the doublings' own exponents may differ


def growth(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """What each doubling adds: value(N) - value(N/2). A fixed part (the tiled path's tiles)
    cancels, and c + a·N^p grows by a·N^p·(1 - 2^-p): the same exponent p."""
    return [(n, v - prev) for (_, prev), (n, v) in zip(points, points[1:], strict=False)]


def _slope(points: list[tuple[int, float]]) -> float:
    """The least-squares slope of log(value) against log(tokens)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(v) for _, v in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
            / sum((x - mx) ** 2 for x in xs))


def fit_growth(points: list[tuple[int, float]]) -> Fit:
    """The exponent over the largest sizes' increments, or the reason there is none."""
    if len(points) < MIN_SIZES:
        return Fit(None, "few", {"sizes": len(points), "needed": MIN_SIZES})
    fitted = growth(points)[-FIT_POINTS:]
    for (n, added), (previous, _) in zip(fitted, points[-FIT_POINTS - 1:], strict=False):
        if not added > 0:
            return Fit(None, "flat", {"a": previous, "b": n})
    local = [math.log(b / a) / math.log(m / n)
             for (n, a), (m, b) in zip(fitted, fitted[1:], strict=False)]
    if max(local) - min(local) > SLOPE_SPREAD:
        return Fit(None, "unsettled", {"low": min(local), "high": max(local),
                                       "spread": SLOPE_SPREAD})
    exponent = _slope(fitted)
    if exponent <= 0:
        return Fit(None, "shrinking", {"exponent": exponent})
    return Fit(exponent)


def fit_exponent(points: list[tuple[int, float]]) -> float | None:
    """The growth exponent p, or None where the sizes do not show it (see fit_growth)."""
    return fit_growth(points).exponent
