"""The attncli command line: options → pipeline → renderer; errors → exit codes.

torch is imported only by the commands that compute attention, so --help stays fast.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli import __version__
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from attncli.pipeline import Request


class Variant(str, Enum):
    simple = "simple"
    qkv = "qkv"
    causal = "causal"
    multihead = "multihead"


class Device(str, Enum):
    cpu = "cpu"
    cuda = "cuda"
    auto = "auto"


app = typer.Typer(
    help="See attention: tokenise text, embed it, run one attention variant and show the "
    "weights and context vectors as coloured tables or JSON.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Options shared by the commands that run attention, declared once.
TextArg = Annotated[str | None, typer.Argument(
    help="The text to inspect; '-' reads standard input (as does no TEXT with a pipe).",
    metavar="TEXT",
    show_default=False)]
FileOpt = Annotated[Path | None, typer.Option(
    "--file", "-f", help="Read the text from this UTF-8 file.", show_default=False)]
InputsOpt = Annotated[Path | None, typer.Option(
    help='JSON vectors instead of text: [[...], ...] or {"tokens": [...], "vectors": [...]}.',
    show_default=False)]
VariantOpt = Annotated[Variant, typer.Option("--variant", "-v", help="Attention variant.")]
EncodingOpt = Annotated[str, typer.Option(
    "--encoding", "-e", help="tiktoken encoding: gpt2 (bundled, alias r50k_base), cl100k_base, "
    "o200k_base, p50k_base (these need tiktoken's cached files).")]
SpecialOpt = Annotated[bool, typer.Option("--allow-special",
    help="Encode text such as <|endoftext|> as the special token, not as plain text.")]
SeedOpt = Annotated[int, typer.Option(help="Seed for the embeddings and the attention weights.")]
EmbDimOpt = Annotated[int, typer.Option(help="Embedding size (d_in) for text input.")]
ContextOpt = Annotated[int | None, typer.Option(
    help="Rows of the positional embedding table [default: the number of tokens].",
    show_default=False)]
DOutOpt = Annotated[int | None, typer.Option(
    help="Output size of W_query/W_key/W_value [default: d_in].", show_default=False)]
HeadsOpt = Annotated[int | None, typer.Option(
    help="Number of heads for multihead [default: 2].", show_default=False)]
DropoutOpt = Annotated[float, typer.Option(
    help="Dropout on the attention weights (causal, multihead), applied as in training.")]
BiasOpt = Annotated[bool, typer.Option("--qkv-bias", help="Give W_query/W_key/W_value a bias.")]
DeviceOpt = Annotated[Device, typer.Option(help="Where to compute.")]
HeadOpt = Annotated[int | None, typer.Option(
    help="Show only this head (0-based) [default: all].", show_default=False)]
PrecisionOpt = Annotated[int, typer.Option(min=0, max=8, help="Decimals shown in tables.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print strict JSON instead of tables.")]


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


def console() -> Console:
    """The stdout console: colour only on a terminal, NO_COLOR respected (by Rich)."""
    from rich.console import Console

    return Console(highlight=False)


def emit_text(text: str) -> None:
    """Write text to stdout as UTF-8, without Rich (which would wrap long lines)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


def emit(out: Console, renderable: RenderableType) -> None:
    """Print a renderable to stdout."""
    out.print(renderable)


def build_request(text: str | None, file: Path | None, inputs: Path | None,
                  **settings: Any) -> Request:
    """Read the input (text or vectors) and gather the settings into a Request."""
    from attncli.inputs import load_inputs, read_text
    from attncli.pipeline import Request

    if inputs is not None:
        if text is not None or file is not None:
            raise AttnCliError("give TEXT, --file or --inputs, not more than one")
        return Request(inputs=load_inputs(inputs), **settings)
    return Request(text=read_text(text, file), **settings)


def check_head(head: int | None, num_heads: int) -> None:
    """Reject a --head outside 0..num_heads-1."""
    if head is not None and not 0 <= head < num_heads:
        raise AttnCliError(f"--head {head} is out of range: this run has {num_heads} head(s), "
                           f"numbered 0 to {num_heads - 1}")


@app.command()
def run(
    text: TextArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    variant: VariantOpt = Variant.causal,
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
) -> None:
    """Run one attention variant and show its weights and context vectors.

    Examples:

      attncli run "Your journey starts with one step" --variant causal

      attncli run "..." --variant multihead --heads 2 --json | jq '.weights[1]'

      echo "猫吃鱼" | attncli run - --variant qkv

      attncli run --inputs samples/journey.json --variant simple
    """
    from attncli.pipeline import run as run_pipeline
    from attncli.render import to_json
    from attncli.render.run import render_run

    request = build_request(
        text, file, inputs, variant=variant.value, encoding=encoding,
        allow_special=allow_special, seed=seed, emb_dim=emb_dim, context_length=context_length,
        d_out=d_out, heads=heads, dropout=dropout, qkv_bias=qkv_bias, device=device.value)
    result = run_pipeline(request)
    check_head(head, result.num_heads)
    if as_json:
        emit_text(to_json(result.to_dict()))
        return
    out = console()
    emit(out, render_run(out, result, precision, head))


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
    from attncli.inputs import read_text
    from attncli.render import to_json
    from attncli.tokens import tokenize

    pieces = tokenize(read_text(text, file), encoding, allow_special)
    if as_json:
        emit_text(to_json({"encoding": encoding, "tokens": [
            {"index": p.index, "id": p.id, "text": p.label, "bytes": (p.data or b"").hex()}
            for p in pieces]}))
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
