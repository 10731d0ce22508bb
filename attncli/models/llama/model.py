"""Llama-family attention (Llama, Mistral, Qwen2, Qwen3) from a local checkpoint, run to one layer.

The chapter-3 multi-head attention with four changes: RMSNorm before it, RoPE on the queries
and keys, fewer key/value heads than query heads (GQA), and, for Mistral, a sliding window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.core.attention import AttentionOutput, causal_mask
from attncli.models.checks.values import check_ids
from attncli.models.family import Known, LayerTrace
from attncli.models.llama.block import attention_input, block_norm, embed, finish_block
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.qkv import project
from attncli.models.llama.rope import LayerRopes
from attncli.models.sources.named import Named
from attncli.models.unembed import Table, need, unembed, unembedding


@dataclass
class LlamaAttentionOutput(AttentionOutput):
    """AttentionOutput plus the stages these models add; keys and values per query head."""

    queries_norm: Tensor | None = None  # (heads, T, head_dim) q_norm (Qwen3, Gemma 3, OLMo 2)
    keys_norm: Tensor | None = None  # (heads, T, head_dim) k_norm, before RoPE
    queries_rope: Tensor | None = None  # (heads, T, head_dim) after RoPE; None on a NoPE layer
    keys_rope: Tensor | None = None  # (heads, T, head_dim) after RoPE, shared within a group
    capped: Tensor | None = None  # (heads, T, T) Gemma 2: cap · tanh(scaled / cap)
    out_proj: Tensor | None = None  # (d_model, heads · hd) W_O as read: a trace reuses it


@dataclass
class LlamaLayer:
    """One layer's attention, what it read, and the residual stream that led there."""

    layer: int  # 0-based index of the layer shown
    inputs: Tensor  # (T, d_model) input_layernorm of the residual stream
    output: LlamaAttentionOutput  # weights (heads, T, T); context (T, d_model) after o_proj
    hidden_states: list[Tensor]  # (T, d_model) each: the streams entering the blocks run
    window: int | None  # this layer's sliding window, None for full causal attention


def window_mask(num_tokens: int, window: int | None) -> Tensor:
    """True where query i may not look: the future, and with a window, keys i - window or older."""
    mask = causal_mask(num_tokens)  # (T, T)
    if window is not None and window < num_tokens:  # a wider window hides nothing
        # Sliding window: query i sees keys i - window + 1 .. i, so at most `window` of them.
        mask |= torch.tril(torch.ones_like(mask), diagonal=-window)  # (T, T)
    return mask


def check_tokens(spec: LlamaSpec, token_ids: list[int]) -> None:
    """Refuse empty input and token ids outside the model's vocabulary."""
    check_ids(token_ids, spec.vocab_size)


def scale_scores(spec: LlamaSpec, attn_scores: Tensor, in_place: bool = False) -> Tensor:
    """ω ÷ √d_k, or times query_pre_attn_scalar^-1/2 where the family says so (Gemma);
    in_place: written over attn_scores (the same values, no tensor made)."""
    if spec.query_scale is None:  # the √d_k of chapter 3
        root = math.sqrt(spec.head_dim)
        return attn_scores.div_(root) if in_place else attn_scores / root
    scale = spec.query_scale
    return attn_scores.mul_(scale) if in_place else attn_scores * scale


def soft_cap(spec: LlamaSpec, scaled: Tensor, in_place: bool = False) -> Tensor | None:
    """Gemma 2's soft-capping: cap · tanh(scores / cap) keeps every score inside ±cap;
    in_place: written over scaled."""
    cap = spec.softcap
    if cap is None:
        return None
    if in_place:
        return scaled.div_(cap).tanh_().mul_(cap)  # (..., T)
    return torch.tanh(scaled / cap) * cap  # (..., T)


