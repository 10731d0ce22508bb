"""`attncli tokens`."""

from __future__ import annotations

from attncli.cli.app import app
from attncli.cli.options import (
    EncodingOpt,
    FileOpt,
    JsonOpt,
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
) -> None:
    """Show how the text splits into tokens: index, id, label and exact bytes.

    Examples:

      attncli tokens "Your journey starts with one step"

      echo "猫吃鱼" | attncli tokens - --json
    """
    from attncli.core.inputs import read_text
    from attncli.core.result import TokenInfo
    from attncli.core.tokens import tokenize

    pieces = tokenize(read_text(text, file), encoding, allow_special)
    if as_json:
        emit_json({"encoding": encoding, "tokens": (TokenInfo.of(p).to_dict() for p in pieces)})
        return
    from attncli.render.draw.listing import print_tokens

    emit_streamed(lambda out: print_tokens(out, pieces, encoding))
