"""`attncli compare`."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.app import app
from attncli.cli.invocation import display_spec, request_from, view_options
from attncli.cli.options import (
    BiasOpt,
    ColsOpt,
    ContextOpt,
    Device,
    DeviceOpt,
    DOutOpt,
    DropoutOpt,
    EmbDimOpt,
    EncodingOpt,
    FileOpt,
    HeadsOpt,
    Impl,
    ImplOpt,
    InputsOpt,
    JsonOpt,
    PositionsOpt,
    PrecisionOpt,
    RowsOpt,
    SaveJsonOpt,
    SaveOpt,
    SeedOpt,
    SpecialOpt,
    TextArg,
    Variant,
    View,
    ViewOpt,
)
from attncli.cli.output import check_outputs, deliver


@app.command()
def compare(
    text: TextArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    variants: Annotated[str, typer.Option(
        help="The variants to compare, comma-separated.")] = "simple,qkv,causal,multihead",
    encoding: EncodingOpt = "gpt2",
    allow_special: SpecialOpt = False,
    seed: SeedOpt = 123,
    emb_dim: EmbDimOpt = 8,
    positions: PositionsOpt = True,
    context_length: ContextOpt = None,
    d_out: DOutOpt = None,
    heads: HeadsOpt = None,
    dropout: DropoutOpt = 0.0,
    qkv_bias: BiasOpt = False,
    device: DeviceOpt = Device.cpu,
    precision: PrecisionOpt = 4,
    as_json: JsonOpt = False,
    view: ViewOpt = View.auto,
    rows: RowsOpt = None,
    cols: ColsOpt = None,
    save: SaveOpt = None,
    save_json: SaveJsonOpt = None,
    impl: ImplOpt = Impl.auto,
) -> None:
    """Compare the attention weights of several variants on the same tokens and embeddings.

    --heads applies to multihead, --dropout to causal and multihead, --d-out to all but simple.

    Examples:

      attncli compare "one two three four" --variants simple,causal,multihead

      attncli compare --inputs samples/journey.json --variants simple,qkv

      attncli compare "..." --view heatmap --json | jq '.variants[].variant'
    """
    from attncli.core.compare import run_compare
    from attncli.core.display import parse_names
    from attncli.render.compare import render_compare

    given = locals()
    names = parse_names(variants, [v.value for v in Variant], "--variants")
    spec = display_spec(precision, view, rows, cols)
    check_outputs(save, save_json)
    base = request_from(given, keep=("masked",))
    results = run_compare(base, list(names))
    options = view_options(spec, results[0])
    window = spec.window(len(results[0].tokens))
    doc = {"variants": [result.to_dict(window=window) for result in results]}
    deliver(doc, lambda out: render_compare(out, results, options), as_json, save, save_json)
