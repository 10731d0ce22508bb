"""`attncli heads`."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from attncli.cli.groups import Without, command
from attncli.cli.options import Checkpoint, Compute, Encoding, Look, Output, Source
from attncli.cli.requests import request_of
from attncli.core.display import parse_window
from attncli.errors import AttnCliError


class ProbeKind(str, Enum):
    """What `heads --probe` looks for on its repeated random tokens."""

    induction = "induction"
    previous = "previous"
    duplicate = "duplicate"


@command()
def heads(
    source: Annotated[Source, Without("inputs")],
    checkpoint: Annotated[Checkpoint, Without("layer", "predict")],
    encoding: Annotated[Encoding, Without("encoding")],
    compute: Annotated[Compute, Without("device", "impl", "top_k", "pool", "full")],
    look: Annotated[Look, Without("head", "precision", "show", "query", "view", "rows", "cols",
                                  "lang")],
    output: Output,
    heads: Annotated[int | None, typer.Option(
        "--heads", help="Heads per layer, for a bare .safetensors file of a non-standard width.",
        show_default=False)] = None,
    sort: Annotated[str, typer.Option(
        help="Order of the table: layer, head, entropy, prev, first, self, distance, "
        "previous_token, duplicate_token or induction (measures and scores sort largest "
        "first).")] = "layer",
    layers: Annotated[str | None, typer.Option(
        help="Only these layers: a:b, half-open and 0-based like --rows (10:20, 25:, -4:); the "
        "forward pass stops at the last.", show_default=False, metavar="A:B")] = None,
    probe: Annotated[ProbeKind | None, typer.Option(
        help="Run on a built-in probe instead of a text: --probe-length seeded random tokens "
        "(no special ones), repeated twice, after the model's BOS when its tokenizer has one; "
        "heads scoring --threshold or more on the probed score are labelled.",
        show_default=False)] = None,
    probe_length: Annotated[int, typer.Option(
        min=1, max=4096, help="Random tokens before the probe repeats them.")] = 50,
    probe_seed: Annotated[int, typer.Option(help="Seed of the probe's tokens.")] = 0,
    threshold: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Label a head whose score is at least this: the probed score "
        "with --probe, else every score.")] = 0.4,
    precision: Annotated[int, typer.Option(min=0, max=8, help="Decimals shown.")] = 3,
) -> None:
    """Every layer × head of a GPT-2 or Llama-family checkpoint at a glance: measures, head
    scores (previous_token, duplicate_token, induction, as TransformerLens's detect_head),
    attention sinks and thumbnails.

    A second look at the same text and checkpoint (`run --layer`, `browse`) starts from the
    hidden states this one kept in ~/.cache/attncli/hidden (ATTNCLI_HIDDEN_CACHE: the folder,
    ATTNCLI_HIDDEN_CACHE_MAX=2G: its size; ATTNCLI_NO_CACHE=1: off).

    Examples:

      attncli heads "The cat sat on the mat because it was tired" --model samples/toy-gpt2

      attncli heads "..." --model gpt2 --sort prev --layers 4:8

      attncli heads --probe induction --model ~/models/SmolLM2 --sort induction

      attncli heads "..." --model ~/models/gpt2 --json | jq '.heads[0]'
    """
    from attncli.cli.streams import after_imports

    output.check()
    if probe is not None and (source.text is not None or source.file is not None):
        raise AttnCliError(f"--probe {probe.value} runs on its own random tokens: give no TEXT "
                           "or --file with it")
    window = None if layers is None else parse_window(layers, "--layers")
    # The probe makes its own tokens: its request carries an empty text.
    text = "" if probe is not None else source.read(settle=False)[0]
    request = request_of((text, None), checkpoint, encoding, compute, heads=heads)
    # The input is checked: now the computation (torch) is imported.
    from attncli.models.heads import HeadsOptions
    from attncli.models.run import run_heads
    from attncli.render.heads import render_heads
    from attncli.render.page import page_extra

    after_imports()
    options = HeadsOptions(sort=sort, layers=window, probe=None if probe is None else probe.value,
                           probe_length=probe_length, probe_seed=probe_seed, threshold=threshold)
    result = run_heads(request, options)
    output.deliver(result.to_dict(),
                   lambda out: render_heads(out, result, precision, look.scale.value),
                   page_extra(result))
