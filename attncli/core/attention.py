"""The four attention variants of chapter 3, their registry and their output record.

Each variant's traits (causal, heads, dropout, stages) are declared in core/variants.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attncli.core.variants import Variant
from attncli.errors import AttnCliError


@dataclass
class AttentionOutput:
    """Every stage of one attention forward pass; None for a stage the variant lacks."""

    weights: Tensor  # (heads, T, T) attention weights, after dropout if any
    context: Tensor  # (T, d_out) context vectors
    queries: Tensor | None = None  # (heads, T, head_dim)
    keys: Tensor | None = None  # (heads, T, head_dim)
    values: Tensor | None = None  # (heads, T, head_dim)
    scores: Tensor | None = None  # (heads, T, T) Q·Kᵀ (x·xᵀ for simple)
    scaled: Tensor | None = None  # (heads, T, T) scores / √d_k
    masked: Tensor | None = None  # (heads, T, T) with -inf above the diagonal
    softmax: Tensor | None = None  # (heads, T, T) weights before dropout
    dropped: Tensor | None = None  # (heads, T, T) weights after dropout
    heads_context: Tensor | None = None  # (T, d_out) heads concatenated, before out_proj


def causal_mask(num_tokens: int, device: torch.device | None = None) -> Tensor:
    """True above the diagonal: the future positions a query may not see."""
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)  # (T, T)
    return torch.triu(ones, diagonal=1)  # (T, T)


class Attention(nn.Module):
    """What every variant offers: its forward pass, and its queries, keys and values as the
    tiled path takes them (unscaled, heads first) with the way its heads' outputs combine."""

    d_out: int

    def forward(self, x: Tensor) -> AttentionOutput:
        raise NotImplementedError

    def heads_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values (heads, T, head_dim) of x (T, d_in); softmax(q·kᵀ/√head_dim)
        gives this variant's weights."""
        raise NotImplementedError

    def combine(self, heads_context: Tensor) -> Tensor:
        """The context vectors (T, d_out) from each head's context (heads, T, head_dim)."""
        return heads_context[0]  # (T, d_out) one head


class SimpleAttention(Attention):
    """Section 3.3: no trainable weights; scores are dot products of the inputs themselves."""

    def __init__(self, d_in: int, d_out: int | None = None, **_: object) -> None:
        super().__init__()
        if d_out is not None and d_out != d_in:
            raise AttnCliError(
                f"simple attention has no projection, so d_out must equal d_in "
                f"(got d_in={d_in}, d_out={d_out})"
            )
        self.d_out = d_in

    def heads_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # Simple attention is unscaled x·xᵀ: √d_in on the queries cancels the 1/√d_k.
        return x[None] * math.sqrt(x.shape[1]), x[None], x[None]  # (1, T, d_in) each

    def forward(self, x: Tensor) -> AttentionOutput:
        attn_scores = x @ x.T  # (T, T); the book does not scale here
        attn_weights = torch.softmax(attn_scores, dim=-1)  # (T, T)
        context_vec = attn_weights @ x  # (T, d_in)
        return AttentionOutput(
            weights=attn_weights.unsqueeze(0),  # (1, T, T)
            context=context_vec,
            scores=attn_scores.unsqueeze(0),  # (1, T, T)
            softmax=attn_weights.unsqueeze(0),  # (1, T, T)
        )


