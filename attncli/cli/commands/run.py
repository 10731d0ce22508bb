"""`attncli run`."""

from __future__ import annotations

from typing import Annotated

from attncli.cli.groups import Fields, command
from attncli.cli.options import Chapter3, Checkpoint, Compute, Encoding, Look, Output, Source
from attncli.cli.requests import request_of
from attncli.errors import AttnCliError


@command()
def run(source: Source, checkpoint: Checkpoint, encoding: Encoding, settings: Chapter3,
        compute: Compute, look: Annotated[Look, Fields("head", "precision", "show", "query",
                                                       "draw", "rows", "cols", "scale")],
        output: Output) -> None:
    """Run one attention variant and show its weights and context vectors.

    Long inputs take the tiled path (--impl auto): per head a summary, a heatmap pooled into
    blocks, each query's top keys, and with --rows/--cols the exact weights of a window.

    With --model, a second look at the same text and checkpoint (another --layer, `heads`,
    `browse`) starts from the hidden states the first one kept in ~/.cache/attncli/hidden
    ($XDG_CACHE_HOME/attncli/hidden; the folder: ATTNCLI_HIDDEN_CACHE, its size:
    ATTNCLI_HIDDEN_CACHE_MAX=2G, least recently used out first; ATTNCLI_NO_CACHE=1: off).

    Examples:

      attncli run "Your journey starts with one step" --variant causal

      attncli run "..." --variant multihead --num-heads 2 --json | jq '.weights[1]'

      echo "猫吃鱼" | attncli run - --variant qkv

      attncli run --inputs samples/journey.json --variant simple --query journey

      attncli run "..." --show scores,weights,context --save run.svg

      attncli run --file long.txt --draw heatmap --rows 0:40 --cols 0:40

      attncli run --file book.txt --variant multihead --num-heads 4 --head 3 --rows 500:520
    """
    from attncli.cli.streams import after_imports
    from attncli.core.request import Extract

    windows, stages = look.windows(), look.stages()
    output.check()
    if compute.full and not (output.as_json or output.save_json):
        raise AttnCliError("--full puts the whole weights matrix in the JSON: use it with --json "
                           "or --save-json")
    request = request_of(source.read(settle=False), checkpoint, encoding, settings, compute)
    extract = Extract(stages=stages or (), rows=windows[0], cols=windows[1], query=look.query,
                      head=look.head, maps=output.save is not None or not output.as_json,
                      page=output.page())
    # The input is checked: now the computation (torch) is imported.
    from attncli.cli.progress import progress_bar
    from attncli.models.run import run_request
    from attncli.render.page import page_extra
    from attncli.render.run import render_run

    after_imports()
    with progress_bar() as report:
        result = run_request(request, extract, report)
    display = look.display(result, windows, stages)
    output.deliver(result.to_dict(), lambda out: render_run(out, result, display),
                   page_extra(result))
