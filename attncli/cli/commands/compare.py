"""`attncli compare`."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.app import app
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
    Scale,
    ScaleOpt,
    SeedOpt,
    SpecialOpt,
    TextArg,
    Variant,
    View,
    ViewOpt,
)
from attncli.cli.output import check_outputs, deliver
from attncli.cli.requests import display_of, read_source
from attncli.core.display import parse_names, parse_windows


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
    scale: ScaleOpt = Scale.shared,
    impl: ImplOpt = Impl.auto,
) -> None:
    """Compare the attention weights of several variants on the same tokens and embeddings.

    --heads applies to multihead, --dropout to causal and multihead, --d-out to all but simple.

    Examples:

      attncli compare "one two three four" --variants simple,causal,multihead

      attncli compare --inputs samples/journey.json --variants simple,qkv

      attncli compare "..." --view heatmap --json | jq '.variants[].variant'
    """
    from attncli.core.compare import Shared, run_compare
    from attncli.core.request import Request
    from attncli.render.compare import render_compare

    names = parse_names(variants, [v.value for v in Variant], "--variants")
    windows = parse_windows(rows, cols)
    check_outputs(save, save_json)
    source_text, source_inputs = read_source(text, file, inputs)
    base = Request(
        text=source_text, inputs=source_inputs, encoding=encoding, allow_special=allow_special,
        seed=seed, emb_dim=emb_dim, context_length=context_length, qkv_bias=qkv_bias,
        device=device, impl=impl, positions=positions)
    shared = Shared(d_out=d_out, heads=heads, dropout=dropout)
    results = run_compare(base, [Variant(name) for name in names], shared, *windows)
    display = display_of(results[0], precision, view, *windows, scale=scale)
    doc = {"variants": [result.to_dict() for result in results]}
    deliver(doc, lambda out: render_compare(out, results, display), as_json, save, save_json)
