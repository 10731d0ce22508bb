"""`attncli heads`: every layer × head at a glance, as thumbnails and a table of measures."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from rich.color import Color
from rich.console import Console, Group, RenderableType
from rich.style import Style
from rich.text import Text

from attncli.core.result import Matrix
from attncli.records.heads import HeadsResult, Measure, figure
from attncli.render.draw.colors import cell_style, legend, shade_of
from attncli.render.draw.fitted import fitted_listings
from attncli.render.draw.listing import Cell, Column, listing_width
from attncli.render.draw.palette import depth_of, swatch
from attncli.render.draw.streamed import Later

MEASURE_HELP = {
    "entropy": "mean entropy of a row, nats (0 = one token, high = spread out)",
    "prev": "share of attention on the previous token",
    "first": "share on the first token (the 'sink')",
    "self": "share on the token itself",
    "distance": "mean number of tokens back attended",
}
SCORE_HELP = {
    "previous_token": "share of the head's whole attention on the previous token",
    "duplicate_token": "share on earlier copies of the query's own token",
    "induction": "share on the token after an earlier copy of the query's token (TransformerLens's "
    "detect_head scores: Σ weights × pattern / Σ weights over every row; scores and measures "
    "are always of the raw weights)",
}
EFFECT_HELP = ("rise of the text's mean loss, nats, with the head's output replaced by its mean "
               "over the positions (attncli ablate --heads all)")
MIN_SIDE = 3
SINK_SHARE = 0.5  # a head putting this share or more on the first token is marked a sink
MEASURE_VIEWS = {
    "norm": " Pictures: ‖α_ij · W_O v_j‖ per head, rows renormalised (Kobayashi et al. 2020).",
    "rollout": " Pictures: attention rollout to each layer, Ã_l ··· Ã_0 with Ã = 0.5·I + "
    "0.5·(heads' mean), rows renormalised: one heads-averaged matrix per layer (Abnar & "
    "Zuidema 2020).",
}


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
    first = result.config.get("layers", [0])[0]
    label = len(f"L{first + layers - 1} ")
    full = len(result.thumbnails[0][0])
    side = min(full, (console.width - label) // heads - 1)
    if side < MIN_SIDE:
        need = label + heads * (MIN_SIDE + 1)
        return Text(f"(the grid of {layers}×{heads} thumbnails needs {need} columns; the "
                    f"terminal has {console.width}: see the table, or widen the terminal)",
                    style="italic")
    depth = depth_of(console)
    names = ["heads' mean"] if result.config.get("measure") == "rollout" else [
        f"h{h}" for h in range(heads)]
    header = Text(" " * label + "".join(n.ljust(side + 1) for n in names), style="bold")
    parts: list[RenderableType] = [header]
    shared = thumbnail_top(result, scale, [])  # all heads' top, found once: not once a picture
    for layer, row in enumerate(result.thumbnails):
        pictures = [_thumbnail_lines(pool(m, side), depth,
                                     thumbnail_top(result, scale, m) if scale == "table"
                                     else shared)
                    for m in row]
        for k in range(len(pictures[0])):
            line = Text()
            line.append(f"L{first + layer}".ljust(label) if k == 0 else " " * label,
                        style="bold")
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


def _labels_text(m: Measure) -> str:
    """A head's labels with their scores: "induction 0.78"."""
    return ", ".join(f"{name} {figure(m, name):.2f}" for name in m.get("labels", []))


