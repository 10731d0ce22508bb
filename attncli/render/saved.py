"""`attncli show`: a saved file drawn as the command that wrote it draws it, and bare weights:
a header, the weights of each head, and --query's view."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import Result
from attncli.records.heads import Scan
from attncli.render.compare import render_compare
from attncli.render.heads import render_measures
from attncli.render.query import render_query
from attncli.render.reports.scan import render_scan
from attncli.render.run import render_run, render_weights


def render_file(console: Console, kind: str, results: list[Any], display: Display | None,
                scan: Scan | None = None) -> RenderableType:
    """The view of a saved file of kind (run, long, compare, weights, heads or scan); scan: a
    scan summary's own part, checked."""
    first = results[0]
    if kind == "heads":
        return render_measures(console, first, 3)
    if kind == "scan":
        assert scan is not None, "a scan's summary is drawn with its own part"
        return render_scan(console, first, scan)
    assert display is not None, "a file of weights is drawn with a display"
    if kind == "compare":
        return render_compare(console, results, display)
    if kind == "weights":
        return render_saved(console, first, replace(display, stages=None))
    return render_run(console, first, display)


def render_saved(console: Console, result: Result, options: Display) -> RenderableType:
    """Saved weights without attncli's settings: only what the file says."""
    heads = result.num_heads
    header = Text.assemble(("saved weights", "bold"),
                           f" · {len(result.tokens)} tokens · {heads} head{'s' * (heads != 1)}")
    parts: list[RenderableType] = [header, Text()]
    for table in render_weights(console, result, options):
        parts += [table, Text()]
    if result.query is not None:
        parts += [render_query(console, result, options), Text()]
    return Group(*parts[:-1])
