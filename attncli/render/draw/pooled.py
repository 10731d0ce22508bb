"""A long run's heatmap: each cell one block of queries × keys, labelled with its index ranges."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.result import PooledMap
from attncli.render.draw.colors import log_legend
from attncli.render.draw.heatmap import append_cells, heat_piece
from attncli.render.draw.palette import depth_of
from attncli.render.draw.scales import LogRange, log_range

TICK_GAP = 8  # the least distance between the starts of two column ticks


def groups(count: int, factor: int) -> list[range]:
    """count fine blocks gathered factor at a time."""
    return [range(k, min(k + factor, count)) for k in range(0, count, factor)]


def repool(pmap: PooledMap, rows: list[range], cols: list[range],
           pool: str) -> list[list[float | None]]:
    """Gather fine blocks: the max of their maxima, or their means weighted by unmasked cells."""
    out: list[list[float | None]] = []
    for row_group in rows:
        line: list[float | None] = []
        for col_group in cols:
            cells = [(v, pmap.counts[r][c]) for r in row_group for c in col_group
                     if (v := pmap.values[r][c]) is not None]
            if not cells:
                line.append(None)
            elif pool == "max":
                line.append(max(v for v, _ in cells))
            else:
                line.append(sum(v * n for v, n in cells) / sum(n for _, n in cells))
        out.append(line)
    return out


def span(edges: list[int], blocks: range) -> str:
    """The token indices a group of blocks covers, as 'a–b'."""
    return f"{edges[blocks.start]}–{edges[blocks.stop] - 1}"


def layout(pmap: PooledMap, width: int) -> tuple[int, int, int]:
    """(cell width, key blocks per cell, query blocks per cell) that fit width columns.

    Terminal cells are about twice as tall as wide: with one-column cells, a row covers twice
    the tokens a column does, so the picture stays square.
    """
    count = len(pmap.edges) - 1
    label_w = len(span(pmap.edges, range(count - 1, count))) if count else 1
    room = max(width - label_w - 1, 1)
    if 2 * count <= room:
        return 2, 1, 1
    per_col = -(-count // room)
    return 1, per_col, 2 * per_col


def _ticks(edges: list[int], cols: list[range], cell_w: int, room: int) -> str:
    """Start indices of some key groups, above their columns, never closer than TICK_GAP."""
    line, last = "", -TICK_GAP
    for k, group in enumerate(cols):
        pos, label = k * cell_w, str(edges[group.start])
        clear = pos >= len(line) + (1 if line else 0)
        if pos - last >= TICK_GAP and clear and pos + len(label) <= room:
            line += " " * (pos - len(line)) + label
            last = pos
    return line


def render_pooled(console: Console, pmap: PooledMap, num_heads: int, pool: str,
                  scale: str = "shared", span_of: LogRange | None = None) -> RenderableType:
    """One head's pooled weights, gathered further to fit the console, on a log range: the
    --scale one (span_of), or, with None, the map's own."""
    cell_w, per_col, per_row = layout(pmap, console.width)
    count = len(pmap.edges) - 1
    rows, cols = groups(count, per_row), groups(count, per_col)
    cells = repool(pmap, rows, cols, pool)
    if span_of is None:
        scale, span_of = "table", log_range([cells])
    labels = [span(pmap.edges, group) for group in rows]
    label_w = max(len(label) for label in labels)
    depth = depth_of(console)
    body = Text(no_wrap=True, overflow="crop")
    room = console.width - label_w - 1
    body.append(" " * (label_w + 1) + _ticks(pmap.edges, cols, cell_w, room) + "\n", style="dim")
    for i, line in enumerate(cells):
        body.append(labels[i].rjust(label_w) + " ", style="bold")
        append_cells(body, (heat_piece(None if value is None else span_of.fraction(value),
                                       0.0, 1.0, cell_w, depth) for value in line))
        if i < len(cells) - 1:
            body.append("\n")
    which = f"head {pmap.head} of {num_heads}: " if num_heads > 1 else ""
    title = Text(f"Attention weights, {which}{len(rows)} × {len(cols)} blocks, each the {pool} "
                 "of its weights", style="bold")
    size = pmap.edges[1] - pmap.edges[0] if count else 0
    note = Text(f"row = {per_row * size} queries, column = {per_col * size} keys (labels and "
                "ticks: token indices)", style="dim")
    masked = any(v is None for line in cells for v in line)
    key = log_legend(span_of.low, span_of.top, 3, masked=masked, depth=depth, scale=scale,
                     clipped=span_of.clipped)
    return Group(title, note, body, key)
