"""The plain result of one run and its JSON contract (to_dict); no tensors here. One Result
serves both paths: the naive path holds every weight (and the stages asked for), the tiled path
a window's weights plus per-row stats. Its config is a typed record, serialised once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attncli.core.pieces import Prediction, Summary, TokenPiece, Window
from attncli.core.variants import SAVED_TRAITS, TRAITS, Traits, Variant, model_traits

Matrix = list[list[float]]
Stack = list[list[list[float | None]]]

# Every stage a variant may have, in the order the computation runs.
STAGES = ("inputs", "queries", "keys", "values", "queries_norm", "keys_norm", "queries_rope",
          "keys_rope", "scores", "scaled", "capped", "masked", "softmax", "dropped", "weights",
          "heads_context", "context")  # *_norm, *_rope: models with RoPE (and q/k norms)


@dataclass(frozen=True)
class TokenInfo:
    """One token as shown: index, id (None for --inputs), readable text and exact bytes."""

    index: int
    id: int | None
    text: str
    bytes_hex: str | None = None

    @classmethod
    def of(cls, piece: TokenPiece) -> TokenInfo:
        """The record of one tokenised piece of text, with its exact bytes."""
        data = piece.data
        return cls(piece.index, piece.id, piece.label, None if data is None else data.hex())

    def to_dict(self) -> dict[str, Any]:
        """JSON form; "bytes" is absent for --inputs vectors, which have none."""
        return {"index": self.index, "id": self.id, "text": self.text,
                **({} if self.bytes_hex is None else {"bytes": self.bytes_hex})}


@dataclass(frozen=True)
class TextConfig:
    """How text became vectors (absent for --inputs)."""

    encoding: str | None  # None: the checkpoint's own tokenizer.json (see RunConfig.tokenizer)
    allow_special: bool
    emb_dim: int | None = None  # None with --model: the checkpoint's own embeddings
    context_length: int | None = None
    positions: bool | None = None  # chapter-3 text: the positional embedding added or not


@dataclass(frozen=True)
class RunConfig:
    """The settings that shaped a run's numbers, as the JSON "config" records them."""

    source: str  # text or inputs
    num_tokens: int
    d_in: int
    d_out: int
    heads: int
    impl: str  # naive or tiled
    version: str
    variant: str | None = None  # a chapter-3 variant; None with --model
    seed: int | None = None
    dropout: float | None = None
    qkv_bias: bool | None = None
    device: str | None = None
    model: str | None = None  # with --model: as given
    layer: int | None = None
    text: TextConfig | None = None
    top_k: int | None = None  # tiled path only
    pool: str | None = None  # tiled path only
    head: int | None = None  # with --head: the one head the result holds
    tokenizer: dict[str, Any] | None = None  # a checkpoint's tokenizer.json: what it added
    measure: str | None = None  # norm or rollout: what "weights" holds (None: the weights)

    def to_dict(self) -> dict[str, Any]:
        """The JSON "config" object."""
        out: dict[str, Any] = {}
        if self.model is not None:
            out |= {"model": self.model, "layer": self.layer}
        else:
            out["variant"] = self.variant
        if self.tokenizer is not None:
            out["tokenizer"] = self.tokenizer
        if self.text is not None:
            if self.text.encoding is not None:
                out["encoding"] = self.text.encoding
            out["allow_special"] = self.text.allow_special
            if self.model is None:
                out |= {"seed": self.seed, "emb_dim": self.text.emb_dim,
                        "context_length": self.text.context_length,
                        "positions": self.text.positions}
        elif self.model is None:
            out["seed"] = self.seed
        if self.model is None:
            out |= {"dropout": self.dropout, "qkv_bias": self.qkv_bias, "device": self.device}
        out |= {"source": self.source, "num_tokens": self.num_tokens, "d_in": self.d_in,
                "d_out": self.d_out, "heads": self.heads, "impl": self.impl}
        if self.impl == "tiled":
            out |= {"top_k": self.top_k, "pool": self.pool}
        if self.head is not None:
            out["head"] = self.head
        out |= {"measure": self.measure} if self.measure is not None else {}
        out["version"] = self.version
        return out


@dataclass(frozen=True)
class FamilyInfo:
    """A checkpoint's attention beyond chapter 3's: grouped kv heads, RoPE, sliding window."""

    architecture: str  # config.json's model_type
    kv_heads: int
    head_dim: int
    rope_theta: float
    rope_scaling: str  # default, linear, dynamic or llama3
    sliding_window: int | None  # the config's window (None: none)
    window: int | None = None  # the shown layer's own window (None: the full causal mask)
    nope: bool = False  # the shown layer has no positional encoding (SmolLM3's NoPE layers)


