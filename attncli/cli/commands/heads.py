"""`attncli heads`."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.options import Checkpoint, Compute, Encoding, Look, Output, Source
from attncli.cli.requests import request_of
from attncli.cli.scoring import Width, scored_text
from attncli.cli.settings import needed_model
from attncli.records.heads import HeadsOptions


@command(needs_model=True)
def heads(
    *,
    source: Annotated[Source, Fields("text", "file")],
    checkpoint: Annotated[Checkpoint, Fields("model")],
    encoding: Annotated[Encoding, Fields("allow_special")],
    compute: Annotated[Compute, Fields("measure")],
    look: Annotated[Look, Fields("scale")],
    output: Output,
    width: Width,
    scoring: HeadsOptions,
    precision: Annotated[int, typer.Option(min=0, max=8, help="Decimals shown.")] = 3,
) -> None:
    """Every layer × head of a GPT-2 or Llama-family checkpoint at a glance: measures, head
    scores (previous_token, duplicate_token, induction, as TransformerLens's detect_head),
    attention sinks and thumbnails.

    A second look at the same text and checkpoint (`run --layer`, `browse`) starts from the
    hidden states this one kept in ~/.cache/attncli/hidden (ATTNCLI_HIDDEN_CACHE: the folder,
    ATTNCLI_HIDDEN_CACHE_MAX=2G: its size; ATTNCLI_NO_CACHE=1: off); `heads` after any look
    reads the attention weights kept beside them, and runs no block.

    Examples:

      attncli heads "The cat sat on the mat because it was tired" --model samples/toy-gpt2

      attncli heads "..." --model gpt2 --sort prev --layers 4:8

      attncli heads --probe induction --model ~/models/SmolLM2 --sort induction

      attncli heads "..." --model ~/models/gpt2 --json | jq '.heads[0]'
    """
    from attncli.cli.streams import after_imports

    checkpoint = replace(checkpoint, model=needed_model(checkpoint.model, "heads"))
    output.check()
    text = scored_text(scoring, source)
    request = request_of((text, None), checkpoint, encoding, compute, heads=width.heads)
    # The input is checked: now the computation (torch) is imported.
    from attncli.models.run import run_heads
    from attncli.render.heads import render_heads
    from attncli.render.page import page_extra

    after_imports()
    result = run_heads(request, scoring)
    output.deliver(result.to_dict(),
                   lambda out: render_heads(out, result, precision, look.scale.value),
                   page_extra(result))
