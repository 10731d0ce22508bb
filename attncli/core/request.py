"""One typed, frozen request per run: every setting that affects the numbers, checked once.

A command builds it from named keyword arguments; the computation reads only its fields.
What a run materialises beyond weights and context (stages, a window, a query row) is an
Extract; how anything is drawn never travels down here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from attncli.core.display import Window
from attncli.core.inputs import InputVectors
from attncli.core.sizes import Impl, check_seed
from attncli.core.variants import TRAITS, Traits, Variant
from attncli.errors import AttnCliError

GPT2_ENCODINGS = ("gpt2", "r50k_base")
DEFAULT_TOP_K = 5


class Device(str, Enum):
    """Where attention is computed."""

    cpu = "cpu"
    cuda = "cuda"
    mps = "mps"  # Apple silicon's GPU
    auto = "auto"  # cuda when there is one, else the CPU


class Measure(str, Enum):
    """What `run`'s matrix shows: the weights, or a view beyond them (core/measures.py)."""

    weights = "weights"
    norm = "norm"  # ‖α_ij · W_O v_j‖ per head, rows renormalised
    rollout = "rollout"  # Ã_L ··· Ã_0 to the shown layer, heads averaged (needs --model)


class Route(str, Enum):
    """What a request runs: a seeded chapter-3 variant, or a trained checkpoint's layers."""

    chapter3 = "chapter3"
    checkpoint = "checkpoint"


class Pool(str, Enum):
    """How a long run's heatmap block summarises its weights."""

    max = "max"
    mean = "mean"


def check_dims(**dims: int | None) -> None:
    """Reject a non-positive dimension, naming it."""
    for name, value in dims.items():
        if value is not None and value < 1:
            raise AttnCliError(f"{name.replace('_', '-')} must be a positive integer (got {value})")


@dataclass(frozen=True)
class Request:
    """Every setting that affects the numbers of one run; invalid combinations never exist."""

    text: str | None = None
    inputs: InputVectors | None = None
    variant: Variant | None = None  # None: causal, or a checkpoint's own attention with --model
    encoding: str = "gpt2"
    allow_special: bool = False
    seed: int = 123
    emb_dim: int = 8
    context_length: int | None = None
    d_out: int | None = None
    heads: int | None = None
    dropout: float = 0.0
    qkv_bias: bool = False
    device: Device = Device.cpu
    model: str | None = None  # a checkpoint instead of a chapter-3 variant
    layer: int | None = None  # with --model: the layer shown (default 0)
    impl: Impl = Impl.auto
    top_k: int | None = None  # tiled: the heaviest keys kept per query row (default 5)
    pool: Pool | None = None  # tiled: how heatmap blocks pool their weights (default max)
    full: bool = False  # tiled: the whole weights matrix in the result, not a window
    positions: bool = True  # text: add the positional embedding to the token embedding
    measure: Measure = Measure.weights  # what the matrix shows: weights, norm or rollout
    predict: int | None = None  # --predict K: each position's top-K next tokens (--model)

    def __post_init__(self) -> None:
        for name, kind in (("impl", Impl), ("device", Device), ("measure", Measure)):
            object.__setattr__(self, name, _choice(kind, getattr(self, name), name))
        if self.variant is not None:
            object.__setattr__(self, "variant", _choice(Variant, self.variant, "variant"))
        if self.pool is not None:
            object.__setattr__(self, "pool", _choice(Pool, self.pool, "pool"))
        _check(self)

    @property
    def route(self) -> Route:
        """The one place that decides what runs: the checkpoint with --model, else a variant."""
        return Route.checkpoint if self.model is not None else Route.chapter3

    @property
    def kind(self) -> Variant:
        """The chapter-3 variant this request runs."""
        return self.variant or Variant.causal

    @property
    def traits(self) -> Traits:
        """What the variant computes."""
        return TRAITS[self.kind]

    @property
    def num_heads(self) -> int:
        """Heads of a chapter-3 variant: --heads, or the variant's default."""
        return self.heads or self.traits.default_heads

    @property
    def keys_kept(self) -> int:
        """Top keys the tiled path keeps per query."""
        return DEFAULT_TOP_K if self.top_k is None else self.top_k

    @property
    def pooling(self) -> Pool:
        """How the tiled path pools heatmap blocks."""
        return self.pool or Pool.max


