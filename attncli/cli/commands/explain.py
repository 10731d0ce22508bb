"""`attncli explain`."""

from __future__ import annotations

import os

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
    PredictOpt,
    QueryOpt,
    RowsOpt,
    SaveJsonOpt,
    SaveOpt,
    Scale,
    ScaleOpt,
    SeedOpt,
    ShowOpt,
    SpecialOpt,
    TextArg,
    VariantOpt,
    View,
    ViewOpt,
)
from attncli.cli.output import check_outputs, deliver
from attncli.cli.requests import display_of, read_source
from attncli.core.display import parse_stages, parse_windows
from attncli.core.result import STAGES


@app.command()
def explain(
    text: TextArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    model: ModelOpt = None,
    layer: LayerOpt = None,
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
    scale: ScaleOpt = Scale.shared,
    lang: LangOpt = None,
    impl: ImplOpt = Impl.auto,
    predict: PredictOpt = None,
) -> None:
    """Walk through one variant's computation, stage by stage, each explained in a line.

    With --json, every stage is in "stages", masked cells null, to diff with your own code.

    Examples:

      attncli explain "Your journey starts with one step" --variant causal

      attncli explain --inputs samples/journey.json --variant simple --lang zh

      attncli explain "..." --dropout 0.1 --json | jq .stages.dropped

      attncli explain "..." --show scores,softmax --query journey --save x.html

      attncli explain "..." --model gpt2 --layer 6 --predict 3   (the logit lens of layer 6)
    """
    from attncli.cli.streams import after_imports
    from attncli.core.request import Extract, Request
    from attncli.i18n import resolve_lang

    windows = parse_windows(rows, cols)
    stages = parse_stages(show, STAGES)
    check_outputs(save, save_json)
    source_text, source_inputs = read_source(text, file, inputs, settle=False)
    request = Request(
        text=source_text, inputs=source_inputs, variant=variant, encoding=encoding,
        allow_special=allow_special, seed=seed, emb_dim=emb_dim, context_length=context_length,
        d_out=d_out, heads=heads, dropout=dropout, qkv_bias=qkv_bias, device=device, model=model,
        layer=layer, impl=impl, positions=positions, predict=predict)
    extract = Extract(stages=stages, rows=windows[0], cols=windows[1], query=query, head=head,
                      lens=predict is not None)
    # The input is checked: now the computation (torch) is imported.
    from attncli.core.pipeline import run_naive
    from attncli.models.run import run_model
    from attncli.render.explain import render_explain

    after_imports()
    result = (run_model(request, extract) if request.model is not None
              else run_naive(request, extract))
    display = display_of(result, precision, view, *windows, stages,
                         resolve_lang(lang and lang.value, os.environ), scale)
    deliver(result.to_dict(), lambda out: render_explain(out, result, display), as_json, save,
            save_json)