def render_measures(console: Console, result: HeadsResult, precision: int) -> RenderableType:
    """One row per head: the measures and the scores that say what it does, each coloured on
    its range, a labelled score marked +, and the labels where the width allows; printed in
    chunks of rows, widths counted from the data."""
    depth = depth_of(console)
    measures = result.measures
    names = [*MEASURE_HELP, *(["effect"] if measures and "effect" in measures[0] else [])]
    scores = [n for n in SCORE_HELP if measures and n in measures[0]]
    columns = [Column("layer", "right"), Column("head", "right"),
               *(Column(name, "right") for name in names),
               *(Column(name.replace("_", "_\n"), "right") for name in scores)]
    ranges = {name: (min(figure(m, name) for m in measures),
                     max(figure(m, name) for m in measures))
              for name in names + scores}
    # The widest number of a column is its smallest or its largest; the layer and head
    # columns are as wide as their largest number; a score has room for its mark.
    mark = 1 if scores else 0
    widest = [len(str(max((m["layer"] for m in measures), default=0))),
              len(str(max((m["head"] for m in measures), default=0))),
              *(max(len(f"{v:.{precision}f}") for v in ranges[name]) + (name in scores) * mark
                for name in names + scores)]
    extremes = [[str(max(m["layer"] for m in measures)), str(max(m["head"] for m in measures)),
                 *(max((f"{v:.{precision}f}" for v in ranges[name]), key=len)
                   + (" " if name in scores else "") for name in names + scores)]]
    labels = [_labels_text(m) for m in measures]
    room = max(map(len, labels), default=0)
    natural = [max(w, *(len(line) for line in str(c.header).split("\n")))
               for w, c in zip(widest, columns, strict=True)]
    labelled = room > 0 and listing_width([*natural, max(room, 6)]) <= console.width
    if labelled:
        columns.append(Column("labels"))
        widest.append(room)
        extremes[0].append(max(labels, key=len))

    def rows() -> Iterator[list[Cell]]:
        for m, label in zip(measures, labels, strict=True):
            cells: list[Cell] = [str(m["layer"]), str(m["head"])]
            for name in names + scores:
                low, high = (ranges[name] if name in ("entropy", "distance", "effect")
                             else (0.0, 1.0))
                value = figure(m, name)
                style = cell_style(value, low, high, depth) if depth is not None else ""
                cell = Text(f"{value:.{precision}f}", style=style)
                if name in scores:
                    cell.append("+" if name in m.get("labels", []) else " ")
                cells.append(cell)
            if labelled:
                cells.append(label)
            yield cells

    helps = MEASURE_HELP | ({"effect": EFFECT_HELP} if "effect" in names else {}) | {
        n: SCORE_HELP[n] for n in scores}
    lines = [f"{name}: {text}" for name, text in helps.items()]
    if scores:
        lines.append(f"+: labelled, the score is {result.config.get('threshold', 0):.2f} or more"
                     + ("" if labelled or room == 0 else " (the labels are listed above the "
                        "thumbnails; a wider terminal shows them here)"))
    return Group(*fitted_listings(console, columns, widest, extremes, rows, keys=2),
                 Text("\n".join(lines), style="dim"))



def _score_cell(m: Measure, name: str, threshold: float, depth: str | None) -> Text:
    """Two digits (the score × 100, 99 at most) and a mark: + labelled, * sink head, # both."""
    value = figure(m, name)
    labelled, sink = name in m.get("labels", []), m["first"] >= SINK_SHARE
    mark = "#" if labelled and sink else "+" if labelled else "*" if sink else " "
    cell = Text(f"{min(99, round(value * 100)):2d}",
                style=cell_style(value, 0.0, 1.0, depth) if depth is not None else "")
    if labelled and depth is not None:
        cell.stylize("bold underline")
    return cell + Text(mark)


SCORES_TITLE = ("Head scores × 100 (each head's share of attention on the pattern; layers down, "
                "heads across)")


