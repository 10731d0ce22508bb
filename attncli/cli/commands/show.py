"""`attncli show`."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from attncli.cli.app import app
from attncli.cli.invocation import display_spec, view_options
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


def _window(saved: Any, which: str) -> str | None:
    span = (saved.window or {}).get(which)
    return None if span is None else f"{span[0]}:{span[1]}"


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
    from attncli.core.saved import load_saved

    check_outputs(save, save_json)
    saved = load_saved(file)
    first = saved.results[0]
    spec = display_spec(precision, view, rows or _window(saved, "rows"),
                        cols or _window(saved, "cols"), head,
                        query if query is not None else
                        (None if saved.query is None else str(saved.query)),
                        show if show is not None else
                        (None if saved.stages is None else ",".join(saved.stages)),
                        lang.value if lang else "en")
    doc, build = _output(saved, spec, first, scale.value)
    deliver(doc, build, as_json, save, save_json)


def _output(saved: Any, spec: Any, first: Any, scale: str) -> tuple[dict[str, Any], Page]:
    """The JSON and the renderer for what the file holds."""
    if saved.kind == "heads":
        from attncli.render.heads import render_measures
        from attncli.render.palette import depth_of

        return saved.doc, lambda out: render_measures(first, 3, depth_of(out))
    options = replace(view_options(spec, first), scale=scale)
    if saved.kind == "long":
        from attncli.render.long import render_long

        return first.to_dict(), lambda out: render_long(out, first, options)
    if saved.kind == "compare":
        from attncli.render.compare import render_compare

        window = spec.window(len(first.tokens))
        doc = {"variants": [r.to_dict(window=window) for r in saved.results]}
        return doc, lambda out: render_compare(out, saved.results, options)
    window = spec.window(len(first.tokens))
    stages = [s for s in (options.stages or ()) if s in first.stages]
    if saved.kind == "weights":
        from attncli.render.saved import render_saved

        doc = {"tokens": [t.to_dict() for t in first.tokens], "weights": first.weights}
        return doc, lambda out: render_saved(out, first, replace(options, stages=None))
    from attncli.render.run import render_run

    doc = first.to_dict(stages=stages or None, query=options.query, window=window)
    return doc, lambda out: render_run(out, first, options)
