"""`attncli run`."""

from __future__ import annotations

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
    FullOpt,
    HeadOpt,
    HeadsOpt,
    Impl,
    ImplOpt,
    InputsOpt,
    JsonOpt,
    LayerOpt,
    Measure,
    MeasureOpt,
    ModelOpt,
    PoolOpt,
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
    TopKOpt,
    VariantOpt,
    View,
    ViewOpt,
)
from attncli.cli.output import check_outputs, deliver, is_page
from attncli.cli.requests import display_of, read_source
from attncli.core.display import parse_stages, parse_windows
from attncli.core.result import STAGES
from attncli.errors import AttnCliError


@app.command()
def run(
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
    impl: ImplOpt = Impl.auto,
    top_k: TopKOpt = None,
    pool: PoolOpt = None,
    full: FullOpt = False,
    predict: PredictOpt = None,
    measure: MeasureOpt = Measure.weights,
) -> None:
    """Run one attention variant and show its weights and context vectors.

    Long inputs take the tiled path (--impl auto): per head a summary, a heatmap pooled into
    blocks, each query's top keys, and with --rows/--cols the exact weights of a window.

    With --model, a second look at the same text and checkpoint (another --layer, `heads`,
    `browse`) starts from the hidden states the first one kept in ~/.cache/attncli/hidden
    ($XDG_CACHE_HOME/attncli/hidden; the folder: ATTNCLI_HIDDEN_CACHE, its size:
    ATTNCLI_HIDDEN_CACHE_MAX=2G, least recently used out first; ATTNCLI_NO_CACHE=1: off).

    Examples:

      attncli run "Your journey starts with one step" --variant causal

      attncli run "..." --variant multihead --heads 2 --json | jq '.weights[1]'

      echo "猫吃鱼" | attncli run - --variant qkv

      attncli run --inputs samples/journey.json --variant simple --query journey

      attncli run "..." --show scores,weights,context --save run.svg

      attncli run --file long.txt --view heatmap --rows 0:40 --cols 0:40

      attncli run --file book.txt --variant multihead --heads 4 --head 3 --rows 500:520
    """
    from attncli.cli.streams import after_imports
    from attncli.core.request import Extract, Request
    from attncli.core.sizes import NAIVE_BUDGET

    windows = parse_windows(rows, cols)
    stages = parse_stages(show, STAGES)
    check_outputs(save, save_json)
    if full and not (as_json or save_json):
        raise AttnCliError("--full puts the whole weights matrix in the JSON: use it with --json "
                           "or --save-json")
    source_text, source_inputs = read_source(text, file, inputs, settle=False)
    request = Request(
        text=source_text, inputs=source_inputs, variant=variant, encoding=encoding,
        allow_special=allow_special, seed=seed, emb_dim=emb_dim, context_length=context_length,
        d_out=d_out, heads=heads, dropout=dropout, qkv_bias=qkv_bias, device=device, model=model,
        layer=layer, impl=impl, top_k=top_k, pool=pool, full=full, positions=positions,
        measure=measure, predict=predict)
    extract = Extract(stages=stages or (), rows=windows[0], cols=windows[1], query=query,
                      head=head, maps=save is not None or not as_json, page=is_page(save))
    # The input is checked: now the computation (torch) is imported.
    from attncli.cli.progress import progress_bar
    from attncli.long.path import run as run_attention
    from attncli.models.run import run_model
    from attncli.render.page import page_extra
    from attncli.render.run import render_run

    after_imports()
    with progress_bar() as report:
        result = (run_model(request, extract, report, NAIVE_BUDGET) if request.model is not None
                  else run_attention(request, extract, report))
    display = display_of(result, precision, view, *windows, stages, scale=scale)
    deliver(result.to_dict(), lambda out: render_run(out, result, display), as_json, save,
            save_json, page_extra(result))
