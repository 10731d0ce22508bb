"""`attncli run` on a long input: summary per head, pooled heatmaps, top keys, exact windows."""

from __future__ import annotations

from dataclasses import replace

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import LongStats, Result
from attncli.render.draw.colors import cell_style
from attncli.render.draw.palette import depth_of
from attncli.render.draw.pooled import render_pooled
from attncli.render.draw.scales import weight_top
from attncli.render.draw.tables import Axis, shorten
from attncli.render.draw.views import render_view
from attncli.render.query import plain, render_query
from attncli.render.stages import head_title

TOP_ROWS = 20  # queries in the top-k table without --rows
SUMMARY = (("entropy", "entropy"), ("first", "first"), ("prev", "prev"), ("self", "self"),
           ("top_k_mass", "top-k"), ("distance", "distance"))


def _long(result: Result) -> LongStats:
    assert result.long is not None, "a tiled run's result"
    return result.long


def _which(result: Result, head: int) -> str:
    return f" — {head_title(result, head, 'en')}" if result.config.heads > 1 else ""


def render_header(result: Result) -> Text:
    """The variant, its sizes, and what the tiled path computed."""
    c = result.config
    parts = [f"{c.num_tokens:,} tokens", f"d_in {c.d_in} → d_out {c.d_out}",
             f"{c.heads} head{'s' if c.heads != 1 else ''}", f"seed {c.seed}"]
    return Text.assemble(
        (result.traits.title, "bold"), " · " + " · ".join(parts),
        ("\ntiled path: context, log-sum-exp, entropy and top-k, without the N×N matrix",
         "dim"))


def render_summary(result: Result, options: Display) -> RenderableType:
    """One row per head: how spread out it is and where its weight goes."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("head", justify="right")
    for _, title in SUMMARY:
        table.add_column(title.replace("top-k", f"top-{result.config.top_k}"), justify="right")
    p = min(options.precision, 3)
    for row in _long(result).summary:
        table.add_row(str(row["head"]), *(f"{row[key]:.{p}f}" for key, _ in SUMMARY))
    note = Text(
        "Means over queries 1 to N-1. entropy: nats (0 = one key takes all); first, prev, "
        "self: weight on token 0, the previous token, the query itself; top-"
        f"{result.config.top_k}: weight on each query's heaviest keys; distance: tokens "
        "back, weighted by attention.", style="dim")
    return Group(Text("Summary per head", style="bold"), table, note)


def _top_table(result: Result, head: int, rows: range, ranks: int, limit: int,
               precision: int, depth: str | None) -> Table:
    index, weight = (_long(result).stats["top_k"][name][head] for name in ("index", "weight"))
    labels = result.labels
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    table.add_column("query", no_wrap=True)
    for r in range(ranks):
        table.add_column(f"key {r + 1}", no_wrap=True)
    for i in rows:
        cells = [Text(f"{i} {shorten(labels[i], limit)}", style="bold")]
        for j, w in zip(index[i][:ranks], weight[i][:ranks], strict=True):
            label = labels[j].strip() or labels[j]
            cell = Text("" if j < 0 else f"{shorten(label, limit)}({j}) ")
            if j >= 0:
                # Weights on coloured cells with black or white text: readable on any background.
                style = cell_style(w, 0.0, 1.0, depth) if depth is not None else ""
                cell.append(f"{w:.{precision}f}", style=style)
            cells.append(cell)
        table.add_row(*cells)
    return table


def top_width(result: Result, head: int, rows: range, ranks: int, limit: int,
              precision: int) -> int:
    """The width _top_table needs, counted without building it: per column its widest cell,
    plus a left pad and a divider for every column after the first."""
    index, weight = (_long(result).stats["top_k"][name][head] for name in ("index", "weight"))
    labels = result.labels
    widths = [max([cell_len("query"), *(cell_len(f"{i} {shorten(labels[i], limit)}")
                                        for i in rows)])]
    for r in range(ranks):
        cells = [0 if j < 0 else cell_len(shorten(labels[j].strip() or labels[j], limit))
                 + len(f"({j}) {w:.{precision}f}")
                 for j, w in ((index[i][r], weight[i][r]) for i in rows)]
        widths.append(max(cell_len(f"key {r + 1}"), *cells) + 2)
    return sum(widths)


def render_top_k(console: Console, result: Result, head: int,
                 options: Display) -> RenderableType:
    """Each query's heaviest keys as 'label(index) weight', fitted to the console."""
    k = len(_long(result).stats["top_k"]["index"][head][0]) if result.tokens else 0
    start, stop = options.rows or (0, min(len(result.tokens), TOP_ROWS))
    rows, depth = range(start, stop), depth_of(console)
    which = _which(result, head)
    title = Text(f"Top {k} keys per query{which} (label(index) weight)", style="bold")
    if k == 0:
        return Group(title, Text("--top-k 0: no keys kept", style="dim"))
    # (keys, label width, decimals), most first: fewer decimals, shorter labels, fewer keys.
    p = min(options.precision, 2)
    tries = [(k, 10, options.precision), (k, 10, p), (k, 6, p),
             *((ranks, 6, p) for ranks in range(k - 1, 0, -1)), (1, 3, p)]
    for ranks, limit, p in tries:
        if top_width(result, head, rows, ranks, limit, p) <= console.width:
            break
    table = _top_table(result, head, rows, ranks, limit, p, depth)
    notes = []
    if options.rows is None and stop < len(result.tokens):
        notes.append(f"queries {start}–{stop - 1} of {len(result.tokens):,}; see others with "
                     f"--rows a:b (e.g. --rows {stop}:{min(stop + TOP_ROWS, len(result.tokens))})"
                     ", all of them with --json")
    if ranks < k:
        notes.append(f"the top {ranks} of {k} keys fit {console.width} columns; --json has all")
    return Group(title, table, *(Text(note, style="italic") for note in notes))


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
    which = _which(result, head)
    title = (f"Attention weights{which}, rows {a}:{b} × columns {c}:{d} (exact, rebuilt from "
             "the log-sum-exp)")
    top = weight_top(result.weights, options.scale)
    return render_view(console, title, rows, cols, cells, replace(options, rows=None, cols=None),
                       vmin=0.0, vmax=top, scale=options.scale)


def _pooled_top(result: Result, scale: str) -> float | None:
    """The top of the pooled maps' shared range (None: each map its own)."""
    return weight_top([pmap.values for pmap in _long(result).maps], scale)


def render_long(console: Console, result: Result, options: Display) -> RenderableType:
    """Header, summary, then per head: pooled heatmap, top keys, window; then the query's view."""
    parts: list[RenderableType] = [render_header(result), Text(),
                                   render_summary(result, options)]
    maps = {pmap.head: pmap for pmap in _long(result).maps}
    top = _pooled_top(result, options.scale) if maps else None  # one range for every head
    for head in range(result.num_heads):
        number = result.head_number(head)
        if number in maps:
            parts += [Text(), render_pooled(console, maps[number], result.config.heads,
                                            result.config.pool or "max", options.scale, top)]
        parts += [Text(), render_top_k(console, result, head, options)]
        if options.rows is not None or options.cols is not None:
            parts += [Text(), render_window(console, result, head, options)]
    if result.query is not None:
        parts += [Text(), render_query(console, result, options)]
    return Group(*parts)
