"""`attncli flash`: the online softmax of one query, one row per key block, then the check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from attncli.render.draw.colors import MASKED_MARK
from attncli.render.draw.prose import prose
from attncli.render.draw.tables import Axis, render_matrix
from attncli.render.lessons.lesson_text import diff_text, text

if TYPE_CHECKING:
    from attncli.lessons.flash import FlashResult, FlashStep

SHOWN_ACC = 3  # accumulator entries shown per block; --json has them all
WEIGHTS_OK, CONTEXT_OK = 1e-6, 1e-5  # against the naive full pass


def _numbers(values: Sequence[float | None], precision: int, limit: int | None = None) -> str:
    shown = values if limit is None else values[:limit]
    cells = [MASKED_MARK if v is None else f"{v:.{precision}f}" for v in shown]
    return " ".join(cells) + (" …" if len(shown) < len(values) else "")


def _row(step: FlashStep, lang: str, precision: int) -> list[str]:
    keys = f"{step.keys[0]}–{step.keys[1] - 1}"
    state = [f"{step.m:.{precision}f}", "", f"{step.l:.{precision}f}",
             _numbers(step.acc, precision, SHOWN_ACC)]
    if step.skipped:
        return [keys, text(lang, "flash.skipped"), "", *state]
    state[1] = f"{step.scale:.{precision}f}"
    return [keys, _numbers(step.scores or [], precision), f"{step.block_max:.{precision}f}", *state]


def _steps_table(result: FlashResult, lang: str, precision: int) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    for k, name in enumerate(text(lang, "flash.columns").split("|")):
        table.add_column(name, justify="left" if k in (1, 6) else "right", no_wrap=k != 1)
    for step in result.steps:
        table.add_row(*_row(step, lang, precision), style="dim" if step.skipped else "")
    return table


def _final(console: Console, result: FlashResult, precision: int) -> RenderableType:
    labels = [escape(t.text) for t in result.tokens]
    row = Axis([labels[result.query]], [result.query])
    cols = Axis(labels, list(range(len(labels))))
    causal = result.config["variant"] in ("causal", "multihead")
    weights = [None if causal and j > result.query else w for j, w in enumerate(result.weights)]
    return Group(
        render_matrix(console, "weights", row, cols, [weights], precision, 0.0, 1.0,
                      show_legend=False),
        Text("context  " + _numbers(list(result.context), precision)))


def render_flash(console: Console, result: FlashResult, lang: str = "en",
                 precision: int = 3) -> RenderableType:
    """The blocks' scores and running state, the final weights and context, check and memory."""
    label = escape(result.tokens[result.query].text)
    title = text(lang, "flash.title", i=result.query, label=label, block=result.block)
    if result.config.get("heads", 1) > 1:
        title += f" · head {result.head}"
    ok = result.weights_max_abs_diff <= WEIGHTS_OK and result.context_max_abs_diff <= CONTEXT_OK
    check = text(lang, "flash.check" if ok else "flash.check_bad",
                 weights=diff_text(result.weights_max_abs_diff),
                 context=diff_text(result.context_max_abs_diff),
                 tiled=diff_text(result.tiled_max_abs_diff))
    num_tokens = len(result.tokens)
    memory = text(lang, "flash.memory", heads=result.config.get("heads", 1), n=num_tokens,
                  naive=f"{result.naive_cells:,}", tiled=f"{result.tiled_cells:,}")
    return Group(Text(title, style="bold"), prose(console, text(lang, "flash.explain")),
                 _steps_table(result, lang, precision), Text(text(lang, "flash.final")),
                 _final(console, result, precision), prose(console, check),
                 prose(console, memory))
