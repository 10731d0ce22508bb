"""The attncli command line: options → pipeline → renderer; errors → exit codes.

torch is imported only by the commands that compute attention, so --help stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from attncli import __version__
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
    LangOpt,
    LayerOpt,
    ModelOpt,
    Pool,
    PoolOpt,
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
    Variant,
    VariantOpt,
    View,
    ViewOpt,
)
from attncli.cli.output import Page, check_outputs, console, deliver, deliver_pages, emit, emit_text
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    pass


app = typer.Typer(
    help="See attention: tokenise text, embed it, run one attention variant and show the "
    "weights and context vectors as coloured tables or JSON.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

def _version(value: bool) -> None:
    if value:
        typer.echo(f"attncli {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """See attention in your terminal: attncli run "Your journey starts with one step"."""


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


@app.command()
def demo(
    lang: LangOpt = None,
    no_pause: Annotated[bool, typer.Option(
        "--no-pause", help="Do not wait for Enter between steps (it never waits when stdin or "
        "stdout is not a terminal).")] = False,
    view: ViewOpt = View.auto,
    precision: PrecisionOpt = 4,
    save: SaveOpt = None,
) -> None:
    """A guided tour of the book's chapter-3 example, "Your journey starts with one step".

    Simple attention for one query, then all six, then qkv, causal (with dropout) and
    multihead, with the book's settings so the numbers match the book.

    Examples:

      attncli demo

      attncli demo --lang zh --no-pause | less -R

      attncli demo --save demo.html
    """
    from attncli.lessons.tour import tour
    from attncli.render.demo import render_outro, render_page, render_title
    from attncli.render.i18n import resolve_lang
    from attncli.render.views import ViewOptions

    check_outputs(save, None)
    options = ViewOptions(precision=precision, view=view.value,
                          lang=resolve_lang(lang and lang.value, os.environ))
    steps = tour()
    pages: list[Page] = [lambda out: render_title(options.lang)]
    pages += [lambda out, k=k, step=step: render_page(out, step, k, len(steps), options)
              for k, step in enumerate(steps, start=1)]
    pages.append(lambda out: render_outro(options.lang))
    paced = not no_pause and sys.stdin.isatty() and sys.stdout.isatty()
    deliver_pages(pages, save, options.lang if paced else None)


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
    """Every layer × head of a GPT-2 checkpoint at a glance, with measures of what each does.

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
    from attncli.render import to_json

    pieces = tokenize(read_text(text, file), encoding, allow_special)
    if as_json:
        emit_text(to_json({"encoding": encoding,
                           "tokens": [TokenInfo.of(p).to_dict() for p in pieces]}))
        return
    from attncli.render.run import render_tokens

    emit(console(), render_tokens(pieces, encoding))


def _is_click_error(err: BaseException) -> bool:
    return any(cls.__name__ == "ClickException" for cls in type(err).__mro__)


def fail(message: str, code: int = 2) -> int:
    """The one place an error becomes a line on stderr and an exit code."""
    sys.stdout.flush()
    sys.stderr.write(f"attncli: error: {message}\n")
    sys.stderr.flush()
    return code


def execute(argv: list[str] | None = None) -> int:
    """Run the CLI on argv and return the exit code; no traceback for bad input."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="attncli", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except AttnCliError as err:
        return fail(str(err), err.exit_code)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as err:
        if _is_click_error(err):
            return fail(err.format_message(), getattr(err, "exit_code", 2))  # type: ignore[attr-defined]
        raise


def main() -> None:
    """Console-script entry point."""
    code = execute()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    sys.stderr.flush()
    if "torch" in sys.modules:
        # Interpreter shutdown after importing torch costs ~0.3 s; nothing is left to clean up.
        os._exit(code)
    sys.exit(code)