def grouped_attention(weights: Named, spec: LlamaSpec, layer: int, x: Tensor,
                      rope: tuple[Tensor, Tensor] | None,
                      visible: Tensor | None = None) -> LlamaAttentionOutput:
    """Block layer's self-attention on x (T, d_model), every stage kept; visible (T, T), True
    where a query may look, narrows the causal mask (None: the layer's own mask alone)."""
    num_tokens, name = x.shape[-2], f"layers.{layer}.self_attn"  # x: (..., T, d_model)
    heads = project(weights, spec, layer, x, rope)
    # GQA: group_size query heads share each key/value head; repeat it for each of them.
    share = spec.group_size
    keys_rope = heads.keys_rope.repeat_interleave(share, -3)  # (heads, T, hd)
    values = heads.values.repeat_interleave(share, -3)  # (heads, T, hd)
    attn_scores = heads.queries_rope @ keys_rope.transpose(-2, -1)  # (heads, T, T)
    scaled = scale_scores(spec, attn_scores)  # (heads, T, T)
    capped = soft_cap(spec, scaled)  # (heads, T, T) or None
    mask = window_mask(num_tokens, spec.layer_windows[layer])  # (T, T)
    if visible is not None:
        mask = mask | ~visible  # (T, T) and the keys an evicted cache dropped
    masked = (scaled if capped is None else capped).masked_fill(mask, -torch.inf)  # (h, T, T)
    attn_weights = torch.softmax(masked, dim=-1)  # (heads, T, T)
    context_vec = attn_weights @ values  # (heads, T, head_dim)
    heads_context = context_vec.transpose(-3, -2).flatten(-2)  # (T, heads · head_dim)
    turned = rope is not None
    bias = weights[f"{name}.o_proj.bias"] if f"{name}.o_proj.bias" in weights else None
    quantized = weights.quantized(f"{name}.o_proj.weight")
    out_proj: Tensor | None = None  # W_O read once as float32 for a trace, unless the source
    if quantized is not None:  # computes on its blocks (the trace then reads it itself)
        context = quantized.linear(heads_context, bias)  # (T, d_model)
    else:
        out_proj = weights[f"{name}.o_proj.weight"]  # (d_model, heads · hd)
        context = F.linear(heads_context, out_proj, bias)  # (T, d_model)
    return LlamaAttentionOutput(
        weights=attn_weights, context=context, out_proj=out_proj,
        queries=heads.queries, keys=heads.keys.repeat_interleave(share, -3), values=values,
        scores=attn_scores, scaled=scaled, masked=masked, softmax=attn_weights,
        heads_context=heads_context, queries_norm=heads.queries_norm,
        keys_norm=None if heads.keys_norm is None else heads.keys_norm.repeat_interleave(share, -3),
        queries_rope=heads.queries_rope if turned else None,
        keys_rope=keys_rope if turned else None, capped=capped,
    )  # fmt: skip


@dataclass
class _Step:
    layer: int
    residual: Tensor  # (T, d_model) the stream entering the block
    attn_input: Tensor  # (T, d_model) input_layernorm(residual)
    attention: LlamaAttentionOutput


def llama_steps(weights: Named, spec: LlamaSpec, token_ids: list[int],
                last_layer: int, known: Known | None = None) -> Iterator[_Step]:
    """Run blocks 0..last_layer (known.first.. given known streams), yielding each block's
    attention; stop after the last one's."""
    for step, _ in _blocks(weights, spec, token_ids, last_layer, None, whole=False, known=known):
        yield step


def _blocks(weights: Named, spec: LlamaSpec, token_ids: list[int], last_layer: int,
            visible: Tensor | None, whole: bool,
            known: Known | None = None) -> Iterator[tuple[_Step, Tensor | None]]:
    """Blocks 0..last_layer: each one's attention, and (whole) the stream leaving the block;
    without whole the last block stops after its attention. Known streams start the pass at
    known.first and stand for the blocks' outputs they cover (their MLPs are not run)."""
    check_tokens(spec, token_ids)
    first = 0 if known is None else known.first
    x = embed(weights, spec, token_ids) if known is None else known.stream  # (T, d_model)
    ropes = LayerRopes(spec, len(token_ids))  # each layer's (T, rotary_dim) tables, or None
    for layer in range(first, last_layer + 1):
        attn_input = attention_input(weights, spec, layer, x)  # (T, d_model)
        attention = grouped_attention(weights, spec, layer, attn_input, ropes[layer], visible)
        step = _Step(layer=layer, residual=x, attn_input=attn_input, attention=attention)
        if layer == last_layer and not whole:
            yield step, None
            return  # the rest of this block is not needed
        after = None if known is None else known.after(layer)
        if after is None:  # no stream known past this block: its MLP is run
            after = finish_block(weights, spec, layer, x, attention.context)  # (T, d_model)
        x = after
        yield step, x


