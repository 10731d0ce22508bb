"""BERT-style encoder blocks (BERT, RoBERTa) from a local checkpoint, run to one layer.

Chapter 3's multi-head attention with no mask at all: every query sees every key, before and
after it. The blocks are post-LN, as in the original Transformer: attention, its dense
projection, + the residual, LayerNorm; then the GELU MLP, + the residual, LayerNorm.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.core.attention import AttentionOutput
from attncli.errors import AttnCliError
from attncli.models.activations import activation
from attncli.models.bert.config import BertSpec
from attncli.models.checks.values import check_ids
from attncli.models.family import LayerTrace
from attncli.models.sources.named import Named


def check_tokens(spec: BertSpec, token_ids: list[int]) -> None:
    """Refuse empty input, ids outside the vocabulary, and more tokens than positions."""
    check_ids(token_ids, spec.vocab_size)
    if max(spec.position_ids(token_ids)) >= spec.max_positions:
        start = f", counted from {spec.first_position}" if spec.first_position else ""
        raise AttnCliError(f"{len(token_ids):,} tokens is more than this encoder's "
                           f"{spec.max_tokens:,} positions (max_position_embeddings "
                           f"{spec.max_positions}{start}); shorten the text")


def _linear(weights: Named, name: str, x: Tensor) -> Tensor:
    """x @ Wᵀ + b: nn.Linear on weights read from disk."""
    return F.linear(x, weights[f"{name}.weight"], weights[f"{name}.bias"])


def _layer_norm(weights: Named, name: str, x: Tensor, eps: float) -> Tensor:
    """LayerNorm name (its .weight and .bias) over the last axis of x."""
    return F.layer_norm(x, x.shape[-1:], weights[f"{name}.weight"], weights[f"{name}.bias"],
                        eps)  # (T, d_model)


def embed(weights: Named, spec: BertSpec, token_ids: list[int], type_id: int,
          positions_on: bool = True) -> Tensor:
    """Word + token type + position embeddings, then LayerNorm: layer 0's input (T, d_model).
    Without positions_on the position embeddings are left out (`permute --model`)."""
    words = weights.rows("embeddings.word_embeddings.weight", token_ids)  # (T, d_model)
    types = weights.rows("embeddings.token_type_embeddings.weight",
                         [type_id] * len(token_ids))  # (T, d_model) one segment
    positions = weights.rows("embeddings.position_embeddings.weight",
                             spec.position_ids(token_ids))  # (T, d_model)
    if not positions_on:
        positions = torch.zeros_like(positions)  # (T, d_model) the same sums, positions 0
    # transformers' order of the two sums, so that the rounding is the same.
    return _layer_norm(weights, "embeddings.LayerNorm", words + types + positions, spec.eps)


def self_attention(weights: Named, spec: BertSpec, layer: int, x: Tensor,
                   visible: Tensor | None = None) -> AttentionOutput:
    """Block layer's self-attention on x (T, d_model), every stage kept; no mask unless
    visible (T, T), True where a query may look, narrows it."""
    num_tokens, heads, head_dim = x.shape[0], spec.num_heads, spec.head_dim
    name = f"encoder.layer.{layer}.attention"
    # The head split: d_model → heads × head_dim, each head its own slice of Q, K and V.
    queries = _linear(weights, f"{name}.self.query", x).view(num_tokens, heads, head_dim)
    keys = _linear(weights, f"{name}.self.key", x).view(num_tokens, heads, head_dim)
    values = _linear(weights, f"{name}.self.value", x).view(num_tokens, heads, head_dim)
    queries, keys, values = (t.transpose(0, 1) for t in (queries, keys, values))  # (h, T, hd)
    attn_scores = queries @ keys.transpose(-2, -1)  # (heads, T, T)
    scaled = attn_scores * head_dim**-0.5  # (heads, T, T) the √d_k of chapter 3
    # Bidirectional: no causal mask, every query reads every key, before and after it.
    shown = scaled if visible is None else scaled.masked_fill(~visible, -torch.inf)
    attn_weights = torch.softmax(shown, dim=-1)  # (heads, T, T)
    context_vec = attn_weights @ values  # (heads, T, head_dim)
    heads_context = context_vec.transpose(0, 1).reshape(num_tokens, -1)  # (T, heads · hd)
    return AttentionOutput(
        weights=attn_weights, context=_linear(weights, f"{name}.output.dense", heads_context),
        queries=queries, keys=keys, values=values, scores=attn_scores, scaled=scaled,
        masked=None if visible is None else shown, softmax=attn_weights,
        heads_context=heads_context)  # fmt: skip


def _feed_forward(weights: Named, spec: BertSpec, block: str, x: Tensor) -> Tensor:
    """intermediate.dense, the config's activation (GELU), output.dense: (T, d_model)."""
    hidden = activation(spec.hidden_act, "hidden_act")(
        _linear(weights, f"{block}.intermediate.dense", x))  # (T, d_ff)
    return _linear(weights, f"{block}.output.dense", hidden)  # (T, d_model)


