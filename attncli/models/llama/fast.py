"""The Llama block for long inputs: layer inputs through PyTorch's fused attention, and a
layer as the module the tiled kernel takes."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.core.attention import Attention
from attncli.errors import AttnCliError
from attncli.models.family import Known
from attncli.models.llama.block import attention_input, embed, finish_block, linear
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import check_tokens, grouped_attention, window_mask
from attncli.models.llama.qkv import project
from attncli.models.llama.rope import LayerRopes
from attncli.models.sources.named import Named

Keep = Callable[[int, Tensor], None]  # (layer, the residual stream entering it)


def rotated(weights: Named, spec: LlamaSpec, layer: int, x: Tensor,
             rope: tuple[Tensor, Tensor] | None) -> tuple[Tensor, Tensor, Tensor]:
    """Queries (heads, T, hd), keys and values (kv_heads, T, hd) of block layer, after RoPE."""
    heads = project(weights, spec, layer, x, rope)
    return heads.queries_rope, heads.keys_rope, heads.values


def llama_layer_input(weights: Named, spec: LlamaSpec, token_ids: list[int], layer: int,
                      known: Known | None = None,
                      keep: Keep | None = None) -> tuple[Tensor, LayerRopes]:
    """Layer's input (T, d_model) and the RoPE tables, earlier blocks run without their weights.

    For long inputs: PyTorch's fused attention never builds the (T, T) weights it does not
    need to keep.
    """
    # Only the last is kept: each earlier input goes once the next block has read it.
    return deque(llama_layer_inputs(weights, spec, token_ids, layer, known, keep), maxlen=1)[0]


@torch.no_grad()
def llama_layer_inputs(weights: Named, spec: LlamaSpec, token_ids: list[int], layer: int,
                       known: Known | None = None,
                       keep: Keep | None = None) -> Iterator[tuple[Tensor, LayerRopes]]:
    """Layers known.first (or 0)..layer's inputs (T, d_model) and the RoPE tables: blocks
    without weights, a block whose output is known not run; keep(layer, stream) is handed
    each residual stream entering a layer."""
    check_tokens(spec, token_ids)
    first = 0 if known is None else known.first
    x = embed(weights, spec, token_ids) if known is None else known.stream  # (T, d_model)
    ropes = LayerRopes(spec, len(token_ids))
    for index in range(first, layer):
        if keep is not None:
            keep(index, x)
        attn_input = attention_input(weights, spec, index, x)  # (T, d_model)
        after = None if known is None else known.after(index)
        if after is None and spec.softcap is not None:  # no fused kernel soft-caps
            context = grouped_attention(weights, spec, index, attn_input, ropes[index]).context
        elif after is None:
            context = _fused_context(weights, spec, index, attn_input, ropes[index])
        x = finish_block(weights, spec, index, x, context) if after is None else after
        yield attn_input, ropes
    if keep is not None:
        keep(layer, x)
    yield attention_input(weights, spec, layer, x), ropes


def _fused_context(weights: Named, spec: LlamaSpec, layer: int, x: Tensor,
                   rope: tuple[Tensor, Tensor] | None) -> Tensor:
    """Block layer's attention output (T, d_model) through PyTorch's fused attention."""
    queries, keys, values = rotated(weights, spec, layer, x, rope)
    group, num_tokens = spec.group_size, x.shape[0]
    window = spec.layer_windows[layer]
    mask = None if window is None else ~window_mask(num_tokens, window)  # True: seen
    # A batch of one: with 3-D inputs CPU PyTorch takes its math path, which builds the
    # (heads, T, T) weights (5.5 GB at 8,000 tokens); 4-D ones take the flash kernel.
    heads_context = F.scaled_dot_product_attention(
        queries[None], keys.repeat_interleave(group, 0)[None],
        values.repeat_interleave(group, 0)[None],
        attn_mask=mask, is_causal=mask is None, scale=spec.query_scale)[0]  # (heads, T, hd)
    heads_context = heads_context.transpose(0, 1).reshape(num_tokens, -1)  # (T, h·hd)
    return linear(weights, f"layers.{layer}.self_attn.o_proj", heads_context)  # (T, d_model)


class RotaryProjection(Attention):
    """One Llama layer as the tiled path takes a module: its heads' q, k, v, and o_proj.

    Its queries and keys come out already rotated, and the keys and values of each kv head
    repeated for every query head of its group, so the kernel runs plain multi-head attention.
    """

    def __init__(self, weights: Named, spec: LlamaSpec, layer: int,
                 rope: tuple[Tensor, Tensor] | None) -> None:
        super().__init__()
        if spec.tiled_refusal:
            raise AttnCliError(f"the tiled path cannot run this checkpoint: {spec.tiled_refusal}")
        self.weights, self.spec, self.layer, self.rope = weights, spec, layer, rope
        self.num_heads, self.head_dim = spec.num_heads, spec.head_dim
        self.d_out = spec.d_model

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """RoPE'd queries and keys, and values, each (T, heads · head_dim). The kernel divides
        by √head_dim; a family with its own scale (Gemma) has its queries rescaled to match."""
        queries, keys, values = rotated(self.weights, self.spec, self.layer, x, self.rope)
        if self.spec.query_scale is not None:
            queries = queries * (self.spec.query_scale * math.sqrt(self.head_dim))  # (h, T, hd)
        group = self.spec.group_size
        keys, values = keys.repeat_interleave(group, 0), values.repeat_interleave(group, 0)
        return tuple(t.transpose(0, 1).reshape(x.shape[0], -1)  # type: ignore[return-value]
                     for t in (queries, keys, values))

    def split_heads(self, t: Tensor) -> Tensor:
        """(T, heads · head_dim) → (heads, T, head_dim)."""
        return t.view(t.shape[0], self.num_heads, self.head_dim).transpose(0, 1)

    def out_proj(self, heads_context: Tensor) -> Tensor:
        """o_proj: (T, heads · head_dim) → (T, d_model)."""
        return linear(self.weights, f"layers.{self.layer}.self_attn.o_proj", heads_context)

    def heads_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        queries, keys, values = self.project(x)  # each (T, heads · head_dim)
        return self.split_heads(queries), self.split_heads(keys), self.split_heads(values)

    def combine(self, heads_context: Tensor) -> Tensor:
        num_tokens = heads_context.shape[1]
        concat = heads_context.transpose(0, 1).reshape(num_tokens, -1)  # (T, heads · head_dim)
        return self.out_proj(concat)  # (T, d_model)
