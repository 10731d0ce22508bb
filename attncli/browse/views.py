"""What each screen draws, as Rich text from the source and the selection: the overview grid,
the head view, the comparison and the status line. No Textual here: tests call these directly."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from rich.console import Group, RenderableType
from rich.style import Style
from rich.text import Text

from attncli.browse.draw import MARK, heatmap, legend, ranking, scale_of, thumbnail
from attncli.browse.patterns import RowData
from attncli.browse.source import Source
from attncli.browse.state import Selection, State, clamp, window
from attncli.render.draw.colors import cell_style

LABEL_W = 10
MIN_SIDE, MAX_SIDE = 3, 16


def grid_layout(source: Source, sel: Selection, width: int,
                height: int = 10**6) -> tuple[int, int, int]:
    """Thumbnail side, the first head shown and how many heads fit in width (and height: at
    least four rows of heads, or every row, when the side can shrink to make room)."""
    label = max(len(r.label) for r in source.rows) + 1
    heads = max(r.heads for r in source.rows) if sel.view != "rollout" else 1
    tall = 2 * ((height - 1) // min(len(source.rows), 4) - 1)
    side = clamp(min((width - label) // heads - 2, tall), MIN_SIDE, MAX_SIDE)
    fit = max(1, (width - label) // (side + 2))
    first = clamp(sel.head - fit // 2, 0, max(0, heads - fit)) if fit < heads else 0
    return side, first, min(fit, heads)


def row_lines(side: int) -> int:
    """Lines one row of the grid takes: its pictures (two weights a line) and its scores."""
    return math.ceil(side / 2) + 1


def grid_rows(source: Source, sel: Selection, width: int, height: int) -> range:
    """The rows the grid has room for, around the selected one."""
    per_row = row_lines(grid_layout(source, sel, width, height)[0])
    rows_fit = max(1, (height - 1) // per_row)
    top = clamp(sel.row - rows_fit // 2, 0, max(0, len(source.rows) - rows_fit))
    return range(top, min(len(source.rows), top + rows_fit))


Line = tuple[Any, Text]  # a line of the grid, and a key naming what it shows


def grid_frame(source: Source, state: State, width: int, height: int,
               drawn: dict[Any, list[Text]] | None = None) -> list[Line]:
    """The layer × head grid around the selection, line by line, each with a key that changes
    exactly when the line does (a move changes two rows' lines; the terminal redraws those).
    drawn keeps each thumbnail's lines between calls."""
    drawn = {} if drawn is None else drawn
    sel = state.sel
    side, first_head, fit = grid_layout(source, sel, width, height)
    label = max(len(r.label) for r in source.rows) + 1
    per_row = row_lines(side)
    names = ["mean"] if sel.view == "rollout" else [f"h{h}" for h in range(first_head,
                                                                            first_head + fit)]
    header = Text(" " * label)
    for name in names:
        header.append(" " + name.ljust(side + 1)[:side + 1], "bold")
    frame: list[Line] = [(("header", tuple(names), side, label), header)]
    for r in grid_rows(source, sel, width, height):
        frame += _row_lines(source, state, r, (side, first_head, fit, label, per_row), drawn)
    if fit < (1 if sel.view == "rollout" else max(i.heads for i in source.rows)):
        note = f"heads {first_head}–{first_head + fit - 1} shown: ←/→ scrolls"
        frame.append((("note", note), Text(note, "dim")))
    return frame


def _row_lines(source: Source, state: State, r: int, shape: tuple[int, int, int, int, int],
               drawn: dict[Any, list[Text]]) -> list[Line]:
    side, first_head, fit, label, per_row = shape
    sel, depth = state.sel, state.depth
    info, data = source.rows[r], state.results.done.get((r, sel.view))  # released: its pictures
    if data is None:
        news = state.results.errors.get((r, sel.view)) or "computing…"
        line = Text(info.label.ljust(label), "bold")
        line.append(f" {news}", "dim italic")
        return [((r, "state", news, label), line)] + [
            (("blank",), Text()) for _ in range(per_row - 1)]
    heads = range(first_head, min(data.heads, first_head + fit))
    chosen = sel.head if r == sel.row else -1
    base = (r, id(data), first_head, fit, side, depth, chosen)
    pictures = []
    for h in heads:
        key = (id(data), h, side, depth)
        if key not in drawn:
            drawn[key] = thumbnail(data.thumbs[h], side, depth)
        pictures.append(drawn[key])
    out: list[Line] = []
    for k in range(per_row - 1):
        line = Text(info.label.ljust(label) if k == 0 else " " * label, "bold")
        for h, picture in zip(heads, pictures, strict=True):
            line.append("▐" if h == chosen else " ", MARK)
            line.append_text(picture[k] if k < len(picture) else Text(" " * side))
            line.append("▌" if h == chosen else " ", MARK)
        out.append(((*base, k), line))
    line = Text(" " * label)
    for h in heads:
        value = data.scores[h].get(sel.overlay) if h < len(data.scores) else None
        text = "" if value is None else f"{value:.2f}"
        line.append(" ")
        line.append(text.center(side), "reverse bold" if h == chosen else
                    _overlay_style(value, sel.overlay, depth))
        line.append(" ")
    out.append(((*base, "scores", sel.overlay), line))
    return out


SHARES = ("first", "prev", "self", "previous_token", "induction", "duplicate_token")


def _overlay_style(value: float | None, overlay: str, depth: str | None) -> Style | str:
    """A share's colour on the weights' scale (0 … 1) under its thumbnail; bold at 0.4 or more
    without colour. Entropy and distance are not shares: plain."""
    if value is None or overlay not in SHARES:
        return "dim"
    if depth is None:
        return "bold" if value >= 0.4 else "dim"
    return cell_style(min(max(value, 0.0), 1.0), 0.0, 1.0, depth)


def status(source: Source, sel: Selection, data: RowData | None) -> Text:
    """The selection in words: layer, head, kv head, and its scores."""
    info = source.rows[sel.row]
    out = Text(f"{info.name} · ", "bold")
    out.append("heads' mean" if sel.view == "rollout" else f"head {sel.head}", "bold")
    if info.kv is not None and sel.view != "rollout":
        out.append(f" · kv head {info.kv[sel.head]}", "bold")
    out.append(f" · {sel.what}")
    if data is not None and sel.head < len(data.scores):
        for name, value in data.scores[sel.head].items():
            if name in ("kv_head",):
                continue
            out.append(f" · {name} {value:.3g}", "bold" if name == sel.overlay else "")
    return out


SPIN = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def status_lines(source: Source, state: State) -> Text:
    """The selection in words, under the news: a spinner while something is computed (its frame
    from the clock), or why the selected row failed."""
    sel = state.sel
    line = status(source, sel, state.results.done.get((sel.row, sel.view)))
    error = state.results.errors.get((sel.row, sel.what))
    if not state.results.busy and error is None:
        return line
    spin = SPIN[int(time.monotonic() * 10) % len(SPIN)]
    busy = bool(state.results.busy)
    first = Text(f"{spin} computing…" if busy else error or "", "bold yellow" if busy else "red")
    first.no_wrap, line.no_wrap = True, True  # the news first, then the selection's line
    first.overflow = line.overflow = "ellipsis"
    return Text("\n").join([first, line])


def head_rooms(width: int, height: int) -> tuple[int, int]:
    """Rows and columns of cells the head view's heatmap has room for."""
    return max(2, height - 4), max(2, (width - LABEL_W - 3) // 2)


def shows_exact(sel: Selection, data: RowData, width: int, height: int) -> bool:
    """Whether the head view shows an exact window (else the whole, pooled into blocks)."""
    if sel.exact is not None:
        return sel.exact
    return data.exact or data.size <= min(*head_rooms(width, height))


def pooled_blocks(width: int, height: int) -> int:
    """Blocks a side of the pooled head view."""
    return min(*head_rooms(width, height))


def head_view(source: Source, sel: Selection, data: RowData, width: int, height: int,
              depth: str | None, scale: tuple[float, float, bool] | None = None
              ) -> tuple[RenderableType, np.ndarray, list[int]]:
    """The head's pattern: the exact window around the query, or the whole pooled into blocks;
    the matrix drawn (for a shared scale), and the first query of each row drawn (for clicks:
    the rows start on the picture's third line)."""
    info, size = source.rows[sel.row], data.size
    rows_room, cols_room = head_rooms(width, height)
    head = min(sel.head, data.heads - 1)
    cell_w = 2
    if shows_exact(sel, data, width, height):
        rows = window(sel.query, size, rows_room, info.causal, True, source.answer or 0)
        cols = window(sel.query, size, cols_room, info.causal, False)
        matrix = data.window(head, rows, cols)  # (R, C)
        labels = [source.tokens[i] for i in rows]
        ruler = [str(c)[-2:] if (c % 5 == 0 or c == sel.query) else "" for c in cols]
        where = f"exact weights: queries {rows.start}–{rows.stop - 1}, keys {cols.start}–" \
                f"{cols.stop - 1} of {size:,}"
        marked = sel.query - rows.start
        starts = list(rows)
    else:
        edges, matrix = data.pooled(head, pooled_blocks(width, height))
        cell_w = max(2, min(6, (width - LABEL_W - 3) // max(1, len(edges) - 1)))
        labels = [f"{edges[b]}–{edges[b + 1] - 1}" for b in range(len(edges) - 1)]
        ruler = [str(b) if b % 5 == 0 else "" for b in range(len(edges) - 1)] if cell_w < 6 \
            else [str(edges[b]) for b in range(len(edges) - 1)]
        where = f"max-pooled: {len(edges) - 1}×{len(edges) - 1} blocks of up to " \
                f"{edges[1] - edges[0]} tokens a side, over {size:,} tokens; z zooms into the " \
                "exact window"
        marked = next(b for b in range(len(edges) - 1) if edges[b + 1] > sel.query)
        starts = edges[:-1]
    used = scale or scale_of(matrix)
    picture = heatmap(matrix, labels, ruler, marked, depth, cell_w, LABEL_W, used)
    what = sel.what if sel.what != "weights" else "attention weights"
    heading = Text(where, style="dim", no_wrap=True, overflow="ellipsis")
    return Group(heading, picture, legend(*used, depth, what)), matrix, starts


def query_panel(source: Source, sel: Selection, data: RowData, width: int, lines: int,
                depth: str | None) -> Text:
    """The query's token and its ranked keys."""
    head = min(sel.head, data.heads - 1)
    weights = data.row(head, sel.query)  # (N,)
    out = Text(f"query {sel.query} ", "bold")
    out.append(repr(source.tokens[sel.query]))
    if source.answer is not None and source.answer <= sel.query < len(source.tokens) - 1:
        step = sel.query - source.answer  # a generation's step: its query chose the next token
        out.append(f", which chose answer token {step} {source.tokens[sel.query + 1]!r},", "bold")
    out.append(" attends most to:\n", "dim")
    out.append_text(ranking(weights, source.tokens, max(1, lines - 1), width, depth))
    return out
