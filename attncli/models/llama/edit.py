"""The Llama block run with its heads' outputs edited: one edit of z before W_O, the rest of
the pass as it is (ablation and activation patching, as TransformerLens's hook_z); and run
with keys masked, several masks at once, from the first position a mask changes (occlusion)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from attncli.models.llama.block import attention_input, block_norm, embed, finish_block, linear
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import scale_scores, soft_cap, window_mask
from attncli.models.llama.qkv import Heads, project
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
                 prefix: list[Tensor] | None = None, last: int | None = None) -> Tensor:
    """Blocks first..last (None: n_layer-1) from stream (B, S, d_model), B variants of the
    text's last S positions at once (enter(layer, x): x with the variants joining at block
    layer added), each block's z (B, heads, S, hd) passed through edit before o_proj; the
    streams leaving the last block run. Where S < T the earlier positions are the clean
    pass's, prefix[layer] (T, d_model) the stream entering each block: their keys and values
    are attended to and nothing else of them is run. Gradients flow where the caller enables
    them (attribution patching). Variants that enter a block as one stream (stride 0) share
    its attention."""
    x = stream  # (B, S, d_model)
    start = len(token_ids) - x.shape[1]  # the positions before it: the clean pass's
    ropes = LayerRopes(spec, len(token_ids))  # each layer's (T, rotary_dim) tables, or None
    for layer in range(first, spec.n_layer if last is None else last + 1):
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
def llama_masked(weights: Named, spec: LlamaSpec, token_ids: list[int], prefix: list[Tensor],
                 hidden: list[list[int]], rows: list[int]) -> Tensor:
    """B variants of the text at once, variant b with the keys of hidden[b] hidden from every
    query but their own. A mask hides nothing from a query before its first hidden key, so
    variant b runs only rows start_b = min(hidden[b]).. (prefix[layer] (T, d_model) is the clean
    stream entering each layer; its keys and values stand for the rows before start_b). The
    variants' rows go through each linear as one flat (R, d_model) product, R = Σ T - start_b;
    attention is each variant's own, no stage kept. The streams leaving the last block at
    positions rows (each at or after every start): (B, len(rows), d_model)."""
    n = len(token_ids)
    starts = [min(span) for span in hidden]
    positions = torch.cat([torch.arange(start, n) for start in starts])  # (R,)
    x = embed(weights, spec, token_ids)[positions]  # (R, d_model)
    ropes = LayerRopes(spec, n)  # each layer's (T, rotary_dim) tables, or None
    for layer in range(spec.n_layer):
        rope = ropes[layer]
        clean = project(weights, spec, layer,
                        attention_input(weights, spec, layer, prefix[layer]), rope)
        own = project(weights, spec, layer, attention_input(weights, spec, layer, x),
                      None if rope is None else (rope[0][positions], rope[1][positions]))
        mask = window_mask(n, spec.layer_windows[layer])  # (T, T) the future, the window
        z = torch.cat([_variant_heads(spec, clean, own, mask, start, span, offset)
                       for start, span, offset in zip(starts, hidden, _offsets(starts, n),
                                                      strict=True)])  # (R, heads · hd)
        context = linear(weights, f"layers.{layer}.self_attn.o_proj", z)  # (R, d_model)
        x = finish_block(weights, spec, layer, x, context)  # (R, d_model)
    at = torch.tensor([[offset + row - start for row in rows]
                       for start, offset in zip(starts, _offsets(starts, n), strict=True)])
    return x[at]  # (B, len(rows), d_model)


def _offsets(starts: list[int], n: int) -> list[int]:
    """Where each variant's rows begin in the flat rows."""
    out, total = [], 0
    for start in starts:
        out.append(total)
        total += n - start
    return out


def _variant_heads(spec: LlamaSpec, clean: Heads, own: Heads, mask: Tensor, start: int,
                   span: list[int], offset: int) -> Tensor:
    """One variant's heads' outputs z at its rows start.. (S, heads · hd): its queries over the
    clean keys and values before start and its own from start, span's keys hidden from every
    query but their own (as a padding token's are)."""
    n = mask.shape[0]
    own_rows = slice(offset, offset + n - start)  # the variant's rows in the flat rows
    kv, group = spec.kv_heads, spec.group_size
    queries = own.queries_rope[:, own_rows].unflatten(0, (kv, group))  # (kv, group, S, hd)
    keys = torch.cat([clean.keys_rope[:, :start], own.keys_rope[:, own_rows]], dim=1)  # (kv, T, hd)
    values = torch.cat([clean.values[:, :start], own.values[:, own_rows]], dim=1)  # (kv, T, hd)
    scaled = scale_scores(spec, queries @ keys[:, None].transpose(-2, -1))  # (kv, group, S, T)
    capped = soft_cap(spec, scaled)
    hides = mask[start:].clone()  # (S, T)
    hides[:, span] = True
    own_span = torch.tensor(span)
    hides[own_span - start, own_span] = False  # each hidden token still sees itself
    attn_weights = torch.softmax((scaled if capped is None else capped).masked_fill(
        hides, -torch.inf), dim=-1)  # (kv, group, S, T)
    context_vec = attn_weights @ values[:, None]  # (kv, group, S, hd)
    return context_vec.flatten(0, 1).transpose(0, 1).flatten(1)  # (S, heads · hd)
