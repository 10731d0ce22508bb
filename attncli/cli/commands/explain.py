"""`attncli explain`."""

from __future__ import annotations

import os

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
    HeadOpt,
    HeadsOpt,
    Impl,
    ImplOpt,
    InputsOpt,
    JsonOpt,
    LangOpt,
    LayerOpt,
    ModelOpt,
    PositionsOpt,
    PrecisionOpt,
    QueryOpt,
    RowsOpt,
    SaveJsonOpt,
    SaveOpt,
    SeedOpt,
    ShowOpt,
    SpecialOpt,
    TextArg,
    VariantOpt,
    View,
    ViewOpt,
)
from attncli.cli.output import check_outputs, deliver


@app.command()
def explain(
    text: TextArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    model: ModelOpt = None,
    layer: LayerOpt = 0,
    variant: VariantOpt = None,
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
    head: HeadOpt = None,
    precision: PrecisionOpt = 4,
    as_json: JsonOpt = False,
    show: ShowOpt = None,
    query: QueryOpt = None,
    view: ViewOpt = View.auto,
    rows: RowsOpt = None,
    cols: ColsOpt = None,
    save: SaveOpt = None,
    save_json: SaveJsonOpt = None,
    lang: LangOpt = None,
    impl: ImplOpt = Impl.auto,
) -> None:
    """Walk through one variant's computation, stage by stage, each explained in a line.

    With --json, every stage is in "stages", masked cells null, to diff with your own code.

    Examples:

      attncli explain "Your journey starts with one step" --variant causal

      attncli explain --inputs samples/journey.json --variant simple --lang zh

      attncli explain "..." --dropout 0.1 --json | jq .stages.dropped

      attncli explain "..." --show scores,softmax --query journey --save x.html
    """
    from attncli.core.pipeline import run_naive
    from attncli.render.explain import render_explain
    from attncli.render.i18n import resolve_lang

    given = locals()
    spec = display_spec(precision, view, rows, cols, head, query, show,
                        resolve_lang(lang and lang.value, os.environ))
    check_outputs(save, save_json)
    result = run_naive(request_from(given))
    options = view_options(spec, result)
    doc = result.to_dict(stages=list(options.stages or result.available_stages()),
                         query=options.query, window=spec.window(len(result.tokens)))
    deliver(doc, lambda out: render_explain(out, result, options), as_json, save, save_json)
