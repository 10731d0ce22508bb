"""`attncli heads`."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.app import app
from attncli.cli.options import (
    FileOpt,
    JsonOpt,
    ModelOpt,
    SaveJsonOpt,
    SaveOpt,
    Scale,
    ScaleOpt,
    SpecialOpt,
    TextArg,
)
from attncli.cli.output import check_outputs, deliver
from attncli.cli.requests import read_source


@app.command()
def heads(
    text: TextArg = None,
    file: FileOpt = None,
    model: ModelOpt = None,
    heads: Annotated[int | None, typer.Option(
        "--heads", help="Heads per layer, for a bare .safetensors file of a non-standard width.",
        show_default=False)] = None,
    allow_special: SpecialOpt = False,
    sort: Annotated[str, typer.Option(
        help="Order of the table: layer, head, entropy, prev, first, self or distance "
        "(measures sort largest first).")] = "layer",
    precision: Annotated[int, typer.Option(min=0, max=8, help="Decimals shown.")] = 3,
    as_json: JsonOpt = False,
    save: SaveOpt = None,
    save_json: SaveJsonOpt = None,
    scale: ScaleOpt = Scale.shared,
) -> None:
    """Every layer × head of a GPT-2 or Llama-family checkpoint at a glance, with measures.

    Examples:

      attncli heads "The cat sat on the mat because it was tired" --model samples/toy-gpt2

      attncli heads "..." --model gpt2 --sort prev

      attncli heads "..." --model ~/models/gpt2 --json | jq '.heads[0]'
    """
    from attncli.core.request import Request
    from attncli.models.run import run_heads
    from attncli.render.heads import render_heads
    from attncli.render.page import page_extra

    check_outputs(save, save_json)
    source_text, _ = read_source(text, file)
    request = Request(text=source_text, model=model, heads=heads, allow_special=allow_special)
    result = run_heads(request, sort)
    deliver(result.to_dict(), lambda out: render_heads(out, result, precision, scale.value),
            as_json, save, save_json, page_extra(result))
