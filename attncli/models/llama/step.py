"""One token through one block of a Llama-family decoder: the layer's key/value cache, the
block resolved once (its weights and names looked up, its branches taken), and the token's
attention over the cache.

The cache of a layer holds kv_heads keys and values per token, not one per query head: under
grouped-query attention (GQA) the group_size query heads of a group read the same cached head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.models.llama.block import Finish, Rows, attention_norm, linear_of
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import scale_scores, soft_cap
from attncli.models.llama.qkv import Projection
from attncli.models.llama.rope import RopeRow
from attncli.models.sources.named import Named


class LayerCache:
    """One layer's cache: keys (after RoPE) and values of every token so far, written in place
    into buffers of the decode's length (a step copies its own row, not the whole cache)."""

    def __init__(self, spec: LlamaSpec, capacity: int) -> None:
        self.shape, self.capacity, self.length = (spec.kv_heads, spec.head_dim), capacity, 0
        self._keys: Tensor | None = None  # (kv_heads, capacity, head_dim) once a row comes
        self._values: Tensor | None = None

    @property
    def keys(self) -> Tensor:
        """(kv_heads, t, head_dim): the keys so far, a view of the buffer."""
        return self._view(self._keys)

    @property
    def values(self) -> Tensor:
        """(kv_heads, t, head_dim): the values so far, a view of the buffer."""
        return self._view(self._values)

    def _view(self, buffer: Tensor | None) -> Tensor:
        if buffer is None:
            return torch.empty(self.shape[0], 0, self.shape[1])  # (kv_heads, 0, head_dim)
        return buffer[:, :self.length]  # (kv_heads, t, head_dim)

    def seen(self, start: int) -> tuple[Tensor, Tensor]:
        """(kv_heads, t - start, head_dim) each: the keys and values from start on, views."""
        if self._keys is None or self._values is None:
            return self.keys, self.values  # (kv_heads, 0, head_dim) each
        return self._keys[:, start:self.length], self._values[:, start:self.length]

    def append(self, keys: Tensor, values: Tensor) -> None:
        """Add n tokens' keys and values (kv_heads, n, head_dim) each after the ones held."""
        end = self.length + keys.shape[1]
        if self._keys is None or self._values is None or end > self._keys.shape[1]:
            size = max(end, self.capacity)  # past the decode's length: a larger buffer
            self._keys = self._grown(self._keys, keys, size)  # (kv_heads, size, head_dim)
            self._values = self._grown(self._values, values, size)
        self._keys[:, self.length:end] = keys
        self._values[:, self.length:end] = values
        self.length = end

    def _grown(self, buffer: Tensor | None, like: Tensor, size: int) -> Tensor:
        """A buffer of size tokens (like's dtype and device) holding buffer's tokens so far."""
        grown = like.new_empty(self.shape[0], size, self.shape[1])  # (kv_heads, size, hd)
        if buffer is not None:
            grown[:, :self.length] = buffer[:, :self.length]
        return grown


def as_cached(t: Tensor, cached: bool) -> Tensor:
    """t as the cache's arithmetic holds it: float16 under llama.cpp's numerics (cached: its
    KV cache, and the queries and weights its float16 products round), else unchanged."""
    return t.to(torch.float16).to(t.dtype) if cached else t


@dataclass(frozen=True)
class StepBlock:
    """Block layer resolved for decode steps: its weights and names looked up once (a held
    decoder keeps one a layer), its branches taken."""

    attn_norm: Rows | None  # input_layernorm, or None (OLMo 2)
    projection: Projection
    o_proj: Rows
    finish: Finish
    window: int | None

    @classmethod
    def of(cls, weights: Named, spec: LlamaSpec, layer: int) -> StepBlock:
        return cls(attention_norm(weights, spec, layer), Projection.of(weights, spec, layer),
                   linear_of(weights, f"layers.{layer}.self_attn.o_proj"),
                   Finish.of(weights, spec, layer), spec.layer_windows[layer])


def attend(block: StepBlock, spec: LlamaSpec, cache: LayerCache, x: Tensor,
            rope: RopeRow | None, cached: bool) -> tuple[Tensor, Tensor]:
    """Token t (1, d_model) against layer's cache: weights (heads, t+1), output (1, d_model);
    cached: under llama.cpp's numerics."""
    # Only token t is projected (q/k norms and RoPE at position t, as the full pass does):
    # the cache already holds the rotated keys of 0..t-1.
    queries, keys, values = block.projection.row(x, rope)  # (heads, 1, hd), (kv, 1, hd) x2
    if cached:
        queries, keys, values = (as_cached(t, True) for t in (queries, keys, values))
    # GQA: the group_size query heads of a group read one cached head, which is never copied.
    grouped = queries.reshape(spec.kv_heads, spec.group_size, spec.head_dim)  # (kv, group, hd)
    cache.append(keys, values)  # (kv, t+1, hd)
    cache_len, window = cache.length, block.window
    # Sliding window: query t sees keys t - window + 1 .. t; older ones stay in the cache unread.
    start = 0 if window is None else max(0, cache_len - window)
    seen_keys, seen_values = cache.seen(start)  # (kv, n, hd) each, views of the buffers
    # Scores and softmax in float64, rounded once to the model dtype: the step's weights differ
    # from the full pass only by that pass's own rounding, not by two roundings added up.
    attn_scores = torch.bmm(grouped.double(),
                            seen_keys.double().transpose(1, 2))  # (kv, group, n)
    scaled = scale_scores(spec, attn_scores, in_place=True)  # (kv, group, n)
    capped = soft_cap(spec, scaled, in_place=True)  # Gemma 2: cap · tanh(scaled / cap)
    attn_weights = torch.softmax(scaled if capped is None else capped,
                                 dim=-1).to(grouped.dtype)  # (kv, group, n)
    heads_context = torch.bmm(as_cached(attn_weights, cached),
                              seen_values).view(1, -1)  # (1, heads · hd)
    shown = attn_weights.view(spec.num_heads, -1)  # (heads, n)
    if start:  # (heads, t+1): 0 on the keys before the window
        shown = torch.cat([shown.new_zeros(spec.num_heads, start), shown], dim=1)
    return shown, block.o_proj(heads_context)  # (heads, t+1), (1, d)
