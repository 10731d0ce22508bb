"""What the tiled pass's query tiles share: its constants, its output, the pass's inputs and
each worker's reusable buffers (long/tiled.py drives the pass; long/fused.py holds the C path)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from torch import Tensor

Progress = Callable[[int, int], None]  # (done, total) units of work

BLOCK_Q = 128  # query rows per tile
BLOCK_K = 512  # key columns per tile
# Scores are taken in log2 units, s·log2 e (log2 e folded into Q's scaling), and e^x as 2^x:
# torch's exp on CPU falls to a slow path below about -87 (60× slower on masked or far-off keys),
# while its exp2 keeps its speed.
LOG2E, LN2 = 1 / math.log(2), math.log(2)
# A masked score: finite, so that 0 · (s - m) stays 0 in the entropy sum, and far enough down that
# 2^(s-m) is 0. Anything at or below MASKED_BELOW is read back as masked (-inf).
MASKED, MASKED_BELOW = -1e30, -1e29
# The running maximum m is lazy: a key tile whose scores rise at most LAZY_RISE above m is folded
# against the old m, its weights 2^(s-m) at most 2^8; only a larger rise rescales the row. The
# result is the same for any m (the sums are normalised by l at the end); m only keeps the float32
# weights in range.
LAZY_RISE = 8.0


@dataclass
class TiledOutput:
    """What one tiled pass returns; k = min(top_k, N)."""

    context: Tensor  # (heads, N, d_v) softmax(QKᵀ/√d_k) V
    lse: Tensor  # (heads, N) log Σ_j exp(s_ij) of the scaled, masked scores s
    entropy: Tensor  # (heads, N) -Σ_j w_ij ln w_ij of each row's weights
    mean_key: Tensor  # (heads, N) Σ_j w_ij·j, each row's weighted mean key position
    topk_index: Tensor  # (heads, N, k) long, heaviest key first; -1 where a causal row is short
    topk_weight: Tensor  # (heads, N, k) their weights; 0.0 where the index is -1
    # With pool_size: (heads, B, B) ln of each block's largest weight (-inf: all masked).
    pooled: Tensor | None = None


@dataclass
class Pass:
    """What every query tile of one tiled_attention call reads and writes."""

    queries: Tensor  # (heads, N, head_dim)
    keys: Tensor  # (heads, N, head_dim)
    keys_ext: Tensor  # (heads, N, head_dim + 1) [k | 1]: a query [q | -m] scores s - m at once
    # (heads, N, d_v + 1) [v | 1]: the weights' row sum rides in P·V. The fused passes sum the
    # weights themselves and take v as it is, (heads, N, d_v): a 65-column product costs 40%
    # more than a 64-column one.
    values_ext: Tensor
    causal: bool
    k: int  # top-k keys per row
    block_k: int
    out: TiledOutput
    positions: Tensor  # (N,) each key's position j as a float
    progress: Progress | None = None
    pool_size: int = 0  # tokens per side of a max-pooled block; 0: none
    fused: bool = False  # the score passes in C (long/fused.py)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Buffers:
    """One worker thread's tiles, reused from tile to tile: fresh large allocations page-fault."""

    scores: Tensor  # (heads·bq·bk,) s - m, then (s - m)·p
    weights: Tensor  # (heads·bq·bk,) p = 2^(s-m)
    tile_acc: Tensor  # (heads·bq·(d_v + 1),) one key tile's P·[V | 1]
    groups: Tensor  # (heads·bq·groups,) top-k group maxima of every key tile of a query tile
    tile_max: Tensor  # (heads·bq,) each row's largest s - m in one key tile (fused passes)


def view(buffer: Tensor, *shape: int) -> Tensor:
    """The front of a flat buffer as a contiguous tensor of the given shape."""
    return buffer[: math.prod(shape)].view(shape)
