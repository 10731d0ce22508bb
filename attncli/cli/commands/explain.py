"""`attncli explain`."""

from __future__ import annotations

from typing import Annotated

from attncli.cli.groups import Fields, command
from attncli.cli.options import Chapter3, Checkpoint, Compute, Encoding, Look, Output, Source
from attncli.cli.requests import request_of


@command()
def explain(source: Source, checkpoint: Checkpoint, encoding: Encoding, settings: Chapter3,
            compute: Annotated[Compute, Fields("device", "impl")],
            look: Look, output: Output) -> None:
    """Walk through one variant's computation, stage by stage, each explained in a line.

    With --json, every stage is in "stages", masked cells null, to diff with your own code.

    Examples:

      attncli explain "Your journey starts with one step" --variant causal

      attncli explain --inputs samples/journey.json --variant simple --lang zh

      attncli explain "..." --dropout 0.1 --json | jq .stages.dropped

      attncli explain "..." --show scores,softmax --query journey --save x.html

      attncli explain "..." --model gpt2 --layer 6 --predict 3   (the logit lens of layer 6)
    """
    from attncli.cli.streams import after_imports
    from attncli.core.request import Extract

    windows, stages = look.windows(), look.stages()
    output.check()
    request = request_of(source.read(settle=False), checkpoint, encoding, settings, compute)
    extract = Extract(stages=stages, rows=windows[0], cols=windows[1], query=look.query,
                      head=look.head, lens=checkpoint.predict is not None)
    # The input is checked: now the computation (torch) is imported.
    from attncli.models.run import run_request
    from attncli.render.explain import render_explain

    after_imports()
    result = run_request(request, extract, naive_only=True)
    display = look.display(result, windows, stages, look.language())
    output.deliver(result.to_dict(), lambda out: render_explain(out, result, display))
