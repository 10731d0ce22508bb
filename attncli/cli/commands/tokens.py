"""`attncli tokens`."""

from __future__ import annotations

from typing import Annotated

from attncli.cli.groups import Fields, command
from attncli.cli.options import Checkpoint, Encoding, Output, Source
from attncli.cli.output import emit_json, emit_streamed


@command()
def tokens(
    source: Annotated[Source, Fields("text", "file")],
    encoding: Encoding,
    output: Annotated[Output, Fields("as_json")],
    checkpoint: Annotated[Checkpoint, Fields("model")],
) -> None:
    """Show how the text splits into tokens: index, id, label and exact bytes.

    Examples:

      attncli tokens "Your journey starts with one step"

      echo "猫吃鱼" | attncli tokens - --json

      attncli tokens "猫吃鱼" --model Qwen/Qwen2.5-0.5B
    """
    from attncli.core.inputs import read_text
    from attncli.core.result import TokenInfo
    from attncli.core.tokens import token_bounds, token_chunks
    from attncli.render.draw.token_table import print_token_stream

    text = read_text(source.text, source.file)
    if checkpoint.model is not None:  # the checkpoint's tokenizer: no run is decided here
        from attncli.models.hf_tokens import model_tokens

        doc, chunks, name, bounds = model_tokens(checkpoint.model, text, encoding.allow_special)
    else:
        chunks = token_chunks(text, encoding.encoding, encoding.allow_special)
        name, bounds = encoding.encoding, token_bounds(text, encoding.encoding)
        doc = {"kind": "tokens", "encoding": name,
               "tokens": (TokenInfo.of(p).to_dict() for chunk in chunks for p in chunk)}
    if output.as_json:
        emit_json(doc)
    else:
        emit_streamed(lambda out: print_token_stream(out, chunks, name, bounds))
