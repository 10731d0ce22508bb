"""Model families: one protocol, and one registry keyed by config.json's model_type.

The registry is the only place that asks "which family is this?": everything above it runs a
Model (its spec, tokens, attention, decode step) without knowing its name. A new family is one
folder holding its Family object, plus one line in REGISTRY (its GGUF files: a gguf.py there,
plus one line in attncli/models/__init__.py, whose docstring says how).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from attncli.activity import doing
from attncli.errors import AttnCliError
from attncli.models.checks.refused import REFUSED, softmax_layers
from attncli.models.checks.values import layer_index, shown
from attncli.models.sources.base import WeightSource, config_named

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from torch import Tensor

    from attncli.core.attention import Attention, AttentionOutput
    from attncli.core.request import Request
    from attncli.core.result import ModelInfo, TokenInfo
    from attncli.models.decoding import DecodeStep, Shape
    from attncli.models.unembed import Head
    LayerMap = Callable[[int, Tensor], Tensor]  # (layer, a tensor of its pass) → the one used

# model_type → (module, attribute) of its Family, imported on first use.
REGISTRY: dict[str, tuple[str, str]] = {
    "gpt2": ("attncli.models.gpt2.family", "GPT2"),
    "llama": ("attncli.models.llama.family", "LLAMA"),
    "mistral": ("attncli.models.llama.family", "MISTRAL"),
    "qwen2": ("attncli.models.llama.family", "QWEN2"),
    "qwen3": ("attncli.models.llama.family", "QWEN3"),
    "gemma2": ("attncli.models.gemma.family", "GEMMA2"),
    "gemma3_text": ("attncli.models.gemma.family", "GEMMA3"),
    "gemma3": ("attncli.models.gemma.family", "GEMMA3_MULTIMODAL"),  # its language model
    "phi3": ("attncli.models.phi3.family", "PHI3"),
    "gpt_neox": ("attncli.models.neox.family", "NEOX"),
    "olmo2": ("attncli.models.olmo2.family", "OLMO2"),
    "smollm3": ("attncli.models.smollm3.family", "SMOLLM3"),
    "bert": ("attncli.models.bert.family", "BERT"),
    "roberta": ("attncli.models.bert.family", "ROBERTA"),
}
DEFAULT = "gpt2"  # a checkpoint without config.json, or without model_type, is read as GPT-2


@dataclass(frozen=True)
class FamilyTraits:
    """What a family is, as data: what runs on it and how results describe it."""

    title: str  # how messages name the family: "GPT-2", "Llama-family"
    variant: str  # a Result's variant for every checkpoint of the family
    supports_tiled: bool  # `run` may take the tiled path on long inputs
    max_tokens: int | None  # the most tokens any checkpoint of it reads; None: no fixed limit
    kv_heads: bool  # results name each query head's kv head (grouped-query attention)
    tokenizer_file: bool  # tokenises with the checkpoint's tokenizer.json (else tiktoken GPT-2)
    norm: str  # what normalises the residual stream a layer's attention reads, e.g. "RMSNorm'd"
    reads: str = ""  # that input written as a formula, after a space, e.g. " ln_1(h)"
    bidirectional: bool = False  # an encoder: no mask, every query sees every key; no KV cache


@dataclass(frozen=True)
class ModelSpec:
    """The sizes every family has, as `run`, `heads` and `kvcache` need them."""

    architecture: str  # config.json's model_type
    n_layer: int
    num_heads: int  # query heads
    kv_heads: int  # key/value heads (num_heads without GQA)
    head_dim: int
    d_model: int
    windows: tuple[int | None, ...]  # per layer: its sliding window, None = full causal
    tiled_refusal: str = ""  # why the tiled kernel cannot run it exactly ("" when it can)
    positions: int | None = None  # the positions it was made for (n_positions,
    # max_position_embeddings); RoPE may run past them, but `generate` keeps within them

    @property
    def d_out(self) -> int:
        """The width attention writes before its output projection: heads · head_dim."""
        return self.num_heads * self.head_dim

    def kv_group(self, head: int) -> int:
        """The key/value head query head reads (GQA shares one among several heads)."""
        return head // (self.num_heads // self.kv_heads)

    def layer_index(self, layer: int) -> int:
        """The 0-based index of layer, which may count from the end (-1 is the last)."""
        return layer_index(layer, self.n_layer)


@dataclass(frozen=True)
class Tokens:
    """A text as a model reads it: records, ids, and what made them."""

    tokens: list[TokenInfo]
    ids: list[int]
    encoding: str | None  # a tiktoken encoding's name, or None for the checkpoint's own
    tokenizer: dict[str, Any] | None  # the checkpoint's tokenizer: its file and what it added


@dataclass
class LayerAttention:
    """One layer's attention, and what it read."""

    layer: int  # 0-based
    inputs: Tensor  # (T, d_model) the normalised residual stream
    output: AttentionOutput  # weights (heads, T, T), context (T, d_model), every stage


