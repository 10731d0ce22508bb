"""`attncli cost`: the measured table, a bar chart of peak bytes, the fitted exponents."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.render.draw.colors import block_style, has_colour
from attncli.render.draw.prose import prose
from attncli.render.lessons.lesson_text import diff_text, size_text, text

if TYPE_CHECKING:
    from attncli.records.lessons import CostResult, CostRow

BAR = "█"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value * 1000:,.1f} ms"


def _naive_bytes(row: CostRow, lang: str) -> str:
    if row.naive_bytes is not None:
        return size_text(row.naive_bytes)
    need = "?" if row.naive_would_need is None else size_text(row.naive_would_need)
    return text(lang, "cost.would_need", size=need)


def _table(result: CostResult, lang: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    for name in text(lang, "cost.columns").split("|"):
        table.add_column(name, justify="right", no_wrap=True)
    for row in result.rows:
        table.add_row(f"{row.tokens:,}", _seconds(row.naive_seconds), _naive_bytes(row, lang),
                      _seconds(row.tiled_seconds), size_text(row.tiled_bytes))
    return table


def _bars(console: Console, result: CostResult, lang: str) -> RenderableType:
    """One line per path and size, on a linear scale shared by both paths."""
    top = max([r.naive_bytes or 0 for r in result.rows] + [r.tiled_bytes for r in result.rows])
    width = max(console.width - 32, 10)
    colour = has_colour(console)
    lines = [Text(text(lang, "cost.bars"), style="bold")]
    for row in result.rows:
        for path, value in (("naive", row.naive_bytes), ("tiled", row.tiled_bytes)):
            line = Text(f"{row.tokens:>7,} {path} ")
            if value is None:
                line.append(_naive_bytes(row, lang), style="dim")
            else:
                cells = max(1, round(width * value / top)) if value else 0
                style = block_style(1.0 if path == "naive" else 0.6, 0.0, 1.0) if colour else ""
                line.append(BAR * cells, style=style)
                line.append(f" {size_text(value)}")
            lines.append(line)
    return Group(*lines)


def _exponent(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _reasons(result: CostResult, lang: str) -> list[str]:
    """One line per exponent not given: which, and why the range does not show it."""
    lines = []
    for key, fit in result.fits.items():
        if fit.kind is None:
            continue
        path, what, _ = key.split("_")
        name = text(lang, f"cost.series.{path}_{what}")
        reason = text(lang, f"cost.reason.{fit.kind}", **fit.values)
        lines.append(text(lang, "cost.unfitted", name=name, reason=reason))
    return lines


def render_cost(console: Console, result: CostResult, lang: str = "en") -> RenderableType:
    """The table, the bars, the exponents, the projection and the check."""
    config, fit = result.config, result.fit
    parts: list[RenderableType] = [
        Text(text(lang, "cost.title", heads=config["heads"], head_dim=config["head_dim"]),
             style="bold"),
        prose(console, text(lang, "cost.explain", block=config["block"])),
        _table(result, lang), _bars(console, result, lang),
        prose(console, text(lang, "cost.fit", nb=_exponent(fit["naive_bytes_exponent"]),
                            tb=_exponent(fit["tiled_bytes_exponent"]),
                            ns=_exponent(fit["naive_seconds_exponent"]),
                            ts=_exponent(fit["tiled_seconds_exponent"])))]
    parts += [prose(console, line) for line in _reasons(result, lang)]
    for tokens, projected in result.projection.items():
        naive, tiled = projected["naive_bytes"], projected["tiled_bytes"]
        parts.append(prose(console, text(
            lang, "cost.projection", n=f"{int(tokens):,}",
            naive="?" if naive is None else size_text(naive),
            tiled="?" if tiled is None else size_text(tiled))))
    parts.append(prose(console, text(lang, "cost.check", diff=diff_text(result.max_abs_diff))))
    return Group(*parts)
