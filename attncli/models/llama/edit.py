"""The Llama block run with its heads' outputs edited: one edit of z before W_O, the rest of
the pass as it is (ablation and activation patching, as TransformerLens's hook_z); and run
with keys masked, several masks at once, from the first position a mask changes (occlusion)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from attncli.models.llama.block import attention_input, embed, finish_block, linear
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import grouped_attention
from attncli.models.llama.rope import LayerRopes
from attncli.models.sources.named import Named


def llama_edited(weights: Named, spec: LlamaSpec, token_ids: list[int], first: int,
                 stream: Tensor, edit: Callable[[int, Tensor], Tensor]) -> Tensor:
    """Blocks first..n_layer-1 from stream (B, T, d_model), B variants of the text at once,
    each block's z (B, heads, T, hd) passed through edit before o_proj; the streams leaving
    the last block. Gradients flow where the caller enables them (attribution patching)."""
    x = stream  # (B, T, d_model)
    ropes = LayerRopes(spec, len(token_ids))  # each layer's (T, rotary_dim) tables, or None
    for layer in range(first, spec.n_layer):
        attn_input = attention_input(weights, spec, layer, x)  # (B, T, d_model)
        attention = grouped_attention(weights, spec, layer, attn_input, ropes[layer])
        assert attention.heads_context is not None
        z = attention.heads_context.unflatten(-1, (spec.num_heads, spec.head_dim)) \
            .transpose(-3, -2)  # (B, heads, T, hd)
        edited = edit(layer, z)  # (B, heads, T, hd)
        context = attention.context  # (B, T, d_model)
        if edited is not z:  # o_proj again on the edited heads, side by side: (B, T, heads · hd)
            context = linear(weights, f"layers.{layer}.self_attn.o_proj",
                             edited.transpose(-3, -2).flatten(-2))  # (B, T, d_model)
        x = finish_block(weights, spec, layer, x, context)  # (B, T, d_model)
    return x


@torch.no_grad()
def llama_masked(weights: Named, spec: LlamaSpec, token_ids: list[int], start: int,
                 prefix: list[Tensor], visible: Tensor) -> Tensor:
    """B variants of the text at once, each with keys hidden by visible (B, T, T), True where a
    query may look, none of which hides a key from a query before start: so rows before start
    are the clean pass's, prefix[layer] (start, d_model) the stream entering each layer, and
    only rows start.. are run again (their attention reads the clean rows' keys and values).
    The streams leaving the last block at rows start..: (B, T - start, d_model)."""
    batch = visible.shape[0]
    x = embed(weights, spec, token_ids[start:]).expand(batch, -1, -1)  # (B, S, d_model)
    ropes = LayerRopes(spec, len(token_ids))  # each layer's (T, rotary_dim) tables, or None
    shown = visible[:, None]  # (B, 1, T, T): every head hides the same keys
    for layer in range(spec.n_layer):
        whole = torch.cat([prefix[layer][:start].expand(batch, -1, -1), x], dim=1)  # (B, T, d)
        attention = grouped_attention(weights, spec, layer,
                                      attention_input(weights, spec, layer, whole),
                                      ropes[layer], shown)  # context: (B, T, d_model)
        x = finish_block(weights, spec, layer, x, attention.context[:, start:])  # (B, S, d)
    return x