@dataclass(frozen=True)
class Known:
    """Residual streams an earlier pass of the same text kept (the hidden-state cache).

    A pass given them starts at layer first from stream, and takes a block's output from
    later (the stream entering the next layer) instead of running its MLP where later has it.
    """

    first: int
    stream: Tensor  # (T, d_model) float32 entering layer first, exactly as a pass made it
    later: Callable[[int], Tensor | None]  # layer → the stream entering it, or None

    def after(self, layer: int) -> Tensor | None:
        """The stream leaving block layer (entering layer + 1), when known."""
        return self.later(layer + 1)


@dataclass
class LayerTrace:
    """One block of a forward pass, as the views beyond raw weights need it."""

    layer: int  # 0-based
    residual: Tensor  # (T, d_model) the residual stream entering the block
    weights: Tensor  # (heads, T, T) its attention weights
    values: Tensor  # (heads, T, head_dim) each query head's values (a kv head repeated by GQA)
    # (d_model, heads · head_dim) W_O: head h writes through columns h·hd..; or what reads it,
    # where the block multiplied on quantized blocks and only a measure needs it as float32.
    out_proj: Tensor | Callable[[], Tensor]
    output: Tensor  # (T, d_model) the residual stream leaving the block

    def w_o(self) -> Tensor:
        """W_O (d_model, heads · head_dim) as float32, read now where it was not."""
        return self.out_proj() if callable(self.out_proj) else self.out_proj  # a tensor is not


class Model(Protocol):
    """One checked checkpoint of a family, ready to run."""

    traits: FamilyTraits
    spec: ModelSpec

    def tokens(self, req: Request) -> Tokens: ...
    # The weight source whose own vocabulary tokenizes this model's text; None: tiktoken's.
    def vocabulary(self) -> WeightSource | None: ...
    # One line where a file the weights are read from changed since it was opened.
    def unchanged(self) -> None: ...
    def check_tokens(self, token_ids: list[int]) -> None: ...
    def attention(self, token_ids: list[int], layer: int) -> LayerAttention: ...
    def all_layers(self, token_ids: list[int]) -> Tensor: ...  # (layers, heads, T, T)
    # Blocks 0..last_layer one by one; visible (T, T), True where a query may look, narrows
    # the causal mask (an evicted key/value cache).
    def trace(self, token_ids: list[int], last_layer: int,
              visible: Tensor | None = None) -> Iterator[LayerTrace]: ...
    # The final norm and the unembedding (tied or not): logits (T, vocab) of a residual stream.
    def logits(self, hidden: Tensor) -> Tensor: ...
    # The tiled path: layer's input (T, d_model), and a module giving its heads' q, k, v.
    def layer_input(self, token_ids: list[int], layer: int) -> tuple[Tensor, Attention]: ...
    def info(self, layer: int | None = None) -> ModelInfo: ...
    def decode_shape(self) -> Shape: ...
    # held=False: each step rereads each layer's weights from the source (one layer held).
    def decoder(self, layer: int, num_tokens: int, held: bool = True) -> DecodeStep: ...


@runtime_checkable
class ManyTexts(Protocol):
    """A model that runs several texts together, layer by layer: each layer's weights read
    once for all of them, each text's pass otherwise its own (the same traces as trace)."""

    def trace_texts(self, texts: list[list[int]],
                    last_layer: int) -> Iterator[list[LayerTrace]]: ...


@runtime_checkable
class Positionless(Protocol):
    """A model whose positions are added to its inputs and can be left out (an encoder's
    position embeddings), for `permute --model`."""

    def attention_positionless(self, token_ids: list[int], layer: int) -> LayerAttention: ...


