"""One query's view: the keys it attends to as a ranking of horizontal bars."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import Result
from attncli.i18n import text
from attncli.render.draw.colors import block_style
from attncli.render.draw.palette import depth_of
from attncli.render.draw.tables import shorten

LABEL_MAX = 16
BAR_MAX = 40
LONG_KEYS = 20  # keys ranked for a tiled run's query
EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float, vmax: float, width: int) -> str:
    """A horizontal bar of value on 0..vmax, width cells at full length, in eighths of a cell."""
    eighths = 0 if vmax <= 0 else round(max(min(value / vmax, 1.0), 0.0) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[part] if part else "")).ljust(width)


def plain(values: Sequence[float | None]) -> list[float | None]:
    """A row of numbers (a list, or a numpy array with NaN for masked) as floats and None."""
    row = values.tolist() if hasattr(values, "tolist") else list(values)
    return [None if v is None or v != v else v for v in row]


def ranking(result: Result, query: int, head: int,
            keys: range | None = None) -> tuple[list[tuple[int, float]], list[int], list[int]]:
    """(key, weight) pairs by falling weight (ties by index), the future keys, and the keys
    behind a sliding window."""
    keys = keys if keys is not None else range(len(result.tokens))
    assert result.query is not None and result.query.index == query
    row = plain(result.query.weights[head])
    causal, window = result.traits.causal, result.key_window
    masked = [j for j in keys if causal and j > query]
    behind = [j for j in keys if causal and window is not None and query - j >= window]
    hidden = set(masked) | set(behind)
    pairs = [(j, w) for j in keys if j not in hidden and (w := row[j]) is not None]
    return sorted(pairs, key=lambda p: (-p[1], p[0])), masked, behind


def _title(result: Result, query: int, head: int, lang: str) -> str:
    title = text(lang, "query.title", i=query, label=repr(result.labels[query]))
    if result.config.heads > 1:
        title += f" — {text(lang, 'head', h=result.head_number(head), n=result.config.heads)}"
    return title


def render_query_head(console: Console, result: Result, query: int, head: int,
                      options: Display) -> RenderableType:
    """The ranked bars of one head for the query."""
    keys = range(*options.cols) if options.cols else None
    pairs, masked, behind = ranking(result, query, head, keys)
    total = len(pairs)
    if result.long is not None:
        pairs = pairs[:LONG_KEYS]  # a long row: its heaviest keys
    labels = {j: f"{j} {shorten(result.labels[j], LABEL_MAX)}" for j, _ in pairs}
    label_w = max((cell_len(s) for s in labels.values()), default=0)
    value_w = len(f"{1:.{options.precision}f}")
    width = max(min(BAR_MAX, console.width - label_w - value_w - 3), 4)
    vmax = max((w for _, w in pairs), default=0.0)
    depth = depth_of(console)
    lines = Text(no_wrap=True, overflow="crop")
    for k, (j, weight) in enumerate(pairs):
        lines.append(labels[j] + " " * (label_w - cell_len(labels[j]) + 1), style="bold")
        lines.append(bar(weight, vmax, width),
                     style=block_style(weight, 0.0, vmax, depth) if depth is not None else "")
        lines.append(f" {weight:.{options.precision}f}")
        if k < len(pairs) - 1:
            lines.append("\n")
    parts: list[RenderableType] = [Text(_title(result, query, head, options.lang), style="bold"),
                                   lines]
    if len(pairs) < total:
        parts.append(Text(f"its {len(pairs)} heaviest keys of {total:,} (exact row; --json has "
                          "all)", style="dim"))
    if behind:
        parts.append(Text(text(options.lang, "query.windowed", a=behind[0], b=behind[-1],
                               w=result.key_window), style="dim"))
    if masked:
        parts.append(Text(text(options.lang, "query.masked", a=masked[0], b=masked[-1]),
                          style="dim"))
    return Group(*parts)


def render_query(console: Console, result: Result, options: Display) -> RenderableType:
    """The query's ranking for each head shown."""
    assert result.query is not None
    parts: list[RenderableType] = []
    for head in range(result.num_heads):
        parts += [render_query_head(console, result, result.query.index, head, options), Text()]
    return Group(*parts[:-1])
