"""`attncli generate`."""

from __future__ import annotations

import sys
from typing import Annotated

from attncli.cli.generating import Answering, Attended
from attncli.cli.groups import Fields, command
from attncli.cli.options import Checkpoint, Encoding, Look, Output, Source
from attncli.cli.output import emit_json, emit_text
from attncli.cli.settings import needed_model
from attncli.cli.streams import settle_interrupt, was_interrupted
from attncli.errors import AttnCliError
from attncli.records.asking import Sampling


@command(needs_model=True)
def generate(source: Annotated[Source, Fields("text", "file")],
             checkpoint: Annotated[Checkpoint, Fields("model")],
             encoding: Annotated[Encoding, Fields("allow_special")], sampling: Sampling,
             answering: Answering,
             attended: Attended, look: Annotated[Look, Fields("head")],
             output: Output) -> None:
    """Let the model answer, or explain an answer you give, and show what each answer token
    looked at.

    --messages takes a conversation (OpenAI/Ollama chat JSON). --answer, --answer-file or
    --explain-last (the conversation's last assistant turn) give the answer: it is
    teacher-forced in one pass, and each token shows its probability, its rank and the
    model's own choice where that differs. --view ranks the prompt tokens by raw weights, by
    value-weighted attention, or by occlusion (what masking the token costs the answer); by
    default (auto) by occlusion where its passes are few, else by value, and says which.

    On a terminal the answer is written to stderr token by token as it comes (--stream,
    --no-stream). Ctrl-C stops the model and shows what it wrote so far (stopped:
    interrupted, exit 0); before its first answer token, Ctrl-C ends the run with exit 130.

    Examples:

      attncli generate "What is the capital of France?" --model SmolLM2.gguf

      attncli generate "Name a colour" --model M --sample --sample-seed 1 --at 0 --layers 0:8

      attncli generate "Name a colour" --model M --at Blue --json --layers 20:30 --head 3

      attncli generate --messages chat.json --explain-last --model M --view value

      attncli generate "Capital of France?" --answer "Lyon." --model M --view occlusion
    """
    from attncli.cli.streams import after_imports

    model = needed_model(checkpoint.model, "generate", " (the decoder that answers)")
    output.check()
    if answering.show_template and (output.save or output.save_json):
        raise AttnCliError("--show-template prints what the model is given and stops: it writes "
                           "no --save or --save-json file (redirect it: > FILE)")
    request = answering.request(model, source, sampling, attended, look.head,
                                encoding.allow_special, json=output.writes_json())
    from attncli.models.family import open_model
    from attncli.models.generate.prompt import build_prompt
    from attncli.models.generate.run import generate_model
    from attncli.records.shown import shown_view
    from attncli.render.reports.generate import render_generation

    after_imports()
    if answering.show_template:
        built = build_prompt(open_model(model), model, request.prompt, request.system,
                             request.raw, request.allow_special, request.messages)
        if output.as_json:
            emit_json(built.to_dict())
        else:
            emit_text(built.given)  # escaped on a terminal, exact through a pipe
        return
    with answering.streaming() as on_token:
        result = generate_model(request, on_token)
    kind = None
    if was_interrupted():  # Ctrl-C while the views were made: the answer is kept without them
        settle_interrupt()
        kind = result.view
        sys.stderr.write("attncli: interrupted while the views were made: showing the answer's "
                         "raw attention weights\n")
    note = result.auto_note() if kind is None else None
    if note is not None:
        sys.stderr.write(f"attncli: {note}\n")
    output.deliver_result(result, render_generation, shown_view(result, request, kind))
