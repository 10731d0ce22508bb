"""`attncli kvcache`: one row per decoding step, the check against the full pass, the totals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from attncli.render.draw.prose import prose
from attncli.render.draw.tables import shorten
from attncli.render.lessons.lesson_text import diff_text, text

if TYPE_CHECKING:
    from attncli.lessons.kvcache import KVCacheResult

SHOWN_WEIGHTS = 8  # the most recent keys a step's weights show; --json has them all


def _weights(values: list[float], precision: int) -> str:
    cut = values[-SHOWN_WEIGHTS:]
    head = "… " if len(values) > len(cut) else ""
    return head + " ".join(f"{v:.{precision}f}" for v in cut)


def _steps_table(result: KVCacheResult, head: int, lang: str, precision: int) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    for k, name in enumerate(text(lang, "kv.columns", h=head).split("|")):
        table.add_column(name, justify="left" if k in (1, 4) else "right", no_wrap=k != 4)
    for step in result.steps:
        table.add_row(str(step.index), escape(shorten(step.token, 12)), str(step.cache_len),
                      f"{step.cache_bytes:,}", _weights(step.weights[head], precision),
                      f"{step.macs_cached:,}", f"{step.macs_recompute:,}")
    return table


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
        _steps_table(result, head, lang, precision),
        prose(console, check, style="" if ok else "bold"),
        prose(console, text(lang, "kv.prefill", n=totals["tokens"],
                            macs=f"{totals['prefill_macs']:,}",
                            first=f"{totals['first_step_macs']:,}")),
        prose(console, text(lang, "kv.later", last=f"{totals['last_step_macs_cached']:,}",
                            recompute=f"{totals['last_step_macs_recompute']:,}",
                            cached=f"{totals['macs_cached']:,}",
                            total_recompute=f"{totals['macs_recompute']:,}",
                            ratio=f"{ratio:.1f}", bytes=f"{totals['cache_bytes']:,}")))
