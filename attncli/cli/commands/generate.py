"""`attncli generate`."""

from __future__ import annotations

import sys
from typing import Annotated

from attncli.cli.generating import Answering, Attended
from attncli.cli.groups import Fields, command
from attncli.cli.options import Checkpoint, Encoding, Look, Output, Source
from attncli.cli.output import emit_json, emit_text
from attncli.cli.settings import needed_model
from attncli.cli.streams import settle_interrupt
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
    layers = attended.check()
    asked = answering.asked(attended.kind, attended.exclude_sinks, attended.occlude,
                            attention=attended.narrows(look.head))
    if asked.messages is not None and source.text is not None:
        raise AttnCliError("give TEXT or --messages, not both")
    prompt = "" if asked.messages is not None else source.read(settle=False)[0] or ""
    from attncli.models.family import open_model
    from attncli.models.generate.prompt import build_prompt
    from attncli.models.generate.run import Keep, generate_model
    from attncli.render.reports.generate import render_generation

    after_imports()
    if answering.show_template:
        built = build_prompt(open_model(model), model, prompt, answering.system,
                             answering.raw, encoding.allow_special, asked.messages)
        if output.as_json:
            emit_json(built.to_dict())
        else:
            emit_text(built.given)  # escaped on a terminal, exact through a pipe
        return
    keep = Keep(layers, look.head, json=output.writes_json())
    with answering.streaming() as on_token:
        result = generate_model(model, prompt, sampling, answering.system, answering.raw, keep,
                                on_token, encoding.allow_special, asked)
    if result.stopped == "interrupted":
        settle_interrupt()
    note = result.auto_note()
    if note is not None:
        sys.stderr.write(f"attncli: {note}\n")
    output.deliver_result(result, render_generation, attended.view(result, look.head, layers))

