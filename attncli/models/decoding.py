"""One token at a time through a model: the step every family offers `kvcache`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from torch import Tensor


@dataclass(frozen=True)
class Shape:
    """What the multiply-adds depend on: layers, widths and one token's per-layer work."""

    layers: int
    d_in: int
    d_out: int
    token_macs: int  # one token through one layer, outside attention: q, k, v, out, MLP
    kv_width: int | None = None  # k and v projection width when narrower than d_out (GQA)

    def step_macs(self, cache_len: int, cached: bool) -> int:
        """Multiply-adds of one decoding step whose query sees cache_len keys.

        One new token goes through every layer: its projections, then Q·Kᵀ and weights·V over
        cache_len keys. Without a cache the prefix's keys and values are rebuilt in every
        layer, and below the last layer that needs the prefix's whole pass through the layer.
        """
        new_token = self.layers * (self.token_macs + 2 * cache_len * self.d_out)
        if cached:
            return new_token
        prefix = cache_len - 1
        prefix_layer = prefix * self.token_macs + self.d_out * prefix * (prefix + 1)
        kv_width = self.d_out if self.kv_width is None else self.kv_width
        return new_token + (self.layers - 1) * prefix_layer + prefix * 2 * self.d_in * kv_width


class DecodeStep(Protocol):
    """A model decoding one token at a time, every layer keeping its own key/value cache."""

    def step(self, token_id: int, position: int) -> tuple[Tensor, Tensor]:
        """Token at position through every layer: the shown layer's weights (heads, t+1) over
        its cache and its attention output (d_out,)."""
        ...

    def step_layers(self, token_id: int, position: int) -> tuple[Tensor, Tensor]:
        """Token at position through every layer: each layer's weights (layers, heads, t+1)
        over its own cache, and the logits of the next token (vocab,): the last block's
        output through the final norm and the unembedding, as the family's logits() reads it."""
        ...

    def cache_bytes(self) -> int:
        """Bytes every layer's cache holds now."""
        ...