@runtime_checkable
class LayerInputs(Protocol):
    """A model with a tiled path whose rollout walks back through every layer (Llama family)."""

    # Layers 0..last_layer: each one's input, cut to its first `prefix` tokens (the last
    # layer's whole), and a module giving its heads' q, k, v as the tiled path takes them.
    def layer_inputs(self, token_ids: list[int], last_layer: int,
                     prefix: int) -> list[tuple[Tensor, Attention]]: ...


@runtime_checkable
class Resumable(Protocol):
    """A model whose passes can start from known residual streams (the hidden-state cache)."""

    # Blocks first..layer: that layer's attention, and the streams entering layers first..layer.
    def attention_from(self, token_ids: list[int], layer: int,
                       known: Known | None) -> tuple[LayerAttention, list[Tensor]]: ...
    # Blocks known.first (or 0)..last_layer whole, each block's output known or computed.
    def trace_from(self, token_ids: list[int], last_layer: int,
                   known: Known | None) -> Iterator[LayerTrace]: ...


@runtime_checkable
class Editable(Protocol):
    """Heads' outputs edited: edited() runs blocks first..last (None: the top) from B variants'
    streams (B, S, d) of the last S positions (prefix: per layer the clean (T, d) of the rest),
    enter adding variants at a layer, edit mapping z (B, heads, S, hd) before W_O; logits held."""

    def edited(self, token_ids: list[int], first: int, stream: Tensor, edit: LayerMap,
               enter: LayerMap | None = None, prefix: list[Tensor] | None = None,
               last: int | None = None) -> Tensor: ...
    def head(self) -> Head: ...  # the final norm and held unembedding, read a tile at a time
    def held_logits(self, hidden: Tensor) -> Tensor: ...


@runtime_checkable
class FusedResumable(Protocol):
    """A model whose tiled path's layer input can start from known fused-path streams."""

    # layer_input from known.first (or 0); keep(layer, stream) gets each stream entering a layer.
    def fused_input_from(self, token_ids: list[int], layer: int, known: Known | None,
                         keep: Callable[[int, Tensor], None]) -> tuple[Tensor, Attention]: ...


class Family(Protocol):
    """An architecture: how it reads a weight source into a Model."""

    traits: FamilyTraits

    def load(self, source: WeightSource, model: str, heads: int | None) -> Model: ...
    def shape(self, config: dict[str, Any], folder: Path) -> tuple[int, int, int]: ...


def family_named(name: str) -> Family:
    """The registered family of model_type name (KeyError when there is none)."""
    module, attribute = REGISTRY[name]
    family: Family = getattr(importlib.import_module(module), attribute)
    return family


def readable() -> str:
    """The families attncli reads, for messages: "GPT-2 (model_type 'gpt2') and ..."."""
    groups: dict[str, list[str]] = {}
    for name in REGISTRY:
        groups.setdefault(family_named(name).traits.title, []).append(name)
    parts = [f"{title} (model_type {names[0]!r})" if len(names) == 1
             else f"{title} ({', '.join(names)})" for title, names in groups.items()]
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def family_of_source(source: WeightSource, config_name: object) -> Family:
    """The family config.json's model_type names; one that attncli does not read, refused."""
    config = source.config()
    model_type = config.get("model_type", DEFAULT)
    if isinstance(model_type, str) and model_type in REGISTRY:
        return family_named(model_type)
    if isinstance(model_type, str) and model_type in REFUSED:
        raise AttnCliError(f"{config_name} describes a {model_type!r} model, which "
                           f"{REFUSED[model_type]}{softmax_layers(config)}")
    kind = (f"describes a {shown(model_type)} model" if isinstance(model_type, str)
            else f"gives model_type as {shown(model_type)}")
    raise AttnCliError(f"{config_name} {kind}; attncli reads {readable()} checkpoints")


def open_family(model: str) -> tuple[WeightSource, Family]:
    """--model (a path or a cached hub name) opened by its format, and the family it names."""
    from attncli.models.memory import check_model_fits
    from attncli.models.sources.formats import open_source
    from attncli.models.stores.locate import is_dir, resolve_path

    doing(f"opening {model}")
    path = resolve_path(model)
    source = open_source(path)
    with config_named(source):
        family = family_of_source(source, (path if is_dir(path) else path.parent) / "config.json")
        check_model_fits(source, model)  # one layer at a time must fit, before any is read
    return source, family


def open_model(model: str, heads: int | None = None) -> Model:
    """--model read by its family: a checked checkpoint, ready to run."""
    source, family = open_family(model)
    with config_named(source):
        return family.load(source, model, heads)