class QKVAttention(Attention):
    """Section 3.4 (SelfAttention_v2): trainable query, key and value projections."""

    score_scale: float | None = None  # None: 1/√d_k; a checkpoint may ask for another factor
    # (T, T) True where a query may not look beyond the causal mask: keys an evicted cache
    # dropped (StreamingLLM's lesson). None: the causal mask alone.
    hidden: Tensor | None = None

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False, **_: object) -> None:
        super().__init__()
        self.d_out = d_out
        # Construction order W_query, W_key, W_value is the book's: a seed gives its numbers.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of x, each (T, d_out)."""
        keys = self.W_key(x)  # (T, d_out)
        queries = self.W_query(x)  # (T, d_out)
        values = self.W_value(x)  # (T, d_out)
        return queries, keys, values

    def heads_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        queries, keys, values = self.project(x)  # each (T, d_out)
        return queries[None], keys[None], values[None]  # (1, T, d_out) each

    def attend(self, queries: Tensor, keys: Tensor, values: Tensor, causal: bool,
               dropout: nn.Dropout | None) -> AttentionOutput:
        """Scaled dot-product attention over (heads, T, head_dim) inputs."""
        attn_scores = queries @ keys.transpose(-2, -1)  # (heads, T, T)
        # Divide by √d_k so the softmax does not saturate as the head width grows.
        scaled = attn_scores / math.sqrt(keys.shape[-1]) if self.score_scale is None \
            else attn_scores * self.score_scale  # (heads, T, T)
        masked = None
        if causal:
            # Query i may only look at keys 0..i: future positions get -inf, so weight 0.
            mask = causal_mask(scaled.shape[-1], device=scaled.device)  # (T, T)
            if self.hidden is not None:
                mask = mask | self.hidden  # (T, T) and the keys evicted from the cache
            masked = scaled.masked_fill(mask, -torch.inf)  # (heads, T, T)
        attn_weights = torch.softmax(scaled if masked is None else masked, dim=-1)  # (heads, T, T)
        dropped = None
        if dropout is not None and dropout.p > 0:
            # Training-mode dropout zeroes weights and rescales the rest by 1/(1-p).
            dropped = dropout(attn_weights)  # (heads, T, T)
        final = attn_weights if dropped is None else dropped  # (heads, T, T)
        context_vec = final @ values  # (heads, T, head_dim)
        return AttentionOutput(
            weights=final,
            context=context_vec.transpose(0, 1).reshape(context_vec.shape[1], -1),  # (T, d_out)
            queries=queries,
            keys=keys,
            values=values,
            scores=attn_scores,
            scaled=scaled,
            masked=masked,
            softmax=attn_weights,
            dropped=dropped,
        )

    def forward(self, x: Tensor) -> AttentionOutput:
        queries, keys, values = self.project(x)  # each (T, d_out)
        return self.attend(queries[None], keys[None], values[None], causal=False, dropout=None)


class CausalAttention(QKVAttention):
    """Section 3.5: QKV attention with the causal mask and dropout on the weights."""

    def __init__(self, d_in: int, d_out: int, dropout: float = 0.0, qkv_bias: bool = False,
                 **_: object) -> None:
        super().__init__(d_in, d_out, qkv_bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> AttentionOutput:
        queries, keys, values = self.project(x)  # each (T, d_out)
        return self.attend(queries[None], keys[None], values[None], causal=True,
                           dropout=self.dropout)


class MultiHeadAttention(QKVAttention):
    """Section 3.6.2: causal attention with d_out split across heads, then out_proj."""

    def __init__(self, d_in: int, d_out: int, num_heads: int = 2, dropout: float = 0.0,
                 qkv_bias: bool = False, **_: object) -> None:
        if num_heads < 1 or d_out % num_heads != 0:
            raise AttnCliError(
                f"heads must divide d_out (got d_out={d_out}, heads={num_heads})"
            )
        super().__init__(d_in, d_out, qkv_bias=qkv_bias)
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.out_proj = nn.Linear(d_out, d_out)  # combines the heads' outputs
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, t: Tensor) -> Tensor:
        """(T, d_out) → (heads, T, head_dim): each head sees its own slice of d_out."""
        return t.view(t.shape[0], self.num_heads, self.head_dim).transpose(0, 1)

    def heads_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        queries, keys, values = self.project(x)  # each (T, d_out)
        return self.split_heads(queries), self.split_heads(keys), self.split_heads(values)

    def combine(self, heads_context: Tensor) -> Tensor:
        # Heads side by side again, (T, d_out), then the output projection.
        num_tokens = heads_context.shape[1]
        return self.out_proj(heads_context.transpose(0, 1).reshape(num_tokens, -1))  # (T, d_out)

    def forward(self, x: Tensor) -> AttentionOutput:
        queries, keys, values = self.project(x)  # each (T, d_out)
        out = self.attend(self.split_heads(queries), self.split_heads(keys),
                          self.split_heads(values), causal=True, dropout=self.dropout)
        out.heads_context = out.context  # (T, d_out) heads side by side
        out.context = self.out_proj(out.context)  # (T, d_out)
        return out


VARIANTS: dict[Variant, type[Attention]] = {
    Variant.simple: SimpleAttention,
    Variant.qkv: QKVAttention,
    Variant.causal: CausalAttention,
    Variant.multihead: MultiHeadAttention,
}


def build_variant(name: Variant | str, d_in: int, d_out: int, num_heads: int = 2,
                  dropout: float = 0.0, qkv_bias: bool = False) -> Attention:
    """Construct the named variant; the caller seeds torch first for reproducible weights."""
    try:
        variant = Variant(name)
    except ValueError:
        raise AttnCliError(f"unknown variant {name!r} (choose from "
                           f"{', '.join(v.value for v in Variant)})") from None
    return VARIANTS[variant](d_in=d_in, d_out=d_out, num_heads=num_heads, dropout=dropout,
                             qkv_bias=qkv_bias)