@dataclass(frozen=True)
class ModelInfo:
    """Where a checkpoint is and its shape: the JSON "model" object."""

    path: str
    layers: int
    heads: int
    d_model: int
    layer: int | None = None
    family: FamilyInfo | None = None  # grouped kv heads, RoPE, windows: where the model has them
    # How views describe the model (not in the JSON): its name, and what its attention reads.
    name: str = ""  # "GPT-2", or config.json's model_type
    norm: str = ""  # what normalised the residual stream its attention reads, e.g. "RMSNorm'd"
    reads: str = ""  # that input as a formula, after a space (" ln_1(h)"), or ""
    lead: str = "The checkpoint's own weights"  # how the description line begins
    bidirectional: bool = False  # an encoder's attention: no mask, every query sees every key

    @property
    def kv_heads(self) -> int:
        """Key/value heads: fewer than heads under grouped-query attention."""
        return self.heads if self.family is None else self.family.kv_heads

    @property
    def head_dim(self) -> int:
        """Each head's width."""
        return self.d_model // self.heads if self.family is None else self.family.head_dim

    def to_dict(self) -> dict[str, Any]:
        """The JSON "model" object."""
        f = self.family
        out: dict[str, Any] = {"path": self.path} | (
            {"architecture": f.architecture} if f is not None else {}) | (
            {"attention": "bidirectional"} if self.bidirectional else {})
        out |= {"layers": self.layers, "heads": self.heads}
        if f is not None:
            out |= {"kv_heads": f.kv_heads, "head_dim": f.head_dim}
        out["d_model"] = self.d_model
        if f is not None:
            out |= {"rope_theta": f.rope_theta, "rope_scaling": f.rope_scaling,
                    "sliding_window": f.sliding_window}
        if self.layer is not None:
            out |= {"layer": self.layer} | ({"window": f.window} if f is not None else {}) | (
                {"nope": True} if f is not None and f.nope else {})
        return out


@dataclass(frozen=True)
class QueryRow:
    """One query's exact weights over every key, per head (None for masked keys)."""

    index: int
    token: str
    weights: Any  # [heads][T] lists, or a (heads, T) numpy array with NaN where masked

    def to_dict(self) -> dict[str, Any]:
        """The JSON "query" object."""
        return {"index": self.index, "token": self.token, "weights": self.weights}


@dataclass(frozen=True)
class PooledMap:
    """One head's weights pooled into blocks of tokens, for the terminal (not in the JSON)."""

    head: int
    edges: list[int]  # block b covers tokens edges[b] .. edges[b+1]-1, on both axes
    values: list[list[float | None]]  # [query block][key block] max or mean; None: all masked
    counts: list[list[int]]  # unmasked cells per block, so a renderer can pool further


@dataclass(frozen=True)
class LongStats:
    """What the tiled path knows of every row without the N × N matrix."""

    stats: dict[str, Any]  # numpy: lse, entropy (heads, N); top_k: {index, weight} (heads, N, k)
    summary: list[Summary]  # per head
    maps: list[PooledMap] = field(default_factory=list)  # the heads shown, for the terminal
    band: Any = None  # the page's moving window: (heads, N, span) float32 numpy, each row's
    # exact weights on its 64 keys up to itself (causal) or 63 either side; NaN outside


@dataclass(frozen=True)
class Result:
    """Everything one run computed, as plain Python data: the one result contract."""

    variant: str  # a chapter-3 variant, or the checkpoint's family (gpt2)
    config: RunConfig
    tokens: list[TokenInfo]
    # Naive path: nested lists, weights [heads][T][T], context [T][d_out]. Tiled path: float32
    # numpy arrays (written fast by render/jsonout), weights the window (heads, b-a, d-c) with
    # NaN where masked (null in the JSON), context (T, d_out).
    weights: Any
    context: Any
    stages: dict[str, Any] = field(default_factory=dict)  # name → nested lists (naive path)
    present: tuple[str, ...] = ("weights", "context")  # every stage the run has, kept or not
    model: ModelInfo | None = None
    query: QueryRow | None = None
    window: Window | None = None
    long: LongStats | None = None  # the tiled path's per-row stats
    predictions: list[Prediction] | None = None  # --predict: per position
    norm: Any = None  # --measure norm: the raw ‖α_ij·W_O v_j‖, shaped as (renormalised) weights

    @property
    def num_heads(self) -> int:
        """How many heads the result holds (1 for single-head variants, or with --head)."""
        return len(self.weights)

    @property
    def labels(self) -> list[str]:
        """The token labels, in order."""
        return [t.text for t in self.tokens]

    @property
    def traits(self) -> Traits:
        """What the variant computes: a chapter-3 variant's, a checkpoint's, or saved weights'."""
        if self.model is not None:
            return model_traits(self.model.bidirectional)
        try:
            return TRAITS[Variant(self.variant)]
        except ValueError:
            return SAVED_TRAITS

    @property
    def key_window(self) -> int | None:
        """The shown layer's sliding window (query i sees keys i - window + 1 .. i), or None."""
        family = self.model.family if self.model is not None else None
        return None if family is None else family.window

    def head_number(self, position: int) -> int:
        """The run's number of the head held at position (--head keeps one head)."""
        return position if self.config.head is None else self.config.head

    def available_stages(self) -> list[str]:
        """The stages this run has, in computation order."""
        return list(self.present)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract, the same for every path and command."""
        out: dict[str, Any] = {"kind": "run", "variant": self.variant,
                               "config": self.config.to_dict(),
                               "tokens": [t.to_dict() for t in self.tokens]}
        if self.model is not None:
            out["model"] = self.model.to_dict()
        out |= {"weights": self.weights, "context": self.context}
        out |= {"norm": self.norm} if self.norm is not None else {}
        if self.stages:
            out["stages"] = self.stages
        if self.long is not None:
            out |= {"stats": self.long.stats, "summary": self.long.summary}
        if self.query is not None:
            out["query"] = self.query.to_dict()
        if self.window is not None:
            out["window"] = self.window
        if self.predictions is not None:
            out["predictions"] = self.predictions
        return out
