"""`attncli heads`: every layer × head at a glance, as thumbnails and a table of measures."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from rich.color import Color
from rich.console import Console, Group, RenderableType
from rich.style import Style
from rich.text import Text

from attncli.core.result import HeadsResult, Matrix
from attncli.render.draw.colors import cell_style, legend, shade_of
from attncli.render.draw.listing import Cell, Column, Listing, column_widths
from attncli.render.draw.palette import depth_of, swatch
from attncli.render.draw.streamed import Later

MEASURE_HELP = {
    "entropy": "mean entropy of a row, nats (0 = one token, high = spread out)",
    "prev": "share of attention on the previous token",
    "first": "share on the first token (the 'sink')",
    "self": "share on the token itself",
    "distance": "mean number of tokens back attended",
}
MIN_SIDE = 3


def pool(matrix: Matrix, side: int) -> Matrix:
    """Max-pool a square matrix down to side × side cells."""
    n = len(matrix)
    if n <= side:
        return matrix
    edges = [round(k * n / side) for k in range(side + 1)]
    return [[max(matrix[i][j] for i in range(edges[r], edges[r + 1])
                 for j in range(edges[c], edges[c + 1]))
             for c in range(side)] for r in range(side)]


def _thumbnail_lines(matrix: Matrix, depth: str | None, vmax: float) -> list[Text]:
    """Lines of one thumbnail: half blocks (two rows a line) in colour, shades without."""
    if depth is None:
        return [Text("".join(shade_of(v, 0.0, vmax) for v in row)) for row in matrix]
    def colour(value: float) -> Color:
        return swatch(value / vmax if vmax > 0 else 0.5, depth).color

    lines = []
    for r in range(0, len(matrix), 2):
        line = Text()
        for c, top in enumerate(matrix[r]):
            bottom = matrix[r + 1][c] if r + 1 < len(matrix) else None
            bg = None if bottom is None else colour(bottom)
            line.append("▀", style=Style(color=colour(top), bgcolor=bg))
        lines.append(line)
    return lines


def thumbnail_top(result: HeadsResult, scale: str, matrix: Matrix) -> float:
    """The top of a thumbnail's range: 1 (unit), its own largest weight (table), or all heads'."""
    if scale == "unit":
        return 1.0
    pictures = [matrix] if scale == "table" else [m for row in result.thumbnails for m in row]
    return max((v for m in pictures for line in m for v in line), default=1.0) or 1.0


def render_grid(console: Console, result: HeadsResult, scale: str = "shared") -> RenderableType:
    """A grid of thumbnails, one row per layer, one column per head, when the width allows."""
    layers, heads = len(result.thumbnails), len(result.thumbnails[0])
    label = len(f"L{layers - 1} ")
    full = len(result.thumbnails[0][0])
    side = min(full, (console.width - label) // heads - 1)
    if side < MIN_SIDE:
        need = label + heads * (MIN_SIDE + 1)
        return Text(f"(the grid of {layers}×{heads} thumbnails needs {need} columns; the "
                    f"terminal has {console.width}: see the table, or widen the terminal)",
                    style="italic")
    depth = depth_of(console)
    header = Text(" " * label + "".join(f"h{h}".ljust(side + 1) for h in range(heads)),
                  style="bold")
    parts: list[RenderableType] = [header]
    shared = thumbnail_top(result, scale, [])  # all heads' top, found once: not once a picture
    for layer, row in enumerate(result.thumbnails):
        pictures = [_thumbnail_lines(pool(m, side), depth,
                                     thumbnail_top(result, scale, m) if scale == "table"
                                     else shared)
                    for m in row]
        for k in range(len(pictures[0])):
            line = Text()
            line.append(f"L{layer}".ljust(label) if k == 0 else " " * label, style="bold")
            for picture in pictures:
                line.append_text(picture[k])
                line.append(" ")
            parts.append(line)
    n = result.config["num_tokens"]
    parts.append(Text(f"each picture: query rows × key columns of {n} tokens, max-pooled to "
                      f"{side}×{side}", style="dim"))
    if depth is not None and scale != "table":
        parts.append(legend(0.0, shared, 2, depth=depth, scale=scale))
    elif scale == "table":
        parts.append(Text("table scale: each picture from 0 to its own largest weight",
                          style="dim"))
    return Group(*parts)


def render_measures(console: Console, result: HeadsResult, precision: int) -> RenderableType:
    """One row per head: the measures that say what it does, each coloured on its range;
    printed in chunks of rows, widths counted from the data."""
    depth = depth_of(console)
    names = list(MEASURE_HELP)
    measures = result.measures
    columns = [Column("layer", "right"), Column("head", "right"),
               *(Column(name, "right") for name in names)]
    ranges = {name: (min(m[name] for m in measures), max(m[name] for m in measures))
              for name in names}
    # The widest number of a column is its smallest or its largest; the layer and head
    # columns are as wide as their largest number.
    widest = [len(str(max((m["layer"] for m in measures), default=0))),
              len(str(max((m["head"] for m in measures), default=0))),
              *(max(len(f"{v:.{precision}f}") for v in ranges[name]) for name in names)]
    extremes = [[str(max(m["layer"] for m in measures)), str(max(m["head"] for m in measures)),
                 *(max((f"{v:.{precision}f}" for v in ranges[name]), key=len)
                   for name in names)]]
    widths = column_widths(console, None, columns, widest, extremes)

    def rows() -> Iterator[list[Cell]]:
        for m in measures:
            cells: list[Cell] = [str(m["layer"]), str(m["head"])]
            for name in names:
                low, high = (0.0, 1.0) if name in ("prev", "first", "self") else ranges[name]
                style = cell_style(m[name], low, high, depth) if depth is not None else ""
                cells.append(Text(f"{m[name]:.{precision}f}", style=style))
            yield cells

    notes = Text("\n".join(f"{name}: {text}" for name, text in MEASURE_HELP.items()),
                 style="dim")
    return Group(Listing(columns, widths, rows), notes)


def render_heads(console: Console, result: HeadsResult, precision: int = 3,
                 scale: str = "shared") -> RenderableType:
    """The `heads` view: what it shows, the thumbnail grid, then the table of measures."""
    m = result.model
    title = Text.assemble(
        (f"All {m.layers} layers × {m.heads} heads", "bold"),
        f" ({m.kv_heads} kv heads)" if m.kv_heads != m.heads else "",
        f" · {result.config['num_tokens']} tokens · sorted by {result.config['sort']}\n",
        (f"Each head's attention over its layer's input (the {m.norm} residual stream); "
         "layers and heads are 0-based.", "dim"))
    return Group(title, Text(), Later(partial(render_grid, console, result, scale)), Text(),
                 Later(partial(render_measures, console, result, precision)))
