"""One token at a time through a model: the step every family offers `kvcache`.

A decoder's weights come from one of two providers. Held (the default): every layer's tensors
are read once and kept, so each step only multiplies (fast, but as much memory as the whole
model in float32: 32 GB for an 8B). Streamed (held=False): each step reads every layer's tensors
again through the source's tensor() and drops them, so at most one layer is in memory (bounded,
but each token dequantizes the whole file). A decoder that also offers decode_by_layer runs
every token through one layer before the next: the same numbers, one layer held at a time, and
the file read once; `kvcache` takes that path (decode_steps).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from torch import Tensor

PREFILL_QUERIES = 256  # prompt queries a prefill attends at once, at most
# ... and fewer where their float64 scores (heads, C, T) would pass this many bytes: a stage of a
# chunk's scores stays in the allocator's reused heap (glibc maps a block of more than 32 MB
# afresh each time, its pages faulted in again: a 1B's 2,000-token prompt spent 50 s of system
# time on 256-query chunks of 131 MB, against 83 s of its own work) and the peak stays small.
PREFILL_BYTES = 8 << 20
# A prefill's parts that work token by token (norms, projections, the feed-forward) take the
# prompt's rows a span at a time, each span's widest intermediates within this many bytes (an
# 8B's feed-forward holds 16 · d_ff bytes a row: 0.46 GB for a 2,000-token prompt at once).
PREFILL_WORK = 128 << 20
# ... and at least this many rows a span, so that a span's products take the same path as
# the whole prompt's (the dense one from DENSE_FROM rows; BLAS's own for a few rows differs).
PREFILL_ROWS = 256


def _trimmer() -> Callable[[int], int] | None:
    """glibc's malloc_trim, where the C library is glibc (else None)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
        return trim
    except (OSError, AttributeError):
        return None


_TRIM = _trimmer()


def release_freed() -> None:
    """Hand the pages of freed memory back to the system, where the C library is glibc, which
    keeps them for reuse: a long prompt's layers leave stages of many sizes, and a 1B's
    2,000-token prefill ended holding 1.4 GB of them (elsewhere nothing is done)."""
    if _TRIM is not None:
        _TRIM(0)


def prefill_queries(num_heads: int, num_tokens: int) -> int:
    """The prompt queries a prefill attends at once over num_tokens keys (one at least)."""
    return max(1, min(PREFILL_QUERIES, num_tokens,
                      PREFILL_BYTES // (8 * num_heads * max(num_tokens, 1))))


def prefill_spans(num_tokens: int, row_bytes: int) -> list[tuple[int, int]]:
    """The prompt's rows 0..num_tokens cut into spans of as many rows as row_bytes a row fit
    in PREFILL_WORK (PREFILL_ROWS at least), as even as whole rows allow: (start, end) each."""
    most = max(PREFILL_ROWS, PREFILL_WORK // max(row_bytes, 1))
    count = -(-num_tokens // most)
    if count == 0:
        return []
    size, longer = divmod(num_tokens, count)  # the first `longer` spans take one row more
    ends = [(k + 1) * size + min(k + 1, longer) for k in range(count)]
    return list(zip([0, *ends[:-1]], ends, strict=True))


@dataclass(frozen=True)
class Shape:
    """What the multiply-adds depend on: layers, widths and one token's per-layer work."""

    layers: int
    d_in: int
    d_out: int
    token_macs: int  # one token through one layer, outside attention: q, k, v, out, MLP
    kv_width: int | None = None  # k and v projection width when narrower than d_out (GQA)
    head_weights: int = 0  # the unembedding's vocab × d_model, held beside the layers
    held_bytes: int = 0  # every weight held as its source keeps it (0: counted as float32)
    row_bytes: int = 0  # a prompt row's widest intermediates in the prefill's spans (0: none)

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


@dataclass
class DecodedToken:
    """One decoding step as the shown layer saw it."""

    weights: Tensor  # (heads, t+1) the shown layer's weights over its cache
    context: Tensor  # (d_out,) its attention output
    cache_bytes: int  # every layer's cache once this token went through them all


@runtime_checkable
class LayerMajor(Protocol):
    """A decoder that can take every token through one layer before the next: each token's
    step is the same arithmetic on the same inputs as step() gives, but only one layer's
    weights are held at once, and each is read once."""

    def decode_by_layer(self, token_ids: list[int]) -> list[DecodedToken]:
        """Tokens 0..T-1 decoded at positions 0..T-1, the shown layer's view of each step."""
        ...


@runtime_checkable
class CachedValues(Protocol):
    """A decoder whose caches say what each value writes into the stream, so a generation's
    value view needs no second pass over prompt + answer."""

    def keep(self, tokens: int) -> int:
        """Every layer's cache cut to the tokens every layer holds, at most tokens (a step
        Ctrl-C stopped leaves some layers a token ahead): how many that is."""
        ...

    def value_norms(self) -> Tensor:
        """‖W_O^h v_j^h‖ of every layer's cached values: (layers, heads, t) float32."""
        ...


def decode_steps(decoder: DecodeStep, token_ids: list[int]) -> Iterator[DecodedToken]:
    """Tokens 0..T-1 through decoder: layer by layer where it can, else token by token."""
    if isinstance(decoder, LayerMajor):
        yield from decoder.decode_by_layer(token_ids)
        return
    for t, token_id in enumerate(token_ids):
        weights, context = decoder.step(token_id, t)  # (heads, t+1), (d_out,)
        yield DecodedToken(weights, context, decoder.cache_bytes())
