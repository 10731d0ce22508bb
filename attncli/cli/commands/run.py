"""`attncli run`."""

from __future__ import annotations

from attncli.cli.app import app
from attncli.cli.invocation import display_spec, request_from, run_output, view_options
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
    ModelOpt,
    Pool,
    PoolOpt,
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
    TopKOpt,
    VariantOpt,
    View,
    ViewOpt,
)
from attncli.cli.output import check_outputs, deliver
from attncli.errors import AttnCliError


@app.command()
def run(
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
    impl: ImplOpt = Impl.auto,
    top_k: TopKOpt = 5,
    pool: PoolOpt = Pool.max,
    full: FullOpt = False,
) -> None:
    """Run one attention variant and show its weights and context vectors.

    Long inputs take the tiled path (--impl auto): per head a summary, a heatmap pooled into
    blocks, each query's top keys, and with --rows/--cols the exact weights of a window.

    Examples:

      attncli run "Your journey starts with one step" --variant causal

      attncli run "..." --variant multihead --heads 2 --json | jq '.weights[1]'

      echo "猫吃鱼" | attncli run - --variant qkv

      attncli run --inputs samples/journey.json --variant simple --query journey

      attncli run "..." --show scores,weights,context --save run.svg

      attncli run --file long.txt --view heatmap --rows 0:40 --cols 0:40

      attncli run --file book.txt --variant multihead --heads 4 --head 3 --rows 500:520
    """
    from attncli.cli.progress import progress_bar
    from attncli.core.display import LongView
    from attncli.core.pipeline import run as run_pipeline

    given = locals()
    spec = display_spec(precision, view, rows, cols, head, query, show)
    check_outputs(save, save_json)
    if full and not (as_json or save_json):
        raise AttnCliError("--full puts the whole weights matrix in the JSON: use it with --json "
                           "or --save-json")
    request = request_from(given, keep=("masked", "keys", *(spec.stages or ())))
    shown = LongView.of(spec, maps=save is not None or not as_json)
    with progress_bar() as report:
        result = run_pipeline(request, shown, report)
    options = view_options(spec, result)
    deliver(*run_output(result, spec, options), as_json, save, save_json)
