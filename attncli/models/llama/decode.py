"""A Llama-family checkpoint decoded token by token, every layer with its own key/value cache.

The cache of a layer holds kv_heads keys and values per token, not one per query head: under
grouped-query attention (GQA) the group_size query heads of a group read the same cached head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.models.decoding import Shape
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import _feed_forward, _linear, rms_norm
from attncli.models.llama.rope import apply_rope, rope_tables
from attncli.models.sources.named import Named


@dataclass
class _LayerCache:
    """One layer's cache: keys (after RoPE) and values of every token so far."""

    keys: Tensor  # (kv_heads, t, head_dim)
    values: Tensor  # (kv_heads, t, head_dim)


def llama_shape(spec: LlamaSpec) -> Shape:
    """Per layer and token: q and o (d·heads·hd each), k and v (d·kv_heads·hd each), SwiGLU."""
    d, q_width = spec.d_model, spec.num_heads * spec.head_dim
    kv_width = spec.kv_heads * spec.head_dim
    projections = 2 * d * q_width + 2 * d * kv_width  # q_proj, o_proj; k_proj, v_proj
    mlp = 3 * d * spec.d_ff  # gate_proj, up_proj, down_proj
    return Shape(layers=spec.n_layer, d_in=d, d_out=q_width, token_macs=projections + mlp,
                 kv_width=kv_width)


def _attend(weights: Named, spec: LlamaSpec, layer: int, cache: _LayerCache, x: Tensor,
            cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """Token t (1, d_model) against layer's cache: weights (heads, t+1), output (1, d_model)."""
    name, head_dim, kv_heads = f"layers.{layer}.self_attn", spec.head_dim, spec.kv_heads
    queries = _linear(weights, f"{name}.q_proj", x).view(-1, head_dim)  # (heads, hd)
    keys = _linear(weights, f"{name}.k_proj", x).view(-1, head_dim)  # (kv_heads, hd)
    values = _linear(weights, f"{name}.v_proj", x).view(kv_heads, 1, head_dim)  # (kv, 1, hd)
    if spec.qk_norm:
        # Qwen3: RMSNorm over each head's head_dim, before RoPE.
        queries = rms_norm(queries, weights[f"{name}.q_norm.weight"], spec.rms_eps)  # (h, hd)
        keys = rms_norm(keys, weights[f"{name}.k_norm.weight"], spec.rms_eps)  # (kv, hd)
    queries = apply_rope(queries.unsqueeze(1), cos, sin)  # (heads, 1, hd) turned by position t
    keys = apply_rope(keys.unsqueeze(1), cos, sin)  # (kv_heads, 1, hd)
    # Only token t is projected: the cache already holds the rotated keys of 0..t-1.
    cache.keys = torch.cat([cache.keys, keys], dim=1)  # (kv_heads, t+1, hd)
    cache.values = torch.cat([cache.values, values], dim=1)  # (kv_heads, t+1, hd)
    cache_len, window = cache.keys.shape[1], spec.layer_windows[layer]
    # Sliding window: query t sees keys t - window + 1 .. t; older ones stay in the cache unread.
    start = 0 if window is None else max(0, cache_len - window)
    seen_keys = cache.keys[:, start:].unsqueeze(1)  # (kv, 1, n, hd)
    seen_values = cache.values[:, start:].unsqueeze(1)  # (kv, 1, n, hd)
    # GQA: the group_size query heads of a group read one cached head, which is never copied.
    grouped = queries.view(kv_heads, spec.group_size, 1, head_dim)  # (kv, group, 1, hd)
    # Scores and softmax in float64, rounded once to the model dtype: the step's weights differ
    # from the full pass only by that pass's own rounding, not by two roundings added up.
    attn_scores = grouped.double() @ seen_keys.double().transpose(-2, -1)  # (kv, group, 1, n)
    attn_weights = torch.softmax(attn_scores / math.sqrt(head_dim),
                                 dim=-1).to(grouped.dtype)  # (kv, group, 1, n)
    heads_context = (attn_weights @ seen_values).reshape(1, -1)  # (1, heads · hd)
    shown = attn_weights.new_zeros(spec.num_heads, cache_len)  # (heads, t+1) 0 outside window
    shown[:, start:] = attn_weights.reshape(spec.num_heads, -1)  # (heads, n)
    return shown, _linear(weights, f"{name}.o_proj", heads_context)  # (heads, t+1), (1, d)


class LlamaDecoder:
    """Every layer for one token at a time; the shown layer's weights and attention output."""

    def __init__(self, weights: Named, spec: LlamaSpec, num_tokens: int, layer: int) -> None:
        self.read, self.spec, self.layer = weights.reading_once(), spec, layer
        empty = torch.empty(spec.kv_heads, 0, spec.head_dim)  # (kv_heads, 0, head_dim)
        self.caches = [_LayerCache(empty, empty) for _ in range(spec.n_layer)]
        self.cos, self.sin = rope_tables(spec, num_tokens)  # each (T, rotary_dim)

    @torch.no_grad()
    def step(self, token_id: int, position: int) -> tuple[Tensor, Tensor]:
        """Token at position through every layer: the shown one's (heads, t+1), (d_model,)."""
        read, spec, t = self.read, self.spec, position
        x = read.rows("embed_tokens.weight", [token_id])  # (1, d_model); no position embedding
        shown: tuple[Tensor, Tensor] | None = None
        for i, cache in enumerate(self.caches):
            block = f"layers.{i}"
            attn_input = rms_norm(x, read[f"{block}.input_layernorm.weight"], spec.rms_eps)
            attn_weights, attn_out = _attend(read, spec, i, cache, attn_input,
                                             self.cos[t:t + 1], self.sin[t:t + 1])
            if i == self.layer:
                shown = attn_weights, attn_out[0]  # (heads, t+1), (d_model,)
            x = x + attn_out  # (1, d_model) shortcut around attention
            normed = rms_norm(x, read[f"{block}.post_attention_layernorm.weight"], spec.rms_eps)
            x = x + _feed_forward(read, spec, block, normed)  # (1, d_model)
        assert shown is not None, "the shown layer is one of the layers"
        return shown

    def cache_bytes(self) -> int:
        """Bytes of every layer's keys and values so far (kv_heads per token, not heads)."""
        return sum(c.keys.nbytes + c.values.nbytes for c in self.caches)
