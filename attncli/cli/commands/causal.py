"""`attncli ablate` and `attncli patch`: does a head cause what it looks like it does."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from attncli.cli.causal_options import Ablating
from attncli.cli.groups import Without, command
from attncli.cli.options import Checkpoint, Compute, Encoding, Output, Source
from attncli.cli.requests import request_of
from attncli.cli.settings import needed_model

PrecisionOpt = Annotated[int, typer.Option(min=0, max=8, help="Decimals shown.")]


@command(needs_model=True)
def ablate(
    *,
    source: Annotated[Source, Without("inputs")],
    checkpoint: Annotated[Checkpoint, Without("layer", "predict")],
    encoding: Encoding,
    compute: Annotated[Compute, Without("impl", "top_k", "pool", "full", "measure")],
    ablating: Ablating,
    output: Output,
    precision: PrecisionOpt = 3,
) -> None:
    """Knock heads out and see what changes: each token's loss, the next-token distribution at
    a position (top tokens, KL), an answer's log-probability. `--heads all` ablates each head
    alone and ranks them by effect beside their pattern scores (previous-token, induction).

    The layers below an ablated head are the clean run's (kept in the hidden-state cache), so
    only the blocks from its layer up run again.

    Examples:

      attncli ablate "The cat sat on the mat. The cat sat on the" --model samples/toy-gpt2 \
        --heads 1.0,2.3

      attncli ablate "The capital of France is" --answer " Paris" --model smollm2 --heads all

      attncli ablate "..." --model ~/models/SmolLM2 --heads all --how resample --json
    """
    from attncli.cli.streams import after_imports

    checkpoint = replace(checkpoint, model=needed_model(checkpoint.model, "ablate"))
    output.check()
    request = request_of(source.read(settle=False), checkpoint, encoding, compute)
    from attncli.models.causal.ablate import run_ablate
    from attncli.render.reports.causal import render_ablation

    after_imports()
    output.deliver_result(run_ablate(request, ablating.options()), render_ablation, precision)
