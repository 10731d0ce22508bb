"""The Llama family (llama, mistral, qwen2, qwen3): the checkpoint's own tokenizer.json,
RMSNorm, RoPE, grouped kv heads, and for some layers a sliding window."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attncli.core.attention import Attention
from attncli.core.request import Request
from attncli.core.result import FamilyInfo, ModelInfo
from attncli.errors import AttnCliError
from attncli.models.decoding import DecodeStep, Shape
from attncli.models.family import (
    Family,
    FamilyTraits,
    Known,
    LayerAttention,
    LayerTrace,
    ModelSpec,
    Tokens,
)
from attncli.models.llama.checkpoint import (
    LLAMA_LAYOUT,
    Layout,
    LlamaCheckpoint,
    check_layer_claim,
    llama_checkpoint,
)
from attncli.models.llama.config import LlamaArch, llama_spec
from attncli.models.llama.decode import LlamaDecoder, llama_shape
from attncli.models.llama.edit import llama_edited, llama_head, llama_masked
from attncli.models.llama.fast import RotaryProjection, llama_layer_input, llama_layer_inputs
from attncli.models.llama.model import (
    check_tokens,
    llama_all_layers,
    llama_attention,
    llama_logits,
    llama_trace,
    llama_trace_texts,
)
from attncli.models.memory import held_bytes
from attncli.models.own_tokens import source_tokens
from attncli.models.sources.base import WeightSource
from attncli.models.unembed import Head, Table, held_unembedding

TRAITS = FamilyTraits(title="Llama-family", variant="llama", supports_tiled=True,
                      max_tokens=None, kv_heads=True, tokenizer_file=True, norm="RMSNorm'd")


class LlamaModel:
    """One checked checkpoint of a family on the Llama block, ready to run."""

    def __init__(self, ckpt: LlamaCheckpoint, source: WeightSource,
                 traits: FamilyTraits = TRAITS) -> None:
        s = ckpt.spec
        self.ckpt, self.source, self.traits = ckpt, source, traits
        self._table: Table | None = None  # the unembedding held by held_logits
        self.spec = ModelSpec(architecture=s.architecture, n_layer=s.n_layer,
                              num_heads=s.num_heads, kv_heads=s.kv_heads, head_dim=s.head_dim,
                              d_model=s.d_model, windows=s.layer_windows,
                              tiled_refusal=s.tiled_refusal, positions=s.max_positions)

    def vocabulary(self) -> WeightSource:
        """The source whose tokenizer this checkpoint's texts go through."""
        return self.source

    def unchanged(self) -> None:
        """One line where a file of the checkpoint changed since it was read."""
        self.source.unchanged()

    def tokens(self, req: Request) -> Tokens:
        """The checkpoint's tokenizer.json, and what its post-processor added (BOS, EOS)."""
        if req.heads is not None and req.heads != self.spec.num_heads:
            raise AttnCliError(f"heads={req.heads} disagrees with num_attention_heads="
                               f"{self.spec.num_heads} in config.json")
        return source_tokens(self.source, req)

    def check_tokens(self, token_ids: list[int]) -> None:
        """Empty input, or an id outside the vocabulary, refused."""
        check_tokens(self.ckpt.spec, token_ids)

    def attention(self, token_ids: list[int], layer: int) -> LayerAttention:
        """Blocks 0..layer run; that layer's attention with every stage."""
        shown = llama_attention(self.ckpt.weights, self.ckpt.spec, token_ids, layer)
        return LayerAttention(shown.layer, shown.inputs, shown.output)

    def attention_from(self, token_ids: list[int], layer: int,
                       known: Known | None) -> tuple[LayerAttention, list[Tensor]]:
        """Blocks known.first..layer run from a known stream; that layer's attention and the
        streams entering each block run."""
        shown = llama_attention(self.ckpt.weights, self.ckpt.spec, token_ids, layer, known)
        return LayerAttention(shown.layer, shown.inputs, shown.output), shown.hidden_states

    def trace_from(self, token_ids: list[int], last_layer: int,
                   known: Known | None) -> Iterator[LayerTrace]:
        """Blocks known.first..last_layer whole, known outputs taken as they are."""
        return llama_trace(self.ckpt.weights, self.ckpt.spec, token_ids, last_layer, None, known)

    def edited(self, token_ids: list[int], first: int, stream: Tensor,
               edit: Callable[[int, Tensor], Tensor],
               enter: Callable[[int, Tensor], Tensor] | None = None,
               prefix: list[Tensor] | None = None, last: int | None = None) -> Tensor:
        """Blocks first..last (None: every block from first) from stream (variants joining
        through enter; the last positions, the earlier ones prefix's) with each block's heads'
        outputs through edit."""
        return llama_edited(self.ckpt.weights, self.ckpt.spec, token_ids, first, stream, edit,
                            enter, prefix, last)

    def masked_from(self, token_ids: list[int], prefix: list[Tensor], hidden: list[list[int]],
                    rows: list[int]) -> Tensor:
        """Variants of the text, each with hidden[b]'s keys hidden, each run from its first:
        the last block's streams at rows, (B, len(rows), d_model)."""
        return llama_masked(self.ckpt.weights, self.ckpt.spec, token_ids, prefix, hidden, rows)

    def all_layers(self, token_ids: list[int]) -> Tensor:
        """Every query head's weights, (layers, heads, T, T)."""
        return llama_all_layers(self.ckpt.weights, self.ckpt.spec, token_ids)

    def trace(self, token_ids: list[int], last_layer: int,
              visible: Tensor | None = None) -> Iterator[LayerTrace]:
        """Blocks 0..last_layer one by one, whole."""
        return llama_trace(self.ckpt.weights, self.ckpt.spec, token_ids, last_layer, visible)

    def trace_texts(self, texts: list[list[int]], last_layer: int) -> Iterator[list[LayerTrace]]:
        """trace of each of texts, run together layer by layer (each layer read once)."""
        return llama_trace_texts(self.ckpt.weights, self.ckpt.spec, texts, last_layer)

    def logits(self, hidden: Tensor) -> Tensor:
        """The final RMSNorm, then lm_head or the tied embedding: (T, vocab)."""
        return llama_logits(self.ckpt.weights, self.ckpt.spec, hidden)

    def head(self) -> Head:
        """The final norm and the held unembedding, for reading logits a tile at a time."""
        return llama_head(self.ckpt.weights, self.ckpt.spec, self._held())

    def held_logits(self, hidden: Tensor) -> Tensor:
        """logits, the whole unembedding read at the first call and kept."""
        return llama_logits(self.ckpt.weights, self.ckpt.spec, hidden, self._held())

    def _held(self) -> Table:
        """The whole unembedding, read at the first call and kept."""
        spec = self.ckpt.spec
        if self._table is None:
            self._table = held_unembedding(self.ckpt.weights, "embed_tokens.weight",
                                           spec.vocab_size, spec.d_model, spec.head_name)
        return self._table

    def layer_input(self, token_ids: list[int], layer: int) -> tuple[Tensor, Attention]:
        """Layer's input (T, d_model), earlier layers through fused attention, and the layer
        as a module handing the kernel rotated, group-repeated heads."""
        weights, spec = self.ckpt.weights, self.ckpt.spec
        x, ropes = llama_layer_input(weights, spec, token_ids, layer)  # x: (T, d_model)
        return x, RotaryProjection(weights, spec, layer, ropes[layer])

    def fused_input_from(self, token_ids: list[int], layer: int, known: Known | None,
                         keep: Callable[[int, Tensor], None]) -> tuple[Tensor, Attention]:
        """layer_input from a stream the fused path kept; keep is handed each stream made."""
        weights, spec = self.ckpt.weights, self.ckpt.spec
        x, ropes = llama_layer_input(weights, spec, token_ids, layer, known, keep)
        return x, RotaryProjection(weights, spec, layer, ropes[layer])

    def layer_inputs(self, token_ids: list[int], last_layer: int,
                     prefix: int) -> list[tuple[Tensor, Attention]]:
        """Layers 0..last_layer's inputs, the earlier ones cut to their first prefix tokens,
        each with its layer as a module handing out rotated, group-repeated heads (the tiled
        rollout): one pass through the blocks."""
        weights, spec = self.ckpt.weights, self.ckpt.spec
        out: list[tuple[Tensor, Attention]] = []
        # One allocation for every earlier layer's input: copies made one by one between the
        # blocks' temporaries fragment the heap (SmolLM2 at 8,000 tokens: 38 MB a layer, not 18).
        store = torch.empty(last_layer, min(prefix, len(token_ids)),
                            spec.d_model)  # (L, b, d_model)
        for layer, (x, ropes) in enumerate(
                llama_layer_inputs(weights, spec, token_ids, last_layer)):
            rope = ropes[layer]
            if layer < last_layer:  # x: (T, d_model) → (b, d_model), kept in the store
                store[layer].copy_(x[:prefix])  # (b, d_model)
                x = store[layer]
                rope = None if rope is None else (rope[0][:prefix], rope[1][:prefix])
            out.append((x, RotaryProjection(weights, spec, layer, rope)))
        return out

    def info(self, layer: int | None = None) -> ModelInfo:
        """The JSON "model" object: where the checkpoint is, its shape and its attention."""
        spec = self.ckpt.spec
        # The layer's own RoPE where layers differ (Gemma 3's local and global bases).
        rope = None if layer is None else spec.rope_of(layer)
        theta, scaling = (spec.rope_theta, spec.rope_scaling) if rope is None else (
            rope.theta, rope.scaling)
        family = FamilyInfo(
            architecture=spec.architecture, kv_heads=spec.kv_heads, head_dim=spec.head_dim,
            rope_theta=theta, rope_scaling=scaling.get("rope_type", "default"),
            sliding_window=spec.sliding_window,
            window=None if layer is None else spec.layer_windows[layer],
            nope=layer is not None and spec.rope_of(layer) is None)
        return ModelInfo(str(spec.directory), spec.n_layer, spec.num_heads, spec.d_model, layer,
                         family, name=spec.architecture, norm=self.traits.norm,
                         reads=self.traits.reads)

    def decode_shape(self) -> Shape:
        """The multiply-adds of one token through every layer, and the bytes held."""
        return replace(llama_shape(self.ckpt.spec), held_bytes=held_bytes(self.source) or 0)

    def decoder(self, layer: int, num_tokens: int, held: bool = True) -> DecodeStep:
        """Token-by-token decoding of up to num_tokens tokens, showing layer; held: every
        layer's weights kept, else reread each step."""
        return LlamaDecoder(self.ckpt.weights, self.ckpt.spec, num_tokens, layer, held)


