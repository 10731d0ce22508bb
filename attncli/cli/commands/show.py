"""`attncli show`."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from attncli.cli.generating import Attended
from attncli.cli.groups import command
from attncli.cli.options import Look, Output
from attncli.cli.output import Page
from attncli.core.checks.run import CORNER
from attncli.core.display import Display, Window
from attncli.core.result import Result
from attncli.core.saved import with_stages
from attncli.errors import AttnCliError


@command()
def show(
    file: Annotated[str, typer.Argument(
        help="attncli JSON from any command, a [N][N] or [H][N][N] list of weights, or "
        '{"tokens": [...], "weights": ...}; \'-\' reads standard input.', metavar="FILE")],
    look: Look,
    output: Output,
    attended: Attended,
) -> None:
    """Show saved weights in every view: attncli's --json output, or weights from another tool.

    The query, windows and stages the saved run showed are used unless you give others.

    Examples:

      attncli run "Your journey starts with one step" --json > run.json; attncli show run.json

      attncli show weights.json --view heatmap --save page.html

      python -c 'print([[0.5, 0.5], [0.1, 0.9]])' | attncli show - --query 1

      attncli generate "Hi" --model M --json > answer.json; attncli show answer.json --at 0
    """
    from attncli.core.saved import load_saved, pick

    windows, stages = look.windows(), look.stages()
    output.check()
    saved = load_saved(file)
    if saved.kind == "generate":
        _generation(saved.doc, look, attended, output)
        return
    if attended != Attended():
        raise AttnCliError("--at, --layers, --combine and --keep-sinks apply to `generate` "
                           "JSON only")
    if saved.kind == "scan":
        _heads_only(look.head, look.query, look.show, look.rows, look.cols)
        output.deliver(saved.doc, _scan_page(saved.results[0], saved.doc), {"scan": True})
        return
    if saved.kind == "heads":
        _heads_only(look.head, look.query, look.show, look.rows, look.cols)
        doc, build = _output("heads", saved.results[0].to_dict(), saved.results, None)
        output.deliver(doc, build)
        return
    results = [pick(result, look.head, look.query) for result in saved.results]
    first = results[0]
    if first.window is not None and (first.long is None or not _corner(first)):
        windows = (windows[0] or _span(first.window["rows"], "--rows"),
                   windows[1] or _span(first.window["cols"], "--cols"))
    display = look.display(first, windows, stages or None,
                           look.lang.value if look.lang else "en")
    if first.long is not None:
        _inside(first, display)
    doc, _ = _output(saved.kind, {}, results, display)
    if stages is None and first.stages and first.long is None:
        stages = tuple(name for name in first.stages if first.stages[name] is not None)
    if stages:
        results = [with_stages(r, stages) for r in results]
        display = replace(display, stages=stages)
    _, build = _output(saved.kind, {}, results, display)
    output.deliver(doc, build)


def _scan_page(result: Any, doc: Any) -> Page:
    """`scan`'s summary view of a saved summary, its own part checked."""
    from attncli.core.checks.heads import scan_part
    from attncli.render.reports.scan import render_scan

    scan = scan_part(doc, result.model.layers, result.model.heads)
    return lambda out: render_scan(out, result, scan)


def _generation(doc: dict[str, Any], look: Look, attended: Attended, output: Output) -> None:
    """A generation's view, as `generate` showed it, with this call's view options."""
    from attncli.models.generate.saved import generation_from_dict
    from attncli.render.reports.generate import render_generation

    given = [name for name, value in (("--query", look.query), ("--show", look.show),
                                      ("--rows", look.rows), ("--cols", look.cols))
             if value is not None]
    if given:
        raise AttnCliError(f"{given[0]} does not apply to `generate` JSON: choose the answer "
                           "token with --at, and --layers, --head, --combine")
    result = generation_from_dict(doc)
    view = attended.view(result, look.head)
    output.deliver(result.to_dict(), lambda out: render_generation(out, result, view))


def _heads_only(head: int | None, query: str | None, show: str | None, rows: str | None,
                cols: str | None) -> None:
    """Refuse the options `heads` JSON has nothing for: it holds measures, no weights."""
    given = [name for name, value in (("--head", head), ("--query", query), ("--show", show),
                                      ("--rows", rows), ("--cols", cols)) if value is not None]
    if given:
        raise AttnCliError(f"{given[0]} does not apply to `heads` JSON: it holds each head's "
                           "measures, not its weights")


def _corner(result: Result) -> bool:
    """True for the corner a tiled run keeps without --rows/--cols (not a window it showed)."""
    side = min(len(result.tokens), CORNER)
    return result.window == {"rows": [0, side], "cols": [0, side]}


def _inside(result: Result, display: Display) -> None:
    """--rows/--cols on a tiled run's file: within the window of weights it holds."""
    assert result.window is not None, "a tiled run holds its window"
    for option, span, held in (("--rows", display.rows, result.window["rows"]),
                               ("--cols", display.cols, result.window["cols"])):
        if span is not None and not held[0] <= span[0] < span[1] <= held[1]:
            raise AttnCliError(f"{option} {span[0]}:{span[1]} is outside the window this file "
                               f"holds ({option} {held[0]}:{held[1]}); run it again with "
                               f"{option} {span[0]}:{span[1]}")


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
