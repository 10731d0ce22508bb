"""The Llama block run with its heads' outputs edited: one edit of z before W_O, the rest of
the pass as it is (ablation and activation patching, as TransformerLens's hook_z); and run
with keys masked, several masks at once, from the first position a mask changes (occlusion)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from attncli.models.llama.block import attention_input, block_norm, embed, finish_block, linear
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import (
    grouped_attention,
    project,
    scale_scores,
    soft_cap,
    window_mask,
)
from attncli.models.llama.rope import LayerRopes
from attncli.models.sources.named import Named
from attncli.models.unembed import Head, Table, need


def heads_output(weights: Named, spec: LlamaSpec, layer: int, x: Tensor,
                 rope: tuple[Tensor, Tensor] | None) -> Tensor:
    """Block layer's heads' outputs z = softmax(q·kᵀ/√d_k) · v of x (B, T, d_model), before W_O:
    (B, heads, T, hd); no stage kept (grouped_attention's numbers, without its copies)."""
    heads = project(weights, spec, layer, x, rope)
    kv, group = spec.kv_heads, spec.group_size
    # GQA: a key/value head's group of query heads side by side, so none is copied per head.
    queries = heads.queries_rope.unflatten(-3, (kv, group))  # (B, kv, group, T, hd)
    keys = heads.keys_rope.unsqueeze(-3)  # (B, kv, 1, T, hd)
    values = heads.values.unsqueeze(-3)  # (B, kv, 1, T, hd)
    scaled = scale_scores(spec, queries @ keys.transpose(-2, -1))  # (B, kv, group, T, T)
    capped = soft_cap(spec, scaled)
    mask = window_mask(x.shape[-2], spec.layer_windows[layer])  # (T, T) the future, the window
    attn_weights = torch.softmax((scaled if capped is None else capped).masked_fill(
        mask, -torch.inf), dim=-1)  # (B, kv, group, T, T)
    return (attn_weights @ values).flatten(-4, -3)  # (B, heads, T, hd)


def llama_edited(weights: Named, spec: LlamaSpec, token_ids: list[int], first: int,
                 stream: Tensor, edit: Callable[[int, Tensor], Tensor],
                 enter: Callable[[int, Tensor], Tensor] | None = None,
                 prefix: list[Tensor] | None = None) -> Tensor:
    """Blocks first..n_layer-1 from stream (B, S, d_model), B variants of the text's last S
    positions at once (enter(layer, x): x with the variants joining at block layer added),
    each block's z (B, heads, S, hd) passed through edit before o_proj; the streams leaving
    the last block. Where S < T the earlier positions are the clean pass's, prefix[layer]
    (T, d_model) the stream entering each block: their keys and values are attended to and
    nothing else of them is run. Gradients flow where the caller enables them (attribution
    patching). Variants that enter a block as one stream (stride 0) share its attention."""
    x = stream  # (B, S, d_model)
    start = len(token_ids) - x.shape[1]  # the positions before it: the clean pass's
    ropes = LayerRopes(spec, len(token_ids))  # each layer's (T, rotary_dim) tables, or None
    for layer in range(first, spec.n_layer):
        x = x if enter is None else enter(layer, x)  # (B, S, d_model)
        shared = x.shape[0] > 1 and x.stride(0) == 0  # the same stream B times: attend once
        whole = x[:1] if shared else x  # (b, S, d_model)
        if start:
            assert prefix is not None
            whole = torch.cat([prefix[layer][:start].expand(whole.shape[0], -1, -1), whole],
                              dim=1)  # (b, T, d_model)
        attn_input = attention_input(weights, spec, layer, whole)  # (b, T, d)
        z = heads_output(weights, spec, layer, attn_input, ropes[layer])  # (b, heads, T, hd)
        edited = edit(layer, z[:, :, start:].expand(x.shape[0], -1, -1, -1))  # (B, h, S, hd)
        # o_proj on the heads side by side: (B, S, heads · hd) → (B, S, d_model)
        context = linear(weights, f"layers.{layer}.self_attn.o_proj",
                         edited.transpose(-3, -2).flatten(-2))
        x = finish_block(weights, spec, layer, x, context)  # (B, S, d_model)
    return x


def llama_head(weights: Named, spec: LlamaSpec, table: Table) -> Head:
    """llama_logits in parts (the final norm, the held table, the soft cap), for reading
    logits a tile at a time."""
    need(weights, {"norm.weight": (spec.d_model,)}, "predictions")
    return Head(lambda hidden: block_norm(weights, spec, "norm", hidden), table,
                spec.final_softcap)


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
