"""Max-pooled weights in the tiled pass: each block of queries × keys, its largest weight.

Since w_ij = e^(s_ij - lse_i), the largest weight of a block is e^(max over its cells of
s_ij - lse_i): a query tile keeps each row's largest score per key block as the key tiles stream
by, subtracts the row's lse once it is known, and keeps the largest per query block. No score is
computed twice and no exp is taken per weight.
"""

from __future__ import annotations

import threading

import torch
from torch import Tensor


def block_max_into(row_block: Tensor, scores: Tensor, k0: int, size: int,
                   offset: Tensor) -> None:
    """Fold a key tile's scores (heads, bq, bk), keys k0.., into row_block (heads, bq, B), each
    row's maxima raised by its offset (heads, bq): the tiled pass's scores are s - m."""
    k1 = k0 + scores.shape[-1]
    first, last = -(-k0 // size), k1 // size  # the blocks wholly inside the tile: first..last-1
    if last > first:
        # One reduction over a (blocks, size) view instead of one per block.
        lo = first * size - k0
        whole = scores[..., lo:lo + (last - first) * size].unflatten(-1, (last - first, size))
        inside = row_block[..., first:last]  # (heads, bq, last - first)
        torch.maximum(inside, whole.amax(dim=-1) + offset[..., None], out=inside)
    else:
        first = last = k0 // size  # no whole block: every block the tile touches is cut
    # The blocks the tile cuts: one before the whole ones (if k0 is not on an edge), and after.
    for b in (*range(k0 // size, first), *range(last, -(-k1 // size))):
        lo, hi = max(b * size, k0) - k0, min((b + 1) * size, k1) - k0
        top = scores[..., lo:hi].amax(dim=-1) + offset  # (heads, bq)
        torch.maximum(row_block[..., b], top, out=row_block[..., b])


def fold_rows(pooled: Tensor, row_block: Tensor, lse: Tensor, rows: slice, size: int,
              lock: threading.Lock) -> None:
    """Merge a finished query tile into pooled (heads, B, B): ln of each block's largest weight.

    row_block (heads, bq, B) holds the rows' largest scores per key block, lse (heads, bq) theirs.
    """
    log_weights = row_block - lse[..., None]  # (heads, bq, B) ln of each row's largest weight
    for b in range(rows.start // size, -(-rows.stop // size)):
        lo, hi = max(b * size, rows.start) - rows.start, min((b + 1) * size, rows.stop) - rows.start
        part = log_weights[:, lo:hi].amax(dim=1)  # (heads, B)
        with lock:  # tiles in other threads may share this query block
            torch.maximum(pooled[:, b], part, out=pooled[:, b])
