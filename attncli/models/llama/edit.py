"""The Llama block run with its heads' outputs edited: one edit of z before W_O, the rest of
the pass as it is (ablation and activation patching, as TransformerLens's hook_z)."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from attncli.models.llama.block import attention_input, finish_block, linear
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import grouped_attention
from attncli.models.llama.rope import LayerRopes
from attncli.models.sources.named import Named


def llama_edited(weights: Named, spec: LlamaSpec, token_ids: list[int], first: int,
                 stream: Tensor, edit: Callable[[int, Tensor], Tensor]) -> Tensor:
    """Blocks first..n_layer-1 from stream (T, d_model), each block's z (heads, T, hd) passed
    through edit before o_proj; the stream leaving the last block. Gradients flow where the
    caller enables them (attribution patching)."""
    num_tokens, x = len(token_ids), stream  # x: (T, d_model)
    ropes = LayerRopes(spec, num_tokens)  # each layer's (T, rotary_dim) tables, or None
    for layer in range(first, spec.n_layer):
        attn_input = attention_input(weights, spec, layer, x)  # (T, d_model)
        attention = grouped_attention(weights, spec, layer, attn_input, ropes[layer])
        assert attention.heads_context is not None
        z = attention.heads_context.view(num_tokens, spec.num_heads, spec.head_dim) \
            .transpose(0, 1)  # (heads, T, hd)
        edited = edit(layer, z)  # (heads, T, hd)
        context = attention.context  # (T, d_model)
        if edited is not z:  # o_proj again on the edited heads, side by side: (T, heads · hd)
            context = linear(weights, f"layers.{layer}.self_attn.o_proj",
                             edited.transpose(0, 1).reshape(num_tokens, -1))  # (T, d_model)
        x = finish_block(weights, spec, layer, x, context)  # (T, d_model)
    return x
