"""`attncli show`."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from attncli.cli.generating import Attended, Redrawn
from attncli.cli.groups import Fields, command
from attncli.cli.options import Look, Output


@command()
def show(
    file: Annotated[str, typer.Argument(
        help="attncli JSON from any command, a [N][N] or [H][N][N] list of weights, or "
        '{"tokens": [...], "weights": ...}; \'-\' reads standard input.', metavar="FILE")],
    look: Look,
    output: Output,
    attended: Annotated[Attended, Fields("at", "layers", "combine", "exclude_sinks")],
    redrawn: Redrawn,  # --view: a generation's view; table|heatmap|auto: --draw's old spelling
) -> None:
    """Show saved weights in every view: attncli's --json output, or weights from another tool.

    The query, windows and stages the saved run showed are used unless you give others. A
    saved generation is drawn in the view it was made with unless --view names another it
    holds (raw always; value and occlusion when it was made with them).

    Examples:

      attncli run "Your journey starts with one step" --json > run.json; attncli show run.json

      attncli show weights.json --draw heatmap --save page.html

      python -c 'print([[0.5, 0.5], [0.1, 0.9]])' | attncli show - --query 1

      attncli generate "Hi" --model M --json > answer.json; attncli show answer.json --at 0
    """
    from attncli.render.saved import render_file
    from attncli.saved.kinds import load_saved
    from attncli.saved.shown import (
        check_inside,
        pick,
        refuse_unused,
        saved_doc,
        shown_view,
        with_stages,
    )

    draw, kind = redrawn.split(look.draw)
    look = replace(look, draw=draw)
    windows, stages = look.windows(), look.stages()
    output.check()
    saved = load_saved(file)
    given = [f"--{name}" for name in ("head", "query", "show", "rows", "cols")
             if getattr(look, name) is not None]
    refuse_unused(saved.kind, given, attended != Attended() or kind is not None)
    if saved.kind in ("ablate", "patch"):  # through the commands' own renderers
        from attncli.render.reports.causal import RENDERERS

        output.deliver_result(saved.results[0], RENDERERS[saved.kind])
        return
    if saved.kind == "generate":
        from attncli.render.reports.generate import render_generation

        generation = saved.results[0]
        output.deliver_result(generation, render_generation,  # as made, unless --view says
                              attended.view(generation, look.head, kind or generation.view))
        return
    results, display, scan = saved.results, None, None
    if saved.kind == "scan":
        from attncli.saved.heads import scan_part

        scan = scan_part(saved.doc, results[0].model.layers, results[0].model.heads)
    elif saved.kind != "heads":
        results = [pick(result, look.head, look.query) for result in results]
        windows, stages = shown_view(results[0], windows, stages)
        display = look.display(results[0], windows, stages or None,
                               look.lang.value if look.lang else "en")
        check_inside(results[0], display.rows, display.cols)
    doc = saved_doc(saved.kind, results, saved.doc)
    if stages:
        results = [with_stages(r, stages) for r in results]
    output.deliver(doc, lambda out: render_file(out, saved.kind, results, display, scan),
                   {"scan": True} if saved.kind == "scan" else None)
