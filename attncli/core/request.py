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
from attncli.opt import opt

GPT2_ENCODINGS = ("gpt2", "r50k_base")
DEFAULT_TOP_K = 5
# A trained checkpoint instead of the chapter-3 toy variants; the families are models/family.py's
# REGISTRY, named here without importing it (--help imports no model code; a test keeps them equal).
MODEL_HELP = (
    "A local checkpoint of a family attncli reads (config.json's model_type gpt2, llama, mistral, "
    "qwen2, qwen3, gemma2, gemma3_text, gemma3, phi3, gpt_neox, olmo2, smollm3, bert or roberta): "
    "a Hugging Face folder (config.json + model.safetensors or shards), a .safetensors or .gguf "
    "file, or a name in a store here: the Hugging Face cache (gpt2, Qwen/Qwen2.5-0.5B), Ollama's "
    "(llama3.2:1b), LM Studio's (lmstudio:NAME), attncli's (smollm2, after `attncli pull "
    "smollm2`). Never downloads. Memory: a run reads one layer's weights as float32 at a time plus "
    "about 0.4 GB, whatever the file's size or quantization (Llama 3.2 1B: 0.6 GB; 3.1 8B: 1.5 GB; "
    "70B: 4 GB), and is refused in one line when less than twice that is available; generate "
    "holds the whole model where it fits in half the memory available, else reads each layer "
    "again at every step. heads, generate, scan and browse --generate take $ATTNCLI_MODEL, else "
    "`attncli config set model NAME`, without it.")
# The --help headings of its options.
INPUT, MODEL, CHAPTER3, COMPUTE = "Input", "Model", "Chapter-3 settings", "Computation"


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
    # None: causal, or a checkpoint's own attention with --model
    variant: Variant | None = opt(None, "--variant", "-v", help="Attention variant [default: "
                                  "causal].", show_default=False, panel=CHAPTER3)
    encoding: str = opt("gpt2", "--encoding", "-e", help="tiktoken encoding: gpt2 (bundled, "
                        "alias r50k_base), cl100k_base, o200k_base, p50k_base (these need "
                        "tiktoken's cached files).", panel=INPUT)
    allow_special: bool = opt(False, "--allow-special", help="Encode special-token text in the "
                              "input (<|endoftext|>, [SEP], [CLS], <|im_start|>) as the special "
                              "token, with every tokenizer [default: off: such text is plain "
                              "text, as tiktoken reads it; transformers' tokenizers read it as "
                              "the special token].", panel=INPUT)
    seed: int = opt(123, help="Seed for the embeddings and the attention weights.",
                    panel=CHAPTER3)
    emb_dim: int = opt(8, help="Embedding size (d_in) for text input.", panel=CHAPTER3)
    context_length: int | None = opt(None, help="Rows of the positional embedding table "
                                     "[default: the number of tokens].", show_default=False,
                                     panel=CHAPTER3)
    d_out: int | None = opt(None, help="Output size of W_query/W_key/W_value [default: d_in].",
                            show_default=False, panel=CHAPTER3)
    # --num-heads was --heads, which ablate's L.H list means
    heads: int | None = opt(None, "--num-heads", help="Number of heads for multihead [default: "
                            "2].", show_default=False, panel=CHAPTER3, alias="--heads")
    dropout: float = opt(0.0, help="Dropout on the attention weights (causal, multihead), "
                         "applied as in training.", panel=CHAPTER3)
    qkv_bias: bool = opt(False, "--qkv-bias", help="Give W_query/W_key/W_value a bias.",
                         panel=CHAPTER3)
    device: Device = opt(Device.cpu, help="Where to compute: cpu, cuda, mps (Apple silicon), or "
                         "auto (cuda when there is one). With --model, each layer's weights move "
                         "to the device as they are used, one layer at a time.", panel=COMPUTE)
    model: str | None = opt(None, "--model", "-m", help=MODEL_HELP, show_default=False,
                            metavar="PATH|NAME", panel=MODEL)
    layer: int | None = opt(None, help="With --model: the layer to show, 0-based; negative "
                            "counts from the end [default: 0].", show_default=False, panel=MODEL)
    impl: Impl = opt(Impl.auto, help="naive: every N × N stage in memory; tiled: context, "
                     "log-sum-exp, entropy and top-k without the N × N matrix; auto: naive while "
                     "its stages fit 256 MiB.", panel=COMPUTE)
    # --top-keys was --top-k, which generate's sampling means
    top_k: int | None = opt(None, "--top-keys", min=0, help="Tiled path: the heaviest keys kept "
                            "for each query [default: 5].", show_default=False, panel=COMPUTE,
                            alias="--top-k")
    pool: Pool | None = opt(None, help="Tiled path: a heatmap block shows the max or the mean of "
                            "its weights [default: max].", show_default=False, panel=COMPUTE)
    full: bool = opt(False, "--full", help="Tiled path: put the whole N × N weights in the JSON "
                     "(refused when it would not fit in memory).", panel=COMPUTE)
    positions: bool = opt(True, "--positions/--no-positions", help="Add the positional embedding "
                          "to each token's embedding (text input); without it attention cannot "
                          "tell word order apart.", panel=CHAPTER3)
    measure: Measure = opt(Measure.weights, help="What the matrix shows: weights; norm: ‖α_ij · "
                           "W_O v_j‖ per head, rows renormalised (Kobayashi et al. 2020); rollout: "
                           "Ã_L ··· Ã_0 to the shown layer, each Ã = 0.5·I + 0.5·(heads' mean), "
                           "rows renormalised (Abnar & Zuidema 2020; --model, and --rows on the "
                           "tiled path).", panel=COMPUTE)
    predict: int | None = opt(None, "--predict", help="With --model: each position's top K next "
                              "tokens and their probabilities (the last block's output through "
                              "the final norm and the unembedding). explain adds the shown "
                              "layer's logit lens beside them; the tiled path predicts at the "
                              "--rows window only.", show_default=False, metavar="K",
                              panel=MODEL)

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
        """Heads of a chapter-3 variant: --num-heads, or the variant's default."""
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
        for given, option in ((req.top_k is not None, "--top-keys"),
                              (req.pool is not None, "--pool"), (req.full, "--full")):
            if given:
                raise AttnCliError(f"{option} applies to the tiled path, not with --impl naive")
    if not req.positions and req.inputs is not None:
        raise AttnCliError("--no-positions applies to text: --inputs vectors are used as given")
    if req.inputs is not None and req.context_length is not None:
        raise AttnCliError("--context-length applies to text input, not to --inputs vectors "
                           "(they carry no positional embedding)")
    if req.top_k is not None and req.top_k < 0:
        raise AttnCliError(f"--top-keys must be 0 or more (got {req.top_k})")
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
        raise AttnCliError(f"--num-heads applies to --variant multihead only (got variant "
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