def render_scores(console: Console, result: HeadsResult,
                  title: str = SCORES_TITLE) -> RenderableType:
    """The overview: a layer × head grid of each score, side by side when the width allows."""
    depth, names = depth_of(console), [n for n in SCORE_HELP if n in result.measures[0]]
    by_head = {(m["layer"], m["head"]): m for m in result.measures}
    layers = sorted({m["layer"] for m in result.measures})
    heads = sorted({m["head"] for m in result.measures})
    # A score's block: three cells a head, and at least its name and a space (4 heads are 12).
    label, cells = len(f"L{layers[-1]} "), 3 * len(heads)
    block = max(cells + 1, *(len(n) + 1 for n in names))
    if label + block > console.width:
        return Text(f"(the grid of {len(heads)} heads' scores needs {label + block} columns; the "
                    f"terminal has {console.width}: see the table)", style="italic")
    per_line = max(1, min(len(names), (console.width - label) // block))
    threshold = float(result.config.get("threshold", 1.0))
    parts: list[RenderableType] = [Text(title, style="bold")]
    for start in range(0, len(names), per_line):
        shown = names[start:start + per_line]
        parts.append(Text(" " * label + "".join(n.ljust(block) for n in shown), style="bold"))
        parts.append(Text(" " * label + "".join(
            "".join(f"{h:>2} " for h in heads).ljust(block) for _ in shown), style="dim"))
        for layer in layers:
            line = Text(f"L{layer}".ljust(label), style="bold")
            for name in shown:
                for h in heads:
                    line.append_text(_score_cell(by_head[(layer, h)], name, threshold, depth))
                line.append(" " * (block - cells))
            parts.append(line)
    parts.append(Text(f"* sink head: {SINK_SHARE:.2f} or more of its attention on the first "
                      f"token · + labelled: the score is {threshold:.2f} or more"
                      f"{' (the probed score)' if 'probe' in result.config else ''} · # both",
                      style="dim"))
    labelled = sorted((m for m in result.measures if m.get("labels")),
                      key=lambda m: -max(figure(m, n) for n in m.get("labels", [])))
    if labelled:
        heads_text = [f"L{m['layer']} h{m['head']} {_labels_text(m)}" for m in labelled[:12]]
        more = f", … ({len(labelled) - 12} more)" if len(labelled) > 12 else ""
        parts.append(Text("labelled: " + "; ".join(heads_text) + more))
    return Group(*parts)


def render_sinks(console: Console, result: HeadsResult) -> RenderableType:
    """Each layer's sink on a few lines: its share on the first token, and that token's norm
    over the median of the others."""
    # A scan's layer where no document gave a share (None) shows a dash.
    entries = [f"L{s['layer']:<3}" + ("   –" if s["first_share"] is None
                                      else f"{s['first_share']:.2f}")
               + (f" {s['norm_ratio']:6.1f}×" if s.get("norm_ratio") is not None else "")
               for s in result.layers]
    width = max((len(e) for e in entries), default=1) + 3
    per_line = max(1, console.width // width)
    lines = [Text("Sinks per layer: the heads' mean share of attention on the first token "
                  "(query rows 1..T-1), and the first token's norm ÷ the median of the others "
                  "in the residual stream entering the layer", style="bold")]
    lines += [Text("".join(e.ljust(width) for e in entries[k:k + per_line]).rstrip())
              for k in range(0, len(entries), per_line)]
    return Group(*lines)


def render_heads(console: Console, result: HeadsResult, precision: int = 3,
                 scale: str = "shared") -> RenderableType:
    """The `heads` view: what it shows, the scores' grid, the sinks, the thumbnails, then the
    table of measures."""
    m, config = result.model, result.config
    first, stop = config.get("layers", [0, m.layers])
    which = (f"All {m.layers} layers" if (first, stop) == (0, m.layers)
             else f"Layers {first}–{stop - 1} of {m.layers}")
    probe = config.get("probe")
    source = (f" · probe: {probe['length']} random tokens × 2 (seed {probe['seed']}"
              f"{', after the BOS' if probe['bos'] else ''})" if probe is not None else "")
    view = MEASURE_VIEWS.get(config.get("measure", "weights"), "")
    title = Text.assemble(
        (f"{which} × {m.heads} heads", "bold"),
        f" ({m.kv_heads} kv heads)" if m.kv_heads != m.heads else "",
        f" · {config['num_tokens']} tokens{source} · sorted by {config['sort']}\n",
        (f"Each head's attention over its layer's input (the {m.norm} residual stream); "
         f"layers and heads are 0-based.{view}", "dim"))
    parts: list[RenderableType] = [title, Text()]
    if result.measures and "induction" in result.measures[0]:
        parts += [Later(partial(render_scores, console, result)), Text()]
    if result.layers:
        parts += [Later(partial(render_sinks, console, result)), Text()]
    return Group(*parts, Later(partial(render_grid, console, result, scale)), Text(),
                 Later(partial(render_measures, console, result, precision)))