class LlamaFamily:
    """One architecture on the Llama block: arch says how its maths differs from Llama's,
    layout where its checkpoint keeps each tensor, traits how results describe it."""

    def __init__(self, arch: LlamaArch, traits: FamilyTraits = TRAITS,
                 layout: Layout = LLAMA_LAYOUT) -> None:
        self.arch, self.traits, self.layout = arch, traits, layout

    def load(self, source: WeightSource, model: str, heads: int | None) -> LlamaModel:
        """The source checked as its config.json's model (heads is checked with the text)."""
        return LlamaModel(llama_checkpoint(source, model, self.arch, self.layout), source,
                          self.traits)

    def shape(self, config: dict[str, Any], folder: Path) -> tuple[int, int, int]:
        """Layers, heads and kv heads from config.json alone (the `models` table)."""
        check_layer_claim(config, None, folder)
        spec = llama_spec(folder, config, self.arch)
        return spec.n_layer, spec.num_heads, spec.kv_heads


LLAMA: Family = LlamaFamily(LlamaArch(windows=False, window_switch=False, qk_norm=False))
MISTRAL = LlamaFamily(LlamaArch(windows=True, window_switch=False, qk_norm=False))
QWEN2 = LlamaFamily(LlamaArch(windows=True, window_switch=True, qk_norm=False))
QWEN3 = LlamaFamily(LlamaArch(windows=True, window_switch=True, qk_norm=True))


def resolve_llama(model: str) -> LlamaCheckpoint:
    """A hub name or a folder as a checked Llama-family checkpoint (headers only are read)."""
    from attncli.models.family import open_model

    loaded = open_model(model)
    if not isinstance(loaded, LlamaModel):
        raise AttnCliError(f"{model}: a Llama-family model is a folder with config.json")
    return loaded.ckpt
