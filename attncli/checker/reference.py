"""The book's chapter-3 forward pass, written once with switches for the known mistakes.

With no mistake it is the book's SelfAttention_v1/v2, CausalAttention and MultiHeadAttention
(checked in tests against those classes and against PyTorch's scaled_dot_product_attention);
each switch computes what one known mistake computes, so a reader's output can be matched.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.checker.kinds import KINDS, Kind, KindName


@dataclass(frozen=True)
class Weights:
    """The reference's weights, in nn.Linear's layout: y = x · Wᵀ + b."""

    W_query: Tensor  # (d_out, d_in)
    W_key: Tensor  # (d_out, d_in)
    W_value: Tensor  # (d_out, d_in)
    b_query: Tensor | None = None  # (d_out,) with qkv_bias
    b_key: Tensor | None = None  # (d_out,)
    b_value: Tensor | None = None  # (d_out,)
    out_proj: Tensor | None = None  # (d_out, d_out) multi-head only
    out_bias: Tensor | None = None  # (d_out,)
    heads: tuple[Weights, ...] = ()  # the wrapper's: each CausalAttention head's own


@dataclass(frozen=True)
class Setting:
    """One case's constructor values and forward mode."""

    d_in: int
    d_out: int
    context_length: int
    num_heads: int = 1
    dropout: float = 0.0
    training: bool = True  # the module's mode: dropout acts only in training
    qkv_bias: bool = False
    seed: int = 123  # torch.manual_seed before each forward: the same dropout mask for both


def make_weights(kind: Kind, s: Setting, seed: int) -> Weights:
    """Random weights for a case, from their own generator (the global seed is left alone)."""
    if kind.stacked:
        one = replace(s, num_heads=1)
        heads = tuple(make_weights(KINDS[KindName.causal], one, seed + h)
                      for h in range(s.num_heads))
        return replace(heads[0], heads=heads)
    g = torch.Generator().manual_seed(seed)

    def draw(*shape: int) -> Tensor:
        return torch.rand(*shape, generator=g) * 2 - 1  # (*shape) in [-1, 1)

    wq, wk, wv = draw(s.d_out, s.d_in), draw(s.d_out, s.d_in), draw(s.d_out, s.d_in)
    biases = (draw(s.d_out), draw(s.d_out), draw(s.d_out)) if s.qkv_bias else (None,) * 3
    out = (draw(s.d_out, s.d_out), draw(s.d_out)) if kind.multihead else (None, None)
    return Weights(wq, wk, wv, *biases, *out)


def _project(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    y = x @ w.T  # (b, T, d_out)
    return y if b is None else y + b  # (b, T, d_out)


def forward(kind: Kind, w: Weights, x: Tensor, s: Setting,
            mistakes: frozenset[str] = frozenset()) -> Tensor:
    """The book's forward on x ((T, d_in), or (b, T, d_in) for the batched classes), with
    mistakes switched in; the caller seeds torch first when dropout acts."""
    if kind.stacked:  # the wrapper: each head a CausalAttention, in order (their dropout too)
        one = replace(s, num_heads=1)
        order = w.heads[::-1] if "heads_run_reversed" in mistakes else w.heads
        outs = [forward(KINDS[KindName.causal], head, x, one, mistakes) for head in order]
        if "heads_reversed" in mistakes:
            outs = outs[::-1]  # run in order (their dropout too), concatenated last head first
        return torch.cat(outs, dim=-1)  # (b, T, num_heads · d_out)
    xb = x if x.dim() == 3 else x[None]  # (b, T, d_in)
    b, num_tokens, _ = xb.shape
    heads = s.num_heads if kind.multihead else 1
    head_dim = s.d_out // heads
    queries = _project(xb, w.W_query, w.b_query)  # (b, T, d_out)
    keys = _project(xb, w.W_key, w.b_key)  # (b, T, d_out)
    values = _project(xb, w.W_value, w.b_value)  # (b, T, d_out)

    def split(t: Tensor) -> Tensor:
        if "split_no_transpose" in mistakes:
            return t.reshape(b, heads, num_tokens, head_dim)  # (b, h, T, hd) rows mixed
        return t.view(b, num_tokens, heads, head_dim).transpose(1, 2)  # (b, h, T, hd)

    q, k, v = split(queries), split(keys), split(values)  # (b, h, T, hd) each
    scores = k @ q.transpose(-2, -1) if "scores_transposed" in mistakes \
        else q @ k.transpose(-2, -1)  # (b, h, T, T)
    p = s.dropout if kind.dropout else 0.0
    training = s.training or "dropout_in_eval" in mistakes

    def drop(t: Tensor) -> Tensor:
        return F.dropout(t, p, training) if p > 0 else t  # same shape; a mask when training

    if "dropout_before_mask" in mistakes:
        scores = drop(scores)  # (b, h, T, T)
    mask = None
    if kind.causal:
        diagonal = 2 if "mask_sees_next" in mistakes else \
            0 if "mask_includes_diagonal" in mistakes else 1
        mask = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(diagonal)  # (T, T)
        if not {"mask_after_softmax", "mask_discarded"} & mistakes:
            fill = 0.0 if "mask_zero" in mistakes else -torch.inf
            scores = scores.masked_fill(mask, fill)  # (b, h, T, T)
    if "dropout_before_softmax" in mistakes:
        scores = drop(scores)  # (b, h, T, T) a dropped -inf is 0: the future gets weight
    d_k = 1 if "no_scale" in mistakes else s.d_out if "scale_d_out" in mistakes else \
        s.d_in if "scale_d_in" in mistakes else head_dim
    dim = -2 if "softmax_queries" in mistakes else 1 if "softmax_heads" in mistakes else -1
    weights = torch.softmax(scores / d_k**0.5, dim=dim)  # (b, h, T, T)
    if mask is not None and "mask_after_softmax" in mistakes:
        weights = weights.masked_fill(mask, 0.0)  # (b, h, T, T) rows no longer sum to 1
    if not {"dropout_before_mask", "dropout_before_softmax", "dropout_on_context"} & mistakes:
        weights = drop(weights)  # (b, h, T, T)
    context = weights @ (k if "weights_times_keys" in mistakes else v)  # (b, h, T, hd)
    if "merge_no_transpose" in mistakes:
        merged = context.reshape(b, num_tokens, s.d_out)  # (b, T, d_out) heads mixed up
    else:
        merged = context.transpose(1, 2).reshape(b, num_tokens, s.d_out)  # (b, T, d_out)
    if "dropout_on_context" in mistakes:
        merged = drop(merged)  # (b, T, d_out)
    if kind.multihead and w.out_proj is not None and "no_out_proj" not in mistakes:
        merged = _project(merged, w.out_proj, w.out_bias)  # (b, T, d_out)
    return merged if x.dim() == 3 else merged[0]  # (b, T, d_out) or (T, d_out)
