"""`attncli tokens`."""

from __future__ import annotations

from attncli.cli.app import app
from attncli.cli.options import (
    EncodingOpt,
    FileOpt,
    JsonOpt,
    ModelOpt,
    SpecialOpt,
    TextArg,
)
from attncli.cli.output import emit_json, emit_streamed


@app.command()
def tokens(
    text: TextArg = None,
    file: FileOpt = None,
    encoding: EncodingOpt = "gpt2",
    allow_special: SpecialOpt = False,
    as_json: JsonOpt = False,
    model: ModelOpt = None,
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

    source = read_text(text, file)
    if model is not None:
        from attncli.models.hf_tokens import model_tokens

        doc, pieces, name, limits = model_tokens(model, source, allow_special)
        if as_json:
            emit_json(doc)
        else:
            emit_streamed(lambda out: print_token_stream(out, pieces, name, limits))
        return
    chunks = token_chunks(source, encoding, allow_special)
    if as_json:
        emit_json({"encoding": encoding,
                   "tokens": (TokenInfo.of(p).to_dict() for chunk in chunks for p in chunk)})
        return
    bounds = token_bounds(source, encoding)
    emit_streamed(lambda out: print_token_stream(out, chunks, encoding, bounds))
