"""`attncli kvcache`: one row per decoding step, the check against the full pass, the totals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.render.draw.prose import prose
from attncli.render.draw.tables import LABEL_MAX, MIN_PRECISION, shorten
from attncli.render.lessons.fit import FitColumn, column_width, cut_note, first_fit, fitted_table
from attncli.render.lessons.lesson_text import diff_text, text

if TYPE_CHECKING:
    from attncli.records.lessons import KVCacheResult

SHOWN_WEIGHTS = 8  # the most recent keys a step's weights show; --json has them all
TOKEN_LIMITS = (LABEL_MAX, 12)  # a token label whole up to 16 cells, else cut to 12
LAST_TOKEN_LIMITS = (8, 4)  # cut further only once every optional column is left out
OPTIONAL = (6, 5, 3)  # left out in this order: MACs without, MACs cached, cache bytes
LEFT, WEIGHTS = (1, 4), 4


@dataclass(frozen=True)
class _Layout:
    """What the table shows: weights per step, decimals, token label width, columns left out."""

    shown: int
    precision: int
    token_limit: int
    dropped: tuple[int, ...]


def _weights(values: list[float], precision: int, shown: int = SHOWN_WEIGHTS) -> str:
    cut = values[-shown:]
    head = "… " if len(values) > len(cut) else ""
    return head + " ".join(f"{v:.{precision}f}" for v in cut)


def _fixed(result: KVCacheResult) -> dict[int, list[str]]:
    """The cells of the columns that never change with the layout."""
    steps = result.steps
    return {0: [str(s.index) for s in steps], 2: [str(s.cache_len) for s in steps],
            3: [f"{s.cache_bytes:,}" for s in steps], 5: [f"{s.macs_cached:,}" for s in steps],
            6: [f"{s.macs_recompute:,}" for s in steps]}


def _layouts(result: KVCacheResult, head: int, names: list[str], fixed: dict[int, list[str]],
             precision: int) -> Iterator[tuple[_Layout, list[int]]]:
    """Every layout from the fullest to the most cut, with its columns' widths."""
    fixed_width = {k: column_width(names[k], cells) for k, cells in fixed.items()}
    tokens = [s.token for s in result.steps]
    token_width = {limit: column_width(names[1], (shorten(t, limit) for t in tokens))
                   for limit in TOKEN_LIMITS + LAST_TOKEN_LIMITS}
    last = result.steps[-1].weights[head]  # the longest row: its cell is the widest
    for n_dropped in range(len(OPTIONAL) + 1):
        dropped = OPTIONAL[:n_dropped]
        limits = TOKEN_LIMITS + (LAST_TOKEN_LIMITS if n_dropped == len(OPTIONAL) else ())
        for p in range(precision, min(precision, MIN_PRECISION) - 1, -1):
            for shown in range(SHOWN_WEIGHTS, 0, -1):
                weights_width = column_width(names[WEIGHTS], [_weights(last, p, shown)])
                for limit in limits:
                    widths = {**fixed_width, 1: token_width[limit], WEIGHTS: weights_width}
                    yield (_Layout(shown, p, limit, dropped),
                           [widths[k] for k in range(len(names)) if k not in dropped])


def _steps_table(console: Console, result: KVCacheResult, head: int, lang: str,
                 precision: int) -> list[RenderableType]:
    names = text(lang, "kv.columns", h=head).split("|")
    fixed = _fixed(result)
    layout = first_fit(console.width, _layouts(result, head, names, fixed, precision))
    cells = {**fixed, 1: [shorten(s.token, layout.token_limit) for s in result.steps],
             WEIGHTS: [_weights(s.weights[head], layout.precision, layout.shown)
                       for s in result.steps]}
    columns = [FitColumn(names[k], cells[k], "left" if k in LEFT else "right")
               for k in range(len(names)) if k not in layout.dropped]
    parts: list[RenderableType] = [fitted_table(console, columns)]
    note = cut_note(lang, console.width, [names[k] for k in layout.dropped],
                    layout.precision, precision)
    if note:
        parts.append(prose(console, note, style="italic"))
    return parts


def _what(result: KVCacheResult) -> str:
    config = result.config
    if config.get("model"):
        return f"{config['model']}, layer {config['layer']}, {result.totals['layers']} layers"
    return f"{config['variant']}, {config['heads']} head(s)"


def render_kvcache(console: Console, result: KVCacheResult, lang: str = "en",
                   precision: int = 3, head: int = 0) -> RenderableType:
    """Every step's weights over the cache, its bytes and multiply-adds; then check and totals."""
    totals = result.totals
    ok = result.ok
    check = text(lang, "kv.check" if ok else "kv.check_bad",
                 weights=diff_text(result.weights_max_abs_diff),
                 context=diff_text(result.context_max_abs_diff))
    ratio = totals["macs_recompute"] / max(totals["macs_cached"], 1)
    return Group(
        Text(text(lang, "kv.title", n=len(result.steps), what=_what(result)), style="bold"),
        prose(console, text(lang, "kv.explain")),
        *_steps_table(console, result, head, lang, precision),
        prose(console, check, style="" if ok else "bold"),
        prose(console, text(lang, "kv.prefill", n=totals["tokens"],
                            macs=f"{totals['prefill_macs']:,}",
                            first=f"{totals['first_step_macs']:,}")),
        prose(console, text(lang, "kv.later", last=f"{totals['last_step_macs_cached']:,}",
                            recompute=f"{totals['last_step_macs_recompute']:,}",
                            cached=f"{totals['macs_cached']:,}",
                            total_recompute=f"{totals['macs_recompute']:,}",
                            ratio=f"{ratio:.1f}", bytes=f"{totals['cache_bytes']:,}")))
