"""Command-line options, each declared once with its default and help, in the groups that
commands take."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Concatenate

import typer

from attncli.cli.groups import Group
from attncli.cli.output import P, Page, R, check_outputs, deliver, is_page
from attncli.cli.requests import read_source, request_of
from attncli.core.display import (
    Display,
    Lang,
    Scale,
    View,
    Window,
    display_of,
    parse_stages,
    parse_windows,
)
from attncli.core.request import Device, Measure, Pool, Request
from attncli.core.result import STAGES
from attncli.core.sizes import Impl
from attncli.core.variants import Variant

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from attncli.core.compare import Shared
    from attncli.core.inputs import InputVectors
    from attncli.core.result import Result

__all__ = ["Device", "Impl", "Lang", "Measure", "Pool", "Scale", "Variant", "View", "request_of"]


# Options shared by the commands that run attention, declared once.
TextArg = Annotated[str | None, typer.Argument(
    help="The text to inspect; '-' reads standard input (as does no TEXT with a pipe).",
    metavar="TEXT",
    show_default=False)]
# Input paths stay strings as typed: pathlib reads "./-" as "-", and only a bare "-" is stdin.
FileOpt = Annotated[str | None, typer.Option(
    "--file", "-f", help="Read the text from this UTF-8 file ('-': standard input; a file "
    "named - is ./-).", show_default=False, metavar="PATH")]
InputsOpt = Annotated[str | None, typer.Option(
    help='JSON vectors instead of text: [[...], ...] or {"tokens": [...], "vectors": [...]} '
    "('-': standard input; a file named - is ./-).", show_default=False, metavar="PATH")]
VariantOpt = Annotated[Variant | None, typer.Option(
    "--variant", "-v", help="Attention variant [default: causal].", show_default=False)]
EncodingOpt = Annotated[str, typer.Option(
    "--encoding", "-e", help="tiktoken encoding: gpt2 (bundled, alias r50k_base), cl100k_base, "
    "o200k_base, p50k_base (these need tiktoken's cached files).")]
SpecialOpt = Annotated[bool, typer.Option("--allow-special",
    help="Encode special-token text in the input (<|endoftext|>, [SEP], [CLS], <|im_start|>) "
    "as the special token, with every tokenizer [default: off: such text is plain text, as "
    "tiktoken reads it; transformers' tokenizers read it as the special token].")]
SeedOpt = Annotated[int, typer.Option(help="Seed for the embeddings and the attention weights.")]
EmbDimOpt = Annotated[int, typer.Option(help="Embedding size (d_in) for text input.")]
ContextOpt = Annotated[int | None, typer.Option(
    help="Rows of the positional embedding table [default: the number of tokens].",
    show_default=False)]
PositionsOpt = Annotated[bool, typer.Option(
    "--positions/--no-positions", help="Add the positional embedding to each token's embedding "
    "(text input); without it attention cannot tell word order apart.")]
DOutOpt = Annotated[int | None, typer.Option(
    help="Output size of W_query/W_key/W_value [default: d_in].", show_default=False)]
HeadsOpt = Annotated[int | None, typer.Option(
    help="Number of heads for multihead [default: 2].", show_default=False)]
DropoutOpt = Annotated[float, typer.Option(
    help="Dropout on the attention weights (causal, multihead), applied as in training.")]
BiasOpt = Annotated[bool, typer.Option("--qkv-bias", help="Give W_query/W_key/W_value a bias.")]
DeviceOpt = Annotated[Device, typer.Option(help=(
    "Where to compute: cpu, cuda, mps (Apple silicon), or auto (cuda when there is one). With "
    "--model, each layer's weights move to the device as they are used, one layer at a time."))]
HeadOpt = Annotated[int | None, typer.Option(
    help="Show only this head (0-based) [default: all].", show_default=False)]
PrecisionOpt = Annotated[int, typer.Option(min=0, max=8, help="Decimals shown in tables.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print strict JSON instead of tables.")]
# How and what to show, shared by run, explain and compare.
ShowOpt = Annotated[str | None, typer.Option(
    help="Stages to show, comma-separated, from: inputs, queries, keys, values, scores, scaled, "
    "masked, softmax, dropped, weights, heads_context, context. With --json, adds them under "
    '"stages".', show_default=False, metavar="STAGES")]
QueryOpt = Annotated[str | None, typer.Option(
    help="One query's view: the keys it attends to, ranked by weight. An index, or a token's "
    "text when unique (its leading space optional).", show_default=False, metavar="I")]
ViewOpt = Annotated[View, typer.Option(
    help="table: numbers; heatmap: coloured blocks (shades without colour); auto: numbers when "
    "they fit the terminal.")]
RowsOpt = Annotated[str | None, typer.Option(
    help="Show only these token rows: a:b, half-open and 0-based like a Python slice (10:20, "
    "5:, :3, -4:). Naive path: JSON stays whole and gains \"window\"; tiled path: its "
    "weights are those of the window, computed exactly.", show_default=False, metavar="A:B")]
ColsOpt = Annotated[str | None, typer.Option(
    help="Show only these key columns of the token × token matrices (scores, weights, ...): c:d.",
    show_default=False, metavar="C:D")]
SaveOpt = Annotated[Path | None, typer.Option(
    help="Also write the rendered output, in colour, to FILE: .svg, .html or .txt.",
    show_default=False, metavar="FILE")]
SaveJsonOpt = Annotated[Path | None, typer.Option(
    help="Also write the JSON to FILE.", show_default=False, metavar="FILE")]
OpenOpt = Annotated[bool, typer.Option("--open", help="Open the file --save wrote in the web "
                                       "browser ($BROWSER, else the system's).")]
ScaleOpt = Annotated[Scale, typer.Option(
    help="Colour range: shared (one range for every table of a quantity, so heads compare), "
    "table (each table its own), unit (weights on a fixed 0-1).")]
LangOpt = Annotated[Lang | None, typer.Option(
    help="Language of the titles and explanations [default: zh when LC_ALL/LANG is Chinese, "
    "else en].", show_default=False)]
# A trained checkpoint instead of the chapter-3 toy variants; the families are models/family.py's
# REGISTRY, named here without importing it (--help imports no model code; a test keeps them equal).
ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", help="A local checkpoint of a family attncli reads (config.json's "
    "model_type gpt2, llama, mistral, qwen2, qwen3, gemma2, gemma3_text, gemma3, phi3, gpt_neox, "
    "olmo2, smollm3, bert or roberta): a Hugging Face folder (config.json + model.safetensors or "
    "shards), a .safetensors or .gguf file, or a name in a store here: the Hugging Face cache "
    "(gpt2, Qwen/Qwen2.5-0.5B), Ollama's (llama3.2:1b), LM Studio's (lmstudio:NAME), attncli's "
    "(smollm2, after `attncli pull smollm2`). Never downloads. Memory: a run reads one layer's "
    "weights as float32 at a time plus about 0.4 GB, whatever the file's size or quantization "
    "(Llama 3.2 1B: 0.6 GB; 3.1 8B: 1.5 GB; 70B: 4 GB), and is refused in one line when less "
    "than twice that is available; generate holds the whole model where it fits in half the "
    "memory available, else reads each layer again at every step. heads, generate, scan and "
    "browse --generate take $ATTNCLI_MODEL, else `attncli config set model NAME`, without it.",
    show_default=False, metavar="PATH|NAME")]
LayerOpt = Annotated[int | None, typer.Option(
    help="With --model: the layer to show, 0-based; negative counts from the end [default: 0].",
    show_default=False)]
PredictOpt = Annotated[int | None, typer.Option(
    "--predict", help="With --model: each position's top K next tokens and their probabilities "
    "(the last block's output through the final norm and the unembedding). explain adds the "
    "shown layer's logit lens beside them; the tiled path predicts at the --rows window only.",
    show_default=False, metavar="K")]
# Long inputs: the tiled path.
ImplOpt = Annotated[Impl, typer.Option(
    help="naive: every N × N stage in memory; tiled: context, log-sum-exp, entropy and top-k "
    "without the N × N matrix; auto: naive while its stages fit 256 MiB.")]
TopKOpt = Annotated[int | None, typer.Option(
    "--top-k", min=0, help="Tiled path: the heaviest keys kept for each query [default: 5].",
    show_default=False)]
PoolOpt = Annotated[Pool | None, typer.Option(
    help="Tiled path: a heatmap block shows the max or the mean of its weights [default: max].",
    show_default=False)]
FullOpt = Annotated[bool, typer.Option(
    "--full", help="Tiled path: put the whole N × N weights in the JSON (refused when it would "
    "not fit in memory).")]
MeasureOpt = Annotated[Measure, typer.Option(
    help="What the matrix shows: weights; norm: ‖α_ij · W_O v_j‖ per head, rows renormalised "
    "(Kobayashi et al. 2020); rollout: Ã_L ··· Ã_0 to the shown layer, each Ã = 0.5·I + "
    "0.5·(heads' mean), rows renormalised (Abnar & Zuidema 2020; --model, and --rows on the "
    "tiled path).")]


# The groups: each option above belongs to one, and a command lists the groups it takes
# (cli/groups.py). Defaults that the computation also has are read from Request, once.
@dataclass(frozen=True)
class Source(Group):
    """The text (TEXT, '-', --file, piped stdin) or --inputs vectors to run on."""

    panel = "Input"
    text: TextArg = None
    file: FileOpt = None
    inputs: InputsOpt = None

    def read(self, settle: bool = True) -> tuple[str | None, InputVectors | None]:
        """The input, read and checked (see cli.requests.read_source)."""
        return read_source(self.text, self.file, self.inputs, settle)


@dataclass(frozen=True)
class Encoding(Group):
    """How text becomes tokens."""

    panel = "Input"
    encoding: EncodingOpt = Request.encoding
    allow_special: SpecialOpt = Request.allow_special


@dataclass(frozen=True)
class Checkpoint(Group):
    """A trained checkpoint instead of a chapter-3 variant."""

    panel = "Model"
    model: ModelOpt = Request.model
    layer: LayerOpt = Request.layer
    predict: PredictOpt = Request.predict


@dataclass(frozen=True)
class Chapter3(Group):
    """The seeded chapter-3 variant: its embeddings and weights."""

    panel = "Chapter-3 settings"
    variant: VariantOpt = Request.variant
    seed: SeedOpt = Request.seed
    emb_dim: EmbDimOpt = Request.emb_dim
    positions: PositionsOpt = Request.positions
    context_length: ContextOpt = Request.context_length
    d_out: DOutOpt = Request.d_out
    heads: HeadsOpt = Request.heads
    dropout: DropoutOpt = Request.dropout
    qkv_bias: BiasOpt = Request.qkv_bias

    def shared(self) -> Shared:
        """--d-out, --heads and --dropout, for each of several variants that has them."""
        from attncli.core.compare import Shared

        return Shared(d_out=self.d_out, heads=self.heads, dropout=self.dropout)


@dataclass(frozen=True)
class Compute(Group):
    """Where and how attention is computed, and what its matrix measures."""

    panel = "Computation"
    device: DeviceOpt = Request.device
    impl: ImplOpt = Request.impl
    top_k: TopKOpt = Request.top_k
    pool: PoolOpt = Request.pool
    full: FullOpt = Request.full
    measure: MeasureOpt = Request.measure


@dataclass(frozen=True)
class Look(Group):
    """What of the result is shown, and how."""

    panel = "Display"
    head: HeadOpt = None
    precision: PrecisionOpt = 4
    show: ShowOpt = None
    query: QueryOpt = None
    view: ViewOpt = View.auto
    rows: RowsOpt = None
    cols: ColsOpt = None
    scale: ScaleOpt = Scale.shared
    lang: LangOpt = None

    def windows(self) -> tuple[Window | None, Window | None]:
        """--rows and --cols, parsed."""
        return parse_windows(self.rows, self.cols)

    def stages(self) -> tuple[str, ...] | None:
        """--show's stages, parsed (None: not given)."""
        return parse_stages(self.show, STAGES)

    def language(self) -> str:
        """--lang, or the environment's language."""
        from attncli.i18n import resolve_lang

        return resolve_lang(self.lang and self.lang.value, os.environ)

    def display(self, result: Result, windows: tuple[Window | None, Window | None],
                stages: tuple[str, ...] | None = None, lang: str = "en") -> Display:
        """The display record of result."""
        return display_of(result, self.precision, self.view, *windows, stages, lang, self.scale)


