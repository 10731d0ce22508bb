"""`attncli kvcache --keep`: each cache's perplexity and top-1 agreement per range of positions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.render.draw.prose import prose
from attncli.render.lessons.fit import FitColumn, first_fit, fitted_table
from attncli.render.lessons.streaming_text import text

if TYPE_CHECKING:
    from attncli.records.streaming import RangeScores, Score, StreamingResult


def _perplexity(score: Score) -> str:
    return "—" if score.perplexity is None else f"{score.perplexity:,.2f}"


def _share(score: Score) -> str:
    return f"{100 * (score.agreement or 0.0):.1f}%"


def _span(lang: str, scores: RangeScores, key: str | None = None) -> str:
    a, b = str(scores.start), str(scores.stop - 1)
    if key:
        return text(lang, key, a=a, b=b)
    return a if a == b else f"{a}–{b}"


def _columns(result: StreamingResult, lang: str, labels: list[str]) -> list[FitColumn]:
    names = text(lang, "stream.columns", window=labels[1], sinks=labels[-1]).split("|")
    rows = [*result.ranges, result.after_window]
    spans = [_span(lang, r, None if r.window_full else "stream.filling") for r in rows[:-1]]
    cells = [[*spans, _span(lang, rows[-1], "stream.after")]]
    for policy in result.policies:
        scores = [r.scores[policy.name] for r in rows]
        cells.append([_perplexity(s) for s in scores])
        if policy.window is not None:
            cells.append([_share(s) for s in scores])
    return [FitColumn(name, column, "left" if k == 0 else "right")
            for k, (name, column) in enumerate(zip(names, cells, strict=False))]


def _table(console: Console, result: StreamingResult, lang: str) -> RenderableType:
    labels = [p.label for p in result.policies]
    # Where "sinks:4,window:64" leaves no room, its headers wrap after the comma instead.
    layouts = [_columns(result, lang, labels),
               _columns(result, lang, [label.replace(",", ", ") for label in labels])]
    columns = first_fit(console.width, ((c, [col.width for col in c]) for c in layouts))
    return fitted_table(console, columns, ["" for _ in result.ranges] + ["bold"])


def _measured(result: StreamingResult, lang: str) -> str:
    after, policies = result.after_window, result.policies
    window = after.scores[policies[1].name]
    sinks = ""
    if len(policies) > 2:
        score = after.scores[policies[2].name]
        sinks = text(lang, "stream.measured_sinks", sinks=_perplexity(score),
                     sinks_label=policies[2].label, sinks_top=_share(score))
    return text(lang, "stream.measured", a=after.start, b=after.stop - 1,
                full=_perplexity(after.scores["full"]), window=_perplexity(window),
                window_label=policies[1].label, window_top=_share(window), sinks=sinks)


def render_streaming(console: Console, result: StreamingResult,
                     lang: str = "en") -> RenderableType:
    """The caches' perplexity and agreement per range, what the mask means, and the finding."""
    config, policies = result.config, result.policies
    window = policies[1].window
    sinks = ""
    if len(policies) > 2:
        sinks = text(lang, "stream.explain_sinks", label=policies[2].label,
                     last=(policies[2].sinks or 0) - 1)
    return Group(
        Text(text(lang, "stream.title", model=Path(config["model"]).name, n=f"{config['tokens']:,}",
                  layers=config["layers"]), style="bold"),
        prose(console, text(lang, "stream.explain", w=window, back=(window or 1) - 1, sinks=sinks)),
        prose(console, text(lang, "stream.positions"), style="italic"),
        _table(console, result, lang),
        prose(console, _measured(result, lang)))
