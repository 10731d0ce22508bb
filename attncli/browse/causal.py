"""A saved `attncli patch --json` as browse shows it: one row per layer, each head's patched
metric (normalised) as its one cell, so the overview is patch's layer × head grid, coloured on
a scale centred on zero (the attribution estimate's grid where the file holds no exact one).
A --per-position file's cells open from a head: its layer's heads × positions."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer

from attncli.browse.draw import heatmap, legend, strip
from attncli.browse.patterns import Cells, ExactRow, RowData
from attncli.browse.screens import Shows
from attncli.browse.source import WEIGHTS, RowInfo, Source
from attncli.browse.state import Selection, clamp, window
from attncli.browse.widgets import Picture, StatusLine, close
from attncli.errors import AttnCliError
from attncli.records.causal import Patching
from attncli.saved.causal import patching_from_dict
from attncli.saved.kinds import kind_of, read_saved


def patch_source(result: Patching) -> Source:
    """What browse shows of a patch: each layer a row of heads, each head one cell."""
    exact = bool(result.grid)
    estimate = None if result.attribution is None else result.attribution["grid"]
    values = np.asarray(result.grid if exact or estimate is None else estimate,
                        dtype=np.float64)  # (layers, heads) as the JSON holds them
    grid = values.astype(np.float32)  # (layers, heads)
    heads = grid.shape[1]
    rows = [RowInfo(f"layer {k}", f"L{k}", heads) for k in range(len(grid))]
    what = "patched metric" if exact else "attribution estimate"
    title = (f"{result.model['path']} · patch --{result.direction}: each head's {what}, "
             f"normalised (1: the clean metric restored) · top heads: {top_heads(values)}")

    def compute(row: int, view: str) -> RowData:
        if view != WEIGHTS:
            raise AttnCliError(f"a patch holds one number per head, not {view}")
        return ExactRow(grid[row][:, None, None], [{} for _ in range(heads)])  # (heads, 1, 1)

    cells = None if result.positions is None else Cells(
        np.asarray(result.positions, dtype=np.float64),  # (layers, heads, T)
        [c if c == k else f"{c} / {k}" for c, k in zip(result.clean, result.corrupt,
                                                        strict=True)])
    return Source(title, [what], rows, compute, cells=cells)


def top_heads(grid: np.ndarray, count: int = 5) -> str:
    """The count heads of grid (layers, heads) farthest from zero, largest first, as patch's
    table lists them: "L16.0 +0.820 · L18.6 -0.310"."""
    order = np.argsort(-np.abs(np.nan_to_num(grid)), axis=None, kind="stable")[:count]
    return " · ".join(f"L{k // grid.shape[1]}.{k % grid.shape[1]} {grid.flat[k]:+.3f}"
                      for k in order.tolist())


def saved_patch(path: str) -> Source:
    """browse --patch: a saved `attncli patch --json` file."""
    data = read_saved(path)
    if not isinstance(data, dict) or kind_of(data) != "patch":
        raise AttnCliError("--patch takes `attncli patch --json` output")
    return patch_source(patching_from_dict(data))


LABEL = 8  # the heads' labels, in columns


def _ruler(position: int, selected: int, width: int) -> str:
    """A column's label: ▼ over the selected position, its number every fifth where it fits."""
    if position == selected:
        return "▼"
    shown = str(position)
    return shown if position % 5 == 0 and len(shown) <= width else ""


class PositionsScreen(Shows):
    """A --per-position patch's cells of one layer: its heads × the positions patched one at a
    time, on one scale centred on zero for every layer; the selected cell's number below."""

    BINDINGS = [Binding("left", "move(0, 0, -1)", "position", show=False),
                Binding("right", "move(0, 0, 1)", "position", show=False),
                Binding("up", "move(0, -1, 0)", "head", show=False),
                Binding("down", "move(0, 1, 0)", "head", show=False),
                Binding("home", "move(0, 0, -1000000)", show=False),
                Binding("end", "move(0, 0, 1000000)", show=False),
                Binding("left_square_bracket", "move(-1, 0, 0)", "layer"),
                Binding("right_square_bracket", "move(1, 0, 0)", "layer"),
                Binding("escape", "back", "back")]

    def compose(self) -> ComposeResult:
        yield Picture(self.draw_map, id="map")
        yield Picture(self.draw_strip, id="strip")
        yield StatusLine(self.status, id="status")
        yield Footer()

    @property
    def cells(self) -> Cells:
        assert self.source.cells is not None
        return self.source.cells

    def draw_map(self, width: int, height: int) -> RenderableType:
        sel, values = self.state.sel, self.cells.values  # values: (layers, heads, T)
        heads, count = values.shape[1:]
        cell_w = clamp((width - LABEL - 3) // max(1, count), 2, 6)
        cols = window(sel.position, count, (width - LABEL - 3) // cell_w, False, True)
        rows = window(sel.head, heads, height - 4, False, True)
        reach = float(np.nanmax(np.abs(values), initial=0.0)) or 1.0
        title = Text(f"{self.source.rows[sel.row].name} · each head patched at one position "
                     f"· positions {cols.start}..{cols.stop - 1} · {self.source.title}", "bold")
        title.no_wrap, title.overflow = True, "ellipsis"
        shown = values[sel.row][rows.start:rows.stop, cols.start:cols.stop]  # (h', T')
        picture = heatmap(shown, [f"L{sel.row}.{h}" for h in rows],
                          [_ruler(p, sel.position, cell_w) for p in cols],
                          sel.head - rows.start, self.state.depth,
                          cell_w, LABEL, (-reach, reach, True))
        return Group(title, picture, legend(-reach, reach, True, self.state.depth,
                                            "patched metric, normalised"))

    def draw_strip(self, width: int, height: int) -> RenderableType:
        return strip(self.cells.labels, self.state.sel.position, width)[0]

    def status(self, width: int, height: int) -> Text:
        sel = self.state.sel
        value = self.cells.values[sel.row, sel.head, sel.position]
        out = Text(f"{self.source.rows[sel.row].name} · head {sel.head} · position "
                   f"{sel.position} {self.cells.labels[sel.position]!r}: ", "bold")
        out.append(f"{value:.4f}", "bold")
        return out

    def action_move(self, layers: int, heads: int, positions: int) -> None:
        shape = self.cells.values.shape  # (layers, heads, T)

        def moved(sel: Selection) -> Selection:
            return replace(sel, row=clamp(sel.row + layers, 0, shape[0] - 1),
                           head=clamp(sel.head + heads, 0, shape[1] - 1),
                           position=clamp(sel.position + positions, 0, shape[2] - 1))

        self.select(moved)

    def action_back(self) -> None:
        close(self)