@dataclass(frozen=True)
class Output(Group):
    """Where the output goes: tables or JSON on stdout, and files beside."""

    panel = "Output"
    needs = {"open_page": "save"}
    as_json: JsonOpt = False
    save: SaveOpt = None
    save_json: SaveJsonOpt = None
    open_page: OpenOpt = False

    def check(self) -> None:
        """Refuse unwritable --save/--save-json, or --open without --save, before any work."""
        check_outputs(self.save, self.save_json, self.open_page)

    def page(self) -> bool:
        """Whether --save names the interactive page (.html or .htm, not .term.html)."""
        return is_page(self.save)

    def writes_json(self) -> bool:
        """Whether the JSON is written: --json, --save-json, or the page (--save x.html)."""
        return self.as_json or self.save_json is not None or self.page()

    def deliver(self, doc: Any, build: Page, extra: dict[str, Any] | None = None) -> None:
        """JSON or tables on stdout, and the files asked for."""
        deliver(doc, build, self.as_json, self.save, self.save_json, extra, self.open_page)

    def deliver_result(self, result: R,
                       render: Callable[Concatenate[Console, R, P], RenderableType],
                       *args: P.args, **kwargs: P.kwargs) -> None:
        """result's to_dict() or render(console, result, *args, **kwargs), as deliver writes."""
        self.deliver(result.to_dict(), lambda out: render(out, result, *args, **kwargs))

