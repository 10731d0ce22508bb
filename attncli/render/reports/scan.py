"""`attncli scan`'s summary: the documents, each score's grid of corpus means, the share of
documents on which each head passes the threshold, the top heads and the layers' sinks."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.errors import escaped
from attncli.records.heads import HeadsResult, Measure, Scan, Top
from attncli.render.heads import render_scores, render_sinks

SCORES = ("previous_token", "duplicate_token", "induction")


def render_documents(scan: Scan) -> Text:
    """What happened to the corpus's documents."""
    docs = scan["documents"]
    text = Text.assemble((f"{docs['scored']:,} document{'s' * (docs['scored'] != 1)} scored",
                          "bold"),
                         f" ({docs['cut']:,} cut at --max-tokens {scan.get('max_tokens', '?')})"
                         if docs["cut"] else "",
                         f" · {docs['tokens']:,} tokens · {docs['skipped']:,} skipped")
    reasons = docs.get("skipped_because", {})
    if reasons:
        text.append("\nskipped: " + "; ".join(f"{n:,} {escaped(why)}"
                                              for why, n in reasons.items()), style="dim")
    return text


def _shares(result: HeadsResult) -> HeadsResult:
    """result with each head's score replaced by its share of documents passing."""
    rows: list[Measure] = [{**m, "previous_token": m["share"]["previous_token"],
                            "duplicate_token": m["share"]["duplicate_token"],
                            "induction": m["share"]["induction"]} for m in result.measures]
    return replace(result, measures=rows)


def render_top(scan: Scan, precision: int = 2) -> RenderableType:
    """The top heads of each score: the share of documents passing, and the corpus mean."""
    table = Table(title=f"Top heads: share of documents scoring {scan['threshold']:g} or more "
                  "(and the corpus mean)", title_justify="left", title_style="bold")
    for name in SCORES:
        table.add_column(name)
    tops = scan["top"]
    top: list[list[Top]] = [tops["previous_token"], tops["duplicate_token"], tops["induction"]]
    for k in range(max(len(t) for t in top)):
        table.add_row(*(f"L{t[k]['layer']} h{t[k]['head']}  {t[k]['share']:.{precision}f} "
                        f"({t[k]['mean']:.{precision}f})" if k < len(t) else "" for t in top))
    return table


def render_scan(console: Console, result: HeadsResult, scan: Scan) -> RenderableType:
    """The summary view (see the module)."""
    m = result.model
    title = Text.assemble((f"{m.layers} layers × {m.heads} heads over a corpus", "bold"),
                          f" · {escaped(str(scan.get('corpus', '')))}")  # a name from disk
    parts: list[RenderableType] = [title, render_documents(scan), Text()]
    if scan["documents"]["scored"] == 0:
        return Group(*parts, Text("(no document scored: nothing to summarise)", style="italic"))
    parts += [render_scores(console, result, "Corpus mean of each head's score × 100 (+: "
                            "labelled, more than half the documents pass the threshold)"), Text(),
              render_scores(console, _shares(result), "Share of documents × 100 on which the "
                            f"head scores {scan['threshold']:g} or more (the spread)"), Text(),
              render_top(scan), Text()]
    if result.layers:
        parts.append(render_sinks(console, result))
    return Group(*parts)