def _choice(kind: type[Enum], value: object, name: str) -> Enum:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(str(member.value) for member in kind)
        raise AttnCliError(f"unknown {name} {value!r} (choose from {choices})") from None


def _check(req: Request) -> None:
    """Reject settings that cannot run, before any work is done."""
    if (req.text is None) == (req.inputs is None):
        raise AttnCliError("give TEXT, --file or --inputs, not more than one")
    check_seed(req.seed)
    toy = req.route is Route.chapter3
    if req.layer is not None and toy:
        raise AttnCliError("--layer applies with --model only (a checkpoint's layers)")
    if req.impl is Impl.naive:
        for given, option in ((req.top_k is not None, "--top-k"), (req.pool is not None, "--pool"),
                              (req.full, "--full")):
            if given:
                raise AttnCliError(f"{option} applies to the tiled path, not with --impl naive")
    if not req.positions and req.inputs is not None:
        raise AttnCliError("--no-positions applies to text: --inputs vectors are used as given")
    if req.inputs is not None and req.context_length is not None:
        raise AttnCliError("--context-length applies to text input, not to --inputs vectors "
                           "(they carry no positional embedding)")
    if req.top_k is not None and req.top_k < 0:
        raise AttnCliError(f"top-k must be 0 or more (got {req.top_k})")
    if req.predict is not None and toy:
        raise AttnCliError("--predict applies with --model only: a chapter-3 variant has no "
                           "vocabulary to predict")
    if req.predict is not None and req.predict < 1:
        raise AttnCliError(f"--predict must be 1 or more (got {req.predict})")
    if req.measure is Measure.rollout and toy:
        raise AttnCliError("--measure rollout needs --model: rollout multiplies a model's layers "
                           "(Ã_L ··· Ã_0), and a chapter-3 variant is a single layer")
    if toy:
        _check_variant(req)
    else:
        _check_model(req)


def _check_variant(req: Request) -> None:
    traits = req.traits
    if not 0.0 <= req.dropout < 1.0 or math.isnan(req.dropout):
        raise AttnCliError(f"dropout must be in [0, 1) (got {req.dropout})")
    check_dims(emb_dim=req.emb_dim, d_out=req.d_out, heads=req.heads,
               context_length=req.context_length)
    if req.heads is not None and req.heads != 1 and not traits.multihead:
        raise AttnCliError(f"--heads applies to --variant multihead only (got variant "
                           f"{req.kind.value!r}, heads={req.heads})")
    if req.dropout > 0 and not traits.dropout:
        raise AttnCliError(f"--dropout applies to causal and multihead only (got variant "
                           f"{req.kind.value!r})")


def _check_model(req: Request) -> None:
    """With --model the checkpoint fixes the architecture: refuse settings that cannot apply."""
    if req.variant is not None:
        raise AttnCliError("--variant does not apply with --model: the checkpoint's own "
                           "attention is shown")
    if req.inputs is not None:
        raise AttnCliError("--model runs on text, not on --inputs vectors")
    if req.encoding not in GPT2_ENCODINGS:
        raise AttnCliError(f"--model uses the checkpoint's own tokenizer, not --encoding "
                           f"{req.encoding}")
    if not req.positions:
        raise AttnCliError("--no-positions does not apply with --model: a trained model is "
                           "inspected with the positions it was trained with")
    if req.dropout:
        raise AttnCliError(f"--dropout does not apply with --model (got {req.dropout}): "
                           "a trained model is inspected as in inference")
    check_dims(heads=req.heads)


@dataclass(frozen=True)
class Extract:
    """What a run materialises as plain data beyond its weights and context."""

    stages: tuple[str, ...] | None = None  # naive path: stages kept (None: every stage)
    rows: Window | None = None  # --rows: the window's query rows
    cols: Window | None = None  # --cols: the window's key columns
    query: str | None = None  # --query: one query's exact row, an index or a token's text
    head: int | None = None  # --head: the result holds this head alone
    maps: bool = False  # tiled path: pooled heatmaps of the heads, for a terminal or --save
    page: bool = False  # tiled path: the weights near the diagonal, for the page's moving window
    grid: int = field(default=128)  # tiled path: the most heatmap blocks on each side
    lens: bool = False  # explain --predict: the shown layer's logit lens beside the final
