"""`attncli browse`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from attncli.activity import hush
from attncli.browse.terminal import check_terminal, run_in_terminal
from attncli.cli.generating import Answering, Attended
from attncli.cli.groups import Fields, command
from attncli.cli.options import Chapter3, Checkpoint, Compute, Encoding, Source
from attncli.cli.output import Saver
from attncli.cli.requests import request_of
from attncli.cli.settings import needed_model
from attncli.cli.streams import leave
from attncli.records.asking import Sampling


@command(needs_model=True)
def browse(
    source: Source,
    checkpoint: Annotated[Checkpoint, Fields("model", "layer")],
    encoding: Encoding,
    settings: Chapter3,
    compute: Annotated[Compute, Fields("impl", "top_k")],
    sampling: Annotated[Sampling, Fields("max_new_tokens", "sample", "temperature", "top_p")],
    answering: Annotated[Answering, Fields("system", "raw", "messages", "answer_text",
                                           "answer_file", "explain_last", "logprobs")],
    save_dir: Annotated[Path, typer.Option(
        help="Where `e` saves what is on screen (SVG, text or the HTML page).",
        file_okay=False)] = Path("."),
    generate: Annotated[bool, typer.Option(
        "--generate", help="TEXT is a prompt: --model answers it (as `attncli generate`), and "
        "browse shows each answer token's attention from its own decode step.")] = False,
    generation: Annotated[str | None, typer.Option(
        help="Browse a saved `attncli generate --json` file instead.", show_default=False,
        metavar="FILE")] = None,
    patch: Annotated[str | None, typer.Option(
        help="Browse a saved `attncli patch --json` file instead: its layer × head grid, one "
        "cell a head (a --per-position file: Enter opens a layer's heads × positions).",
        show_default=False, metavar="FILE")] = None,
) -> None:
    """Explore every layer × head interactively, full-screen in the terminal: move through the
    heads, open one, pick a query token and see what it attends to.

    Without --model it shows the four chapter-3 variants (or --variant's) on one text, one row
    each. Long inputs take the tiled path: pooled blocks and exact windows on demand. Keys: ? in
    the app. It needs a terminal: piped, use `attncli run`. With --model, layers that `run` or
    `heads` already looked at start from the hidden states they kept (ATTNCLI_NO_CACHE=1: off;
    see `attncli run --help`).

    Examples:

      attncli browse "Your journey starts with one step"

      attncli browse --file samples/induction.txt --model samples/toy-gpt2

      attncli browse --file book.txt --variant multihead --num-heads 4
    """
    check_terminal()
    if generation is not None:
        from attncli.browse.generation import saved_generation

        shown = saved_generation(generation)
    elif patch is not None:
        from attncli.browse.causal import saved_patch

        shown = saved_patch(patch)
    elif generate:
        model = needed_model(checkpoint.model, "browse --generate", " (the decoder that answers)")
        from attncli.browse.generation import generation_source
        from attncli.cli.streams import after_imports
        from attncli.models.generate.run import generate_model

        # --messages, or TEXT; the view's defaults (browse draws every view it is given)
        asked = answering.request(model, source, sampling, Attended(), None,
                                  encoding.allow_special)
        after_imports()
        result = generate_model(asked)
        shown = generation_source(result)
    else:
        from attncli.browse.source import source_of

        # Every variant at once (no --variant, no --model) takes --num-heads as multihead's alone.
        every = settings.variant is None and checkpoint.model is None
        request = request_of(source.read(), checkpoint, encoding, settings, compute,
                             **({"heads": None} if every else {}))
        shown = source_of(request, settings.shared())
    hush()  # the app takes the terminal
    leave(*run_in_terminal(shown, Saver(save_dir)))