@dataclass
class _Step:
    residual: Tensor  # (T, d_model) the stream entering the block: what its attention reads
    attention: AttentionOutput


def _blocks(weights: Named, spec: BertSpec, token_ids: list[int], type_id: int,
            last_layer: int, visible: Tensor | None, whole: bool,
            positions_on: bool = True) -> Iterator[tuple[_Step, Tensor | None]]:
    """Blocks 0..last_layer: each one's attention, and (whole) the stream leaving the block;
    without whole the last block stops after its attention."""
    check_tokens(spec, token_ids)
    x = embed(weights, spec, token_ids, type_id, positions_on)  # (T, d_model)
    for layer in range(last_layer + 1):
        block = f"encoder.layer.{layer}"
        attention = self_attention(weights, spec, layer, x, visible)
        step = _Step(residual=x, attention=attention)
        if layer == last_layer and not whole:
            yield step, None
            return  # the rest of this block is not needed
        # Post-LN: the residual sum is normalised after each sublayer, not before it.
        x = _layer_norm(weights, f"{block}.attention.output.LayerNorm",
                        attention.context + x, spec.eps)  # (T, d_model)
        x = _layer_norm(weights, f"{block}.output.LayerNorm",
                        _feed_forward(weights, spec, block, x) + x, spec.eps)  # (T, d_model)
        yield step, x


@torch.no_grad()
def bert_attention(weights: Named, spec: BertSpec, token_ids: list[int], type_id: int,
                   layer: int, positions_on: bool = True) -> tuple[int, Tensor, AttentionOutput]:
    """Run blocks 0..layer (negative counts from the end): that layer's index, its input
    (T, d_model) and its attention with every stage."""
    index = spec.layer_index(layer)
    *_, (step, _) = _blocks(weights, spec, token_ids, type_id, index, None, whole=False,
                            positions_on=positions_on)
    return index, step.residual, step.attention


@torch.no_grad()
def bert_all_layers(weights: Named, spec: BertSpec, token_ids: list[int],
                    type_id: int) -> Tensor:
    """Attention weights of every head of every layer, from one forward pass."""
    per_layer = [step.attention.weights  # (heads, T, T)
                 for step, _ in _blocks(weights, spec, token_ids, type_id, spec.n_layer - 1,
                                        None, whole=False)]
    return torch.stack(per_layer)  # (layers, heads, T, T)


@torch.no_grad()
def bert_trace(weights: Named, spec: BertSpec, token_ids: list[int], type_id: int,
               last_layer: int, visible: Tensor | None = None) -> Iterator[LayerTrace]:
    """Blocks 0..last_layer whole: each one's weights, values, W_O and residual streams."""
    for layer, (step, output) in enumerate(
            _blocks(weights, spec, token_ids, type_id, last_layer, visible, whole=True)):
        attention = step.attention
        assert attention.values is not None and output is not None
        yield LayerTrace(layer=layer, residual=step.residual, weights=attention.weights,
                         values=attention.values,  # (heads, T, head_dim)
                         out_proj=weights[f"encoder.layer.{layer}.attention.output.dense.weight"],
                         output=output)
