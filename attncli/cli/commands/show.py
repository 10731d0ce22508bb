"""`attncli show`."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from attncli.cli.app import app
from attncli.cli.options import (
    ColsOpt,
    HeadOpt,
    JsonOpt,
    LangOpt,
    PrecisionOpt,
    QueryOpt,
    RowsOpt,
    SaveJsonOpt,
    SaveOpt,
    Scale,
    ScaleOpt,
    ShowOpt,
    View,
    ViewOpt,
)
from attncli.cli.output import Page, check_outputs, deliver
from attncli.cli.requests import display_of
from attncli.core.display import Display, Window, parse_stages, parse_windows
from attncli.core.result import STAGES


@app.command()
def show(
    file: Annotated[str, typer.Argument(
        help="attncli JSON from any command, a [N][N] or [H][N][N] list of weights, or "
        '{"tokens": [...], "weights": ...}; \'-\' reads standard input.', metavar="FILE")],
    head: HeadOpt = None,
    precision: PrecisionOpt = 4,
    as_json: JsonOpt = False,
    show: ShowOpt = None,
    query: QueryOpt = None,
    view: ViewOpt = View.auto,
    rows: RowsOpt = None,
    cols: ColsOpt = None,
    save: SaveOpt = None,
    save_json: SaveJsonOpt = None,
    scale: ScaleOpt = Scale.shared,
    lang: LangOpt = None,
) -> None:
    """Show saved weights in every view: attncli's --json output, or weights from another tool.

    The query, windows and stages the saved run showed are used unless you give others.

    Examples:

      attncli run "Your journey starts with one step" --json > run.json; attncli show run.json

      attncli show weights.json --view heatmap --save page.html

      python -c 'print([[0.5, 0.5], [0.1, 0.9]])' | attncli show - --query 1
    """
    from attncli.core.saved import load_saved, pick

    windows = parse_windows(rows, cols)
    stages = parse_stages(show, STAGES)
    check_outputs(save, save_json)
    saved = load_saved(file)
    results = [pick(result, head, query) for result in saved.results]
    first = results[0]
    if saved.kind != "heads" and first.window is not None and first.long is None:
        windows = (windows[0] or _span(first.window["rows"], "--rows"),
                   windows[1] or _span(first.window["cols"], "--cols"))
    if stages is None and first.stages:
        stages = tuple(first.stages)
    display = display_of(first, precision, view, *windows, stages,
                         lang.value if lang else "en", scale) if saved.kind != "heads" else None
    doc, build = _output(saved.kind, saved.doc, results, display)
    deliver(doc, build, as_json, save, save_json)


def _span(span: list[int], option: str) -> Window:
    return Window(option, span[0], span[1])


def _output(kind: str, doc: dict[str, Any], results: list[Any],
            display: Display | None) -> tuple[dict[str, Any], Page]:
    """The JSON and the renderer for what the file holds."""
    first = results[0]
    if kind == "heads":
        from attncli.render.heads import render_measures

        return doc, lambda out: render_measures(out, first, 3)
    assert display is not None
    if kind == "compare":
        from attncli.render.compare import render_compare

        return ({"variants": [r.to_dict() for r in results]},
                lambda out: render_compare(out, results, display))
    if kind == "weights":
        from attncli.render.saved import render_saved

        return ({"tokens": [t.to_dict() for t in first.tokens], "weights": first.weights},
                lambda out: render_saved(out, first, replace(display, stages=None)))
    from attncli.render.run import render_run

    return first.to_dict(), lambda out: render_run(out, first, display)
