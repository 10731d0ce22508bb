"""`attncli flash`: the online softmax of one query, one row per key block, then the check."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.render.draw.colors import MASKED_MARK
from attncli.render.draw.prose import prose
from attncli.render.draw.tables import MIN_PRECISION, Axis, render_matrix
from attncli.render.lessons.fit import (
    FitColumn,
    column_width,
    cut_note,
    first_fit,
    fitted_labels,
    fitted_table,
)
from attncli.render.lessons.lesson_text import diff_text, text

if TYPE_CHECKING:
    from attncli.records.lessons import FlashResult

SHOWN_ACC = 3  # accumulator entries shown per block; --json has them all
SHOWN_SCORES = 8  # scores shown per block
SCORES, ACC = 1, 6
OPTIONAL = (6, 4, 2)  # left out in this order: accumulator, rescale, block max


@dataclass(frozen=True)
class _Layout:
    """What the table shows: scores and accumulator entries per block, decimals, columns."""

    scores: int
    acc: int
    precision: int
    dropped: tuple[int, ...]


def _numbers(values: Sequence[float | None], precision: int, limit: int | None = None) -> str:
    shown = values if limit is None else values[:limit]
    cells = [MASKED_MARK if v is None else f"{v:.{precision}f}" for v in shown]
    return " ".join(cells) + (" …" if len(shown) < len(values) else "")


def _number(value: float | None, precision: int) -> str:
    return "" if value is None else f"{value:.{precision}f}"


def _cells(result: FlashResult, lang: str, p: int, scores: int, acc: int) -> list[list[str]]:
    """The table's columns at p decimals, scores and acc entries shown per block."""
    steps = result.steps
    return [[f"{s.keys[0]}–{s.keys[1] - 1}" for s in steps],
            [text(lang, "flash.skipped") if s.skipped else _numbers(s.scores or [], p, scores)
             for s in steps],
            [_number(s.block_max, p) for s in steps], [_number(s.m, p) for s in steps],
            [_number(s.scale, p) for s in steps], [_number(s.l, p) for s in steps],
            [_numbers(s.acc, p, acc) for s in steps]]


def _layouts(result: FlashResult, lang: str, names: list[str],
             precision: int) -> Iterator[tuple[_Layout, list[int]]]:
    """Every layout from the fullest to the most cut, with its columns' widths."""
    block = max(s.keys[1] - s.keys[0] for s in result.steps)
    widths: dict[tuple[int, int, int], list[int]] = {}  # (p, scores, acc) → every column's
    for n_dropped in range(len(OPTIONAL) + 1):
        dropped = OPTIONAL[:n_dropped]
        for p in range(precision, min(precision, MIN_PRECISION) - 1, -1):
            for scores in range(min(block, SHOWN_SCORES), 0, -1):
                for acc in range(SHOWN_ACC, 0, -1):
                    if (p, scores, acc) not in widths:
                        cells = _cells(result, lang, p, scores, acc)
                        widths[p, scores, acc] = [column_width(name, column)
                                                  for name, column in zip(names, cells,
                                                                          strict=True)]
                    yield (_Layout(scores, acc, p, dropped),
                           [w for k, w in enumerate(widths[p, scores, acc]) if k not in dropped])


def _steps_table(console: Console, result: FlashResult, lang: str,
                 precision: int) -> list[RenderableType]:
    names = text(lang, "flash.columns").split("|")
    layout = first_fit(console.width, _layouts(result, lang, names, precision))
    cells = _cells(result, lang, layout.precision, layout.scores, layout.acc)
    columns = [FitColumn(names[k], cells[k], "left" if k in (SCORES, ACC) else "right")
               for k in range(len(names)) if k not in layout.dropped]
    styles = ["dim" if s.skipped else "" for s in result.steps]
    parts: list[RenderableType] = [fitted_table(console, columns, styles)]
    notes = [text(lang, "flash.skipped_note")] if any(s.skipped for s in result.steps) else []
    cut = cut_note(lang, console.width, [names[k] for k in layout.dropped], layout.precision,
                   precision)
    parts += [prose(console, note, style="italic") for note in [*notes, cut] if note]
    return parts


def _final(console: Console, result: FlashResult, precision: int) -> RenderableType:
    labels = [t.text for t in result.tokens]
    row = Axis([labels[result.query]], [result.query])
    causal = result.config["variant"] in ("causal", "multihead")
    weights = [None if causal and j > result.query else w for j, w in enumerate(result.weights)]
    cols = fitted_labels(console, row, Axis(labels, list(range(len(labels)))), [weights],
                         precision)
    return Group(
        render_matrix(console, "weights", row, cols, [weights], precision, 0.0, 1.0,
                      show_legend=False),
        Text("context  " + _numbers(list(result.context), precision)))


def render_flash(console: Console, result: FlashResult, lang: str = "en",
                 precision: int = 3) -> RenderableType:
    """The blocks' scores and running state, the final weights and context, check and memory."""
    label = result.tokens[result.query].text
    title = text(lang, "flash.title", i=result.query, label=label, block=result.block)
    if result.config.get("heads", 1) > 1:
        title += f" · head {result.head}"
    ok = result.ok
    check = text(lang, "flash.check" if ok else "flash.check_bad",
                 weights=diff_text(result.weights_max_abs_diff),
                 context=diff_text(result.context_max_abs_diff),
                 tiled=diff_text(result.tiled_max_abs_diff))
    num_tokens = len(result.tokens)
    memory = text(lang, "flash.memory", heads=result.config.get("heads", 1), n=num_tokens,
                  naive=f"{result.naive_cells:,}", tiled=f"{result.tiled_cells:,}")
    return Group(Text(title, style="bold"), prose(console, text(lang, "flash.explain")),
                 *_steps_table(console, result, lang, precision),
                 Text(text(lang, "flash.final")),
                 _final(console, result, precision), prose(console, check),
                 prose(console, memory))