@torch.no_grad()
def llama_trace(weights: Named, spec: LlamaSpec, token_ids: list[int], last_layer: int,
                visible: Tensor | None = None,
                known: Known | None = None) -> Iterator[LayerTrace]:
    """Blocks 0..last_layer whole: each one's weights, values, W_O and residual streams."""
    for step, output in _blocks(weights, spec, token_ids, last_layer, visible, whole=True,
                                known=known):
        attention, layer = step.attention, step.layer
        assert attention.values is not None and output is not None
        name = f"layers.{layer}.self_attn.o_proj.weight"
        yield LayerTrace(layer=layer, residual=step.residual, weights=attention.weights,
                         values=attention.values,  # (heads, T, head_dim) repeated per group
                         # W_O as the attention read it, else read as float32 when asked for
                         out_proj=attention.out_proj if attention.out_proj is not None
                         else partial(weights.__getitem__, name),
                         output=output)


@torch.no_grad()
def llama_trace_texts(weights: Named, spec: LlamaSpec, texts: list[list[int]],
                      last_layer: int) -> Iterator[list[LayerTrace]]:
    """Blocks 0..last_layer whole for several texts together, layer by layer: each block's
    tensors read once for all of them, each text's own pass otherwise (its own positions,
    RoPE, mask and shapes), so its traces are llama_trace's."""
    xs = []
    for token_ids in texts:
        check_tokens(spec, token_ids)
        xs.append(embed(weights, spec, token_ids))  # (T, d_model) each
    ropes = {n: LayerRopes(spec, n) for n in {len(token_ids) for token_ids in texts}}
    for layer in range(last_layer + 1):
        read = weights.reading_once()  # block layer's tensors, read once, dropped after it
        traces = []
        for k, x in enumerate(xs):
            rope = ropes[len(texts[k])][layer]
            attention = grouped_attention(read, spec, layer, attention_input(read, spec, layer, x),
                                          rope)
            xs[k] = finish_block(read, spec, layer, x, attention.context)  # (T, d_model)
            assert attention.values is not None
            name = f"layers.{layer}.self_attn.o_proj.weight"  # read once, for every text
            traces.append(LayerTrace(layer=layer, residual=x, weights=attention.weights,
                                     values=attention.values,
                                     out_proj=attention.out_proj if attention.out_proj
                                     is not None else partial(read.__getitem__, name),
                                     output=xs[k]))
        yield traces


@torch.no_grad()
def llama_unembedding(weights: Named, spec: LlamaSpec) -> Callable[[range], Table]:
    """Rows of lm_head (or the tied embedding), its shape checked."""
    return unembedding(weights, "embed_tokens.weight", spec.vocab_size, spec.d_model,
                       spec.head_name)


def llama_logits(weights: Named, spec: LlamaSpec, hidden: Tensor,
                 table: Table | None = None) -> Tensor:
    """The final norm and lm_head (or the tied embedding): logits (T, vocab) of hidden;
    Gemma 2 soft-caps them. table: the whole unembedding, held (held_unembedding)."""
    need(weights, {"norm.weight": (spec.d_model,)}, "predictions")
    normed = block_norm(weights, spec, "norm", hidden)  # (T, d_model)
    lm_head = llama_unembedding(weights, spec) if table is None else table
    logits = unembed(normed, lm_head, spec.vocab_size)  # (T, vocab)
    if spec.final_softcap is None:
        return logits
    return torch.tanh(logits / spec.final_softcap) * spec.final_softcap  # (T, vocab)


@torch.no_grad()
def llama_attention(weights: Named, spec: LlamaSpec, token_ids: list[int],
                    layer: int, known: Known | None = None) -> LlamaLayer:
    """Run blocks 0..layer (negative counts from the end; known.first.. given known streams)
    and return that layer's attention."""
    index = spec.layer_index(layer)
    hidden_states = []
    for step in llama_steps(weights, spec, token_ids, last_layer=index, known=known):
        hidden_states.append(step.residual)
    return LlamaLayer(layer=index, inputs=step.attn_input, output=step.attention,
                      hidden_states=hidden_states, window=spec.layer_windows[index])


@torch.no_grad()
def llama_all_layers(weights: Named, spec: LlamaSpec, token_ids: list[int]) -> Tensor:
    """Attention weights of every query head of every layer, from one forward pass."""
    per_layer = [step.attention.weights  # (heads, T, T)
                 for step in llama_steps(weights, spec, token_ids, last_layer=spec.n_layer - 1)]
    return torch.stack(per_layer)  # (layers, heads, T, T)


