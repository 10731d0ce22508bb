"""`attncli ablate` and `attncli patch`: does a head cause what it looks like it does."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.options import Checkpoint, Compute, Encoding, Output, Source
from attncli.cli.requests import request_of
from attncli.cli.settings import needed_model
from attncli.records.causal import AblateOptions, PatchOptions

PrecisionOpt = Annotated[int, typer.Option(min=0, max=8, help="Decimals shown.")]


@command(needs_model=True)
def ablate(
    *,
    source: Annotated[Source, Fields("text", "file")],
    checkpoint: Annotated[Checkpoint, Fields("model")],
    encoding: Encoding,
    compute: Annotated[Compute, Fields("device")],
    ablating: AblateOptions,
    output: Output,
    precision: PrecisionOpt = 3,
) -> None:
    """Knock heads out and see what changes: each token's loss, the next-token distribution at
    a position (top tokens, KL), an answer's log-probability. `--heads all` ablates each head
    alone and ranks them by effect beside their pattern scores (previous-token, induction).

    The layers below an ablated head are the clean run's (kept in the hidden-state cache), so
    only the blocks from its layer up run again.

    Examples:

      attncli ablate "The cat sat. The cat" --model samples/toy-gpt2 --heads 1.0

      attncli ablate "The capital of France is" --answer " Paris" --heads all

      attncli ablate --repeat 25 --model smollm2 --how resample --json
    """
    from attncli.cli.streams import after_imports

    checkpoint = replace(checkpoint, model=needed_model(checkpoint.model, "ablate"))
    output.check()
    text = "" if ablating.repeat is not None and source.text is None and source.file is None \
        else source.read(settle=False)[0]
    request = request_of((text, None), checkpoint, encoding, compute)
    from attncli.models.causal.ablate import run_ablate
    from attncli.render.reports.causal import render_ablation

    after_imports()
    output.deliver_result(run_ablate(request, ablating), render_ablation, precision)


CleanArg = Annotated[str, typer.Argument(
    help="The clean text: the run whose answer is right ('-' reads stdin).", show_default=False)]
CorruptArg = Annotated[str, typer.Argument(
    help="The corrupted text, as many tokens as CLEAN, differing where the answer should "
    "change.", show_default=False)]


@command(needs_model=True)
def patch(
    *,
    clean: CleanArg,
    corrupt: CorruptArg,
    checkpoint: Annotated[Checkpoint, Fields("model")],
    encoding: Encoding,
    compute: Annotated[Compute, Fields("device")],
    patching: PatchOptions,
    output: Output,
    precision: PrecisionOpt = 3,
) -> None:
    """Activation patching: every layer × head's output taken from one run into the other,
    and how much of the answer it restores (--denoise: clean heads into the corrupted run) or
    breaks (--noise). 1.0 in the grid: the patch alone restores the clean metric.

    --attribution adds the gradient estimate of the whole grid from one backward pass, and
    its rank agreement with the exact grid; with --no-exact it is the estimate alone.

    Examples:

      attncli patch "Paris is in" "Rome is in" --tokens " France" " Italy"

      attncli patch "A B C A B" "A B C D B" --answer " C" --json

      attncli patch "..." "..." --model llama3.1:8b --answer " a" --attribution
    """
    from attncli.cli.streams import after_imports
    from attncli.core.inputs import read_text

    checkpoint = replace(checkpoint, model=needed_model(checkpoint.model, "patch"))
    output.check()
    request = request_of((read_text(clean, None), None), checkpoint, encoding, compute)
    from attncli.models.causal.patch import run_patch
    from attncli.render.reports.causal import render_patching

    after_imports()
    output.deliver_result(run_patch(request, corrupt, patching), render_patching,
                          precision)
