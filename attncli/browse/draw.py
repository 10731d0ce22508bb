"""browse's pictures as Rich text: the overview's thumbnails, a head's heatmap with its token
labels, a query's ranked keys as bars. Colour at the terminal's depth; shades without colour."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from rich.cells import cell_len, set_cell_size
from rich.style import Style
from rich.text import Text

from attncli.browse.patterns import max_pool, pool_edges
from attncli.render.draw.colors import MASKED_MARK, MASKED_STYLE, block_style, shade_of
from attncli.render.draw.palette import swatch

MARK = Style(color="bright_red", bold=True)  # the selection's brackets: a colour that no
# step of viridis (the weights' scale, yellow at the top) is, at 16 colours too
QUERY = Style(reverse=True, bold=True)  # the query's label


def scale_of(matrix: np.ndarray) -> tuple[float, float, bool]:
    """vmin, vmax and whether the scale is diverging (any value below zero)."""
    seen = matrix[np.isfinite(matrix)]
    if seen.size == 0:
        return 0.0, 1.0, False
    low, high = float(seen.min()), float(seen.max())
    return (low, high, True) if low < 0 else (0.0, high if high > 0 else 1.0, False)


def thumbnail(matrix: np.ndarray, side: int, depth: str | None, vmax: float = 1.0) -> list[Text]:
    """(p, p) weights as side columns: half blocks (two rows a line) in colour, shades without."""
    if matrix.shape[0] < side:  # a short text's few weights, each drawn several cells wide
        pick = [k * matrix.shape[0] // side for k in range(side)]
        small = matrix[np.ix_(pick, pick)]  # (side, side)
    else:
        small = max_pool(matrix, pool_edges(matrix.shape[0], side))  # (side, side)
    if depth is None:
        rows = pool_edges(small.shape[0], math.ceil(small.shape[0] / 2))
        half = max_pool(small, rows, list(range(small.shape[1] + 1)))  # (s/2, s)
        return [Text("".join(MASKED_MARK if math.isnan(v) else shade_of(v, 0.0, vmax)
                             for v in line)) for line in half]
    lines = []
    for r in range(0, small.shape[0], 2):
        line = Text()
        for c in range(small.shape[1]):
            top = small[r, c]
            bottom = small[r + 1, c] if r + 1 < small.shape[0] else math.nan
            line.append("▀", Style(
                color=None if math.isnan(top) else block_style(top, 0, vmax, depth).color,
                bgcolor=None if math.isnan(bottom) else block_style(bottom, 0, vmax,
                                                                    depth).color))
        lines.append(line)
    return lines


def cell(value: float, vmin: float, vmax: float, diverging: bool, depth: str | None,
         width: int) -> tuple[str, Style | None]:
    """One heatmap cell: a coloured block, or a shade character repeated, or the masked mark."""
    if math.isnan(value):
        return MASKED_MARK.center(width), MASKED_STYLE
    if depth is None:
        return shade_of(value, vmin, vmax, diverging) * width, None
    return " " * width, Style(bgcolor=block_style(value, vmin, vmax, depth, diverging).color)


def label(text: str, width: int) -> str:
    """A token's text cut or padded to width, its whitespace made visible."""
    shown = text.replace("\n", "⏎").replace("\t", "→").replace(" ", "␣")
    shown = "".join(c if c.isprintable() else "�" for c in shown)
    if cell_len(shown) > width:
        return set_cell_size(shown, width - 1) + "…"
    return set_cell_size(shown, width)


def heatmap(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], query: int | None,
            depth: str | None, cell_w: int = 2, label_w: int = 10,
            scale: tuple[float, float, bool] | None = None) -> Text:
    """matrix (R, C) with row labels, a column ruler and the query's row marked."""
    vmin, vmax, diverging = scale or scale_of(matrix)
    out = Text()
    ruler = "".join((c[:cell_w]).ljust(cell_w) for c in cols)
    out.append(" " * (label_w + 1) + ruler + "\n", style="dim")
    for r, name in enumerate(rows):
        out.append(label(name, label_w), QUERY if r == query else "bold")
        out.append("▶" if r == query else " ", MARK)
        for v in matrix[r]:
            out.append(*cell(float(v), vmin, vmax, diverging, depth, cell_w))
        out.append("◀\n" if r == query else "\n", MARK)
    return out


def legend(vmin: float, vmax: float, diverging: bool, depth: str | None, what: str) -> Text:
    """The scale's ends, and what the cells are."""
    out = Text(f"{what}: ", style="dim")
    out.append(f"{vmin:.3g} ")
    for k in range(12):
        share = k / 11
        if depth is None:
            out.append(shade_of(share, 0.0, 1.0))
        else:
            out.append(" ", Style(bgcolor=swatch(share, depth, diverging).color))
    out.append(f" {vmax:.3g}   {MASKED_MARK} masked", style="dim")
    return out


def ranking(weights: np.ndarray, tokens: Sequence[str], count: int, width: int,
            depth: str | None) -> Text:
    """The query's heaviest keys, heaviest first, as bars with their weights."""
    order = [int(k) for k in np.argsort(-np.nan_to_num(weights, nan=-np.inf), kind="stable")
             if not math.isnan(float(weights[k]))][:count]
    top = max((float(weights[k]) for k in order), default=1.0) or 1.0
    bar_w = max(4, width - 28)
    out = Text()
    for k in order:
        w = float(weights[k])
        filled = max(w, 0.0) / top * bar_w if top > 0 else 0.0  # a signed stage's negatives
        # get no bar
        bar = "█" * int(filled) + (" ▏▎▍▌▋▊▉"[int((filled % 1) * 8)] if filled < bar_w else "")
        out.append(f"{k:>6} ", "dim")
        out.append(label(tokens[k], 12) + " ", "bold")
        style = None if depth is None else block_style(w, 0.0, top, depth)
        out.append(bar.ljust(bar_w), style)
        out.append(f" {w:.4f}\n")
    return out


def strip(tokens: Sequence[str], query: int, width: int) -> tuple[Text, list[tuple[int, int]]]:
    """One line of tokens around the query, the query reversed; and each token's columns."""
    spans: list[tuple[int, int]] = []
    pieces = {k: label(tokens[k], min(12, max(1, cell_len(tokens[k])))).rstrip() or "␣"
              for k in range(max(0, query - 40), min(len(tokens), query + 41))}
    start, used = query, cell_len(pieces[query]) + 1
    while start - 1 in pieces and used + cell_len(pieces[start - 1]) + 1 <= width // 2:
        start -= 1
        used += cell_len(pieces[start]) + 1
    out, x = Text(), 0
    for k in range(start, len(tokens)):
        piece = pieces.get(k)
        if piece is None or x + cell_len(piece) + 1 > width:
            break
        out.append(piece, QUERY if k == query else None)
        out.append(" ")
        spans.append((k, x))
        x += cell_len(piece) + 1
    return out, spans
