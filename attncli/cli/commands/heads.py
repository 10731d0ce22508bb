"""`attncli heads`."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.app import app
from attncli.cli.invocation import request_from
from attncli.cli.options import (
    FileOpt,
    JsonOpt,
    ModelOpt,
    SaveJsonOpt,
    SaveOpt,
    SpecialOpt,
    TextArg,
)
from attncli.cli.output import check_outputs, deliver


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
) -> None:
    """Every layer × head of a GPT-2 or Llama-family checkpoint at a glance, with measures.

    Examples:

      attncli heads "The cat sat on the mat because it was tired" --model samples/toy-gpt2

      attncli heads "..." --model gpt2 --sort prev

      attncli heads "..." --model ~/models/gpt2 --json | jq '.heads[0]'
    """
    from attncli.core.pipeline import run_heads
    from attncli.render.heads import render_heads

    given = locals()
    check_outputs(save, save_json)
    result = run_heads(request_from(given), sort)
    deliver(result.to_dict(), lambda out: render_heads(out, result, precision), as_json, save,
            save_json)
