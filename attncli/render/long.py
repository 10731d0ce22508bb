"""`attncli run` on a long input: summary per head, pooled heatmaps, top keys, exact windows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import LongStats, Result
from attncli.records.heads import figure
from attncli.render.draw.colors import cell_style
from attncli.render.draw.fitted import fitted_listings
from attncli.render.draw.listing import Cell, Column, Listing, column_widths, listing_width
from attncli.render.draw.palette import depth_of
from attncli.render.draw.pooled import render_pooled
from attncli.render.draw.scales import LogRange, log_range, weight_top
from attncli.render.draw.streamed import Later
from attncli.render.draw.tables import Axis, shorten
from attncli.render.draw.views import render_view
from attncli.render.model import describe_model, measure_legend
from attncli.render.query import plain, render_query
from attncli.render.stages import head_title

TOP_ROWS = 20  # queries in the top-k table without --rows
TOP_PAD = (1, 0)  # a space before each key's cell, none after
SUMMARY = (("entropy", "entropy"), ("first", "first"), ("prev", "prev"), ("self", "self"),
           ("top_k_mass", "top-k"), ("distance", "distance"))


def _long(result: Result) -> LongStats:
    assert result.long is not None, "a tiled run's result"
    return result.long


def _as_lists(values: Any) -> list[Any]:
    """A nested list of numbers, from a numpy array or a list."""
    return values.tolist() if hasattr(values, "tolist") else values


def _which(result: Result, head: int) -> str:
    return f" — {head_title(result, head, 'en')}" if result.config.heads > 1 else ""


def render_header(result: Result) -> Text:
    """The variant, its sizes, and what the tiled path computed."""
    c = result.config
    tiled = ("\ntiled path: context, log-sum-exp, entropy and top-k, without the N×N matrix",
             "dim")
    legend = measure_legend(result.config.measure, result.config.layer)
    if legend is not None:
        tiled = (tiled[0] + "\n" + legend, tiled[1])
    if result.model is not None:  # a checkpoint's layer: its own shape, no seed to name
        return Text.assemble(describe_model(result), tiled)
    parts = [f"{c.num_tokens:,} tokens", f"d_in {c.d_in} → d_out {c.d_out}",
             f"{c.heads} head{'s' if c.heads != 1 else ''}", f"seed {c.seed}"]
    return Text.assemble((result.traits.title, "bold"), " · " + " · ".join(parts), tiled)


def render_summary(console: Console, result: Result, options: Display) -> RenderableType:
    """One row per head: how spread out it is and where its weight goes (in parts, one under
    the other, where the terminal is too narrow for every number whole)."""
    columns = [Column("head", "right"), *(Column(
        title.replace("top-k", f"top-{result.config.top_k}"), "right") for _, title in SUMMARY)]
    p = min(options.precision, 3)
    cells: list[list[Cell]] = [[str(row["head"]), *(f"{figure(row, key):.{p}f}"
                                                     for key, _ in SUMMARY)]
                               for row in _long(result).summary]
    widest = [max((len(str(row[k])) for row in cells), default=0) for k in range(len(columns))]
    extremes = [[max((row[k] for row in cells), key=lambda c: len(str(c)), default="")
                 for k in range(len(columns))]]
    table = fitted_listings(console, columns, widest, extremes, lambda: iter(cells), keys=1)
    note = Text(
        "Means over queries 1 to N-1. entropy: nats (0 = one key takes all); first, prev, "
        "self: weight on token 0, the previous token, the query itself; top-"
        f"{result.config.top_k}: weight on each query's heaviest keys; distance: tokens "
        "back, weighted by attention.", style="dim")
    return Group(Text("Summary per head", style="bold"), *table, note)


class _RowLists:
    """Rows start..stop of a (N, k) array or list as Python lists, read by their row index."""

    def __init__(self, values: Any, rows: range) -> None:
        self.start = rows.start
        self.lists = _as_lists(values[rows.start:rows.stop])

    def __getitem__(self, i: int) -> list[Any]:
        return self.lists[i - self.start]


class _TopK:
    """The top-k listing of one head: its cells, and their widths counted without formatting."""

    def __init__(self, result: Result, head: int, rows: range) -> None:
        # The rows shown as Python lists (a run's are numpy arrays): read one number at a time,
        # much faster; the other rows (8,172 of 8,192 in a long run's default) are never read.
        top_k = _long(result).stats["top_k"]
        self.ranks = len(top_k["index"][head][0]) if len(top_k["index"][head]) else 0
        self.index, self.weight = (_RowLists(top_k[name][head], rows)
                                   for name in ("index", "weight"))
        self.labels, self.rows = result.labels, rows
        self._widths: dict[tuple[int, int], int] = {}  # (token, limit) → cells of its label
        self._scans: dict[int, list[tuple[int, int]]] = {}  # limit → what _scan found

    def label(self, j: int, limit: int) -> str:
        return shorten(self.labels[j].strip() or self.labels[j], limit)

    def _label_w(self, j: int, limit: int) -> int:
        if (j, limit) not in self._widths:
            self._widths[j, limit] = cell_len(self.label(j, limit))
        return self._widths[j, limit]

    def _scan(self, limit: int) -> list[tuple[int, int]]:
        """Per column, at this label limit, its widest cell (a key's without its weight) and a
        row that holds it; one pass over the rows, kept for the next try."""
        if limit not in self._scans:
            def query_w(i: int) -> int:
                return len(str(i)) + 1 + cell_len(shorten(self.labels[i], limit))

            first = max(self.rows, key=query_w, default=self.rows.start)
            found = [(query_w(first) if self.rows else 0, first)]
            for r in range(self.ranks):
                best, holder = 0, first
                for i in self.rows:
                    j = self.index[i][r]
                    if j >= 0 and (w := self._label_w(j, limit) + len(str(j)) + 3) > best:
                        best, holder = w, i
                found.append((best, holder))
            self._scans[limit] = found
        return self._scans[limit]

    def widest(self, ranks: int, limit: int, precision: int) -> tuple[list[int], list[int]]:
        """Per column its widest cell, and a row that holds it: 'i label', then per rank
        'label(j) weight' (a weight in [0, 1] takes the same width at any value)."""
        weight_w = len(f"{1:.{precision}f}")
        found = self._scan(limit)[:ranks + 1]
        widths = [w + (weight_w if k and w else 0) for k, (w, _) in enumerate(found)]
        return widths, [holder for _, holder in found]

    def cells(self, i: int, ranks: int, limit: int, precision: int,
              depth: str | None) -> list[Text]:
        """Row i: the query, then 'label(j) weight' per key, the weight on its colour."""
        cells = [Text(f"{i} {shorten(self.labels[i], limit)}", style="bold")]
        for j, w in zip(self.index[i][:ranks], self.weight[i][:ranks], strict=True):
            cell = Text("" if j < 0 else f"{self.label(j, limit)}({j}) ")
            if j >= 0:
                # Weights on coloured cells with black or white text: readable on any background.
                style = cell_style(w, 0.0, 1.0, depth) if depth is not None else ""
                cell.append(f"{w:.{precision}f}", style=style)
            cells.append(cell)
        return cells

    def plain_cells(self, i: int, ranks: int, limit: int, precision: int) -> list[str]:
        """Row i as plain text, for a console without styles."""
        return [f"{i} {shorten(self.labels[i], limit)}",
                *("" if j < 0 else f"{self.label(j, limit)}({j}) {w:.{precision}f}"
                  for j, w in zip(self.index[i][:ranks], self.weight[i][:ranks], strict=True))]


def top_width(result: Result, head: int, rows: range, ranks: int, limit: int,
              precision: int, top: _TopK | None = None) -> int:
    """The width the top-k listing needs, counted without formatting its rows."""
    widths, _ = (top or _TopK(result, head, rows)).widest(ranks, limit, precision)
    return listing_width(_with_headers(widths), TOP_PAD)


def _with_headers(widths: list[int]) -> list[int]:
    return [max(w, cell_len("query" if k == 0 else f"key {k}")) for k, w in enumerate(widths)]


def _top_listing(console: Console, top: _TopK, rows: range, ranks: int, limit: int,
                 precision: int) -> Listing:
    columns = [Column("query", no_wrap=True),
               *(Column(f"key {r + 1}", no_wrap=True) for r in range(ranks))]
    widest, holders = top.widest(ranks, limit, precision)
    extremes = [top.cells(i, ranks, limit, precision, None) for i in dict.fromkeys(holders)
                if rows]
    widths = column_widths(console, None, columns, widest, extremes, TOP_PAD)
    depth, plain = depth_of(console), console.color_system is None

    def cells() -> Iterator[Sequence[Cell]]:
        for i in rows:
            yield (top.plain_cells(i, ranks, limit, precision) if plain
                   else top.cells(i, ranks, limit, precision, depth))

    return Listing(columns, widths, cells, pad=TOP_PAD)


def render_top_k(console: Console, result: Result, head: int,
                 options: Display) -> RenderableType:
    """Each query's heaviest keys as 'label(index) weight', fitted to the console, its rows
    printed as they are formatted."""
    start, stop = options.rows or (0, min(len(result.tokens), TOP_ROWS))
    rows = range(start, stop)
    top = _TopK(result, head, rows)
    k = top.ranks
    which = _which(result, head)
    title = Text(f"Top {k} keys per query{which} (label(index) weight)", style="bold")
    if k == 0:
        return Group(title, Text("--top-keys 0: no keys kept", style="dim"))
    # (keys, label width, decimals), most first: fewer decimals, shorter labels, fewer keys.
    p = min(options.precision, 2)
    tries = [(k, 10, options.precision), (k, 10, p), (k, 6, p),
             *((ranks, 6, p) for ranks in range(k - 1, 0, -1)), (1, 3, p)]
    for ranks, limit, p in tries:
        if top_width(result, head, rows, ranks, limit, p, top) <= console.width:
            break
    listing = _top_listing(console, top, rows, ranks, limit, p)
    notes = []
    if options.rows is None and stop < len(result.tokens):
        notes.append(f"queries {start}–{stop - 1} of {len(result.tokens):,}; see others with "
                     f"--rows a:b (e.g. --rows {stop}:{min(stop + TOP_ROWS, len(result.tokens))})"
                     ", all of them with --json")
    if ranks < k:
        notes.append(f"the top {ranks} of {k} keys fit {console.width} columns; --json has all")
    return Group(title, listing, *(Text(note, style="italic") for note in notes))


def render_window(console: Console, result: Result, head: int,
                  options: Display) -> RenderableType:
    """The exact weights of the --rows/--cols window, as a table or heatmap."""
    assert result.window is not None, "a tiled run holds its window"
    (r0, r1), (c0, c1) = result.window["rows"], result.window["cols"]
    a, b = options.rows or (r0, r1)
    c, d = options.cols or (c0, c1)
    cells = [plain(row[c - c0:d - c0]) for row in result.weights[head][a - r0:b - r0]]
    labels = result.labels
    rows = Axis([labels[i] for i in range(a, b)], list(range(a, b)))
    cols = Axis([labels[j] for j in range(c, d)], list(range(c, d)))
    which, span = _which(result, head), f"rows {a}:{b} × columns {c}:{d}"
    title = (f"Attention weights{which}, {span} (exact, rebuilt from the log-sum-exp)")
    if result.config.measure == "norm":
        title = f"‖α·W_O v‖{which}, {span} (rows renormalised over every key)"
    elif result.config.measure == "rollout":
        title = (f"Attention rollout to layer {result.config.layer}, heads averaged, {span} "
                 "(exact, walked back through every layer)")
    top = weight_top(result.weights, options.scale)
    return render_view(console, title, rows, cols, cells, replace(options, rows=None, cols=None),
                       vmin=0.0, vmax=top, scale=options.scale)


def pooled_range(result: Result, scale: str) -> LogRange | None:
    """The log range every head's pooled map shares (None: each map its own, --scale table)."""
    values = [pmap.values for pmap in _long(result).maps]
    top = weight_top(values, scale)
    return None if top is None else log_range(values, top)


def render_long(console: Console, result: Result, options: Display) -> RenderableType:
    """Header, summary, then per head: pooled heatmap, top keys, window; then the query's view."""
    parts: list[RenderableType] = [render_header(result), Text(),
                                   render_summary(console, result, options)]
    maps = {pmap.head: pmap for pmap in _long(result).maps}
    shared = pooled_range(result, options.scale) if maps else None  # one range for every head
    rollout = result.config.measure == "rollout"  # one window, heads averaged
    for head in range(len(_long(result).summary)):
        number = result.head_number(head)
        if number in maps:
            parts += [Text(), render_pooled(console, maps[number], result.config.heads,
                                            result.config.pool or "max", options.scale,
                                            shared)]
        # Made when reached: each head's listings are measured once the heads before it are out.
        parts += [Text(), Later(partial(render_top_k, console, result, head, options))]
        if (options.rows is not None or options.cols is not None) and not rollout:
            parts += [Text(), Later(partial(render_window, console, result, head, options))]
    if rollout and (options.rows is not None or options.cols is not None):
        parts += [Text(), Later(partial(render_window, console, result, 0, options))]
    if result.query is not None:
        parts += [Text(), render_query(console, result, options)]
    return Group(*parts)
