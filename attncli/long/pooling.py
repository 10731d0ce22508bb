"""A head's weights pooled into square blocks of tokens, rebuilt a few rows at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch import Tensor

from attncli.core.result import PooledMap
from attncli.long.threads import each_in_threads

CHUNK_CELLS = 2**22  # weights rebuilt at a time: 16 MB of float32
POOLS = ("max", "mean")

# weights_of(head, rows, cols) → (R, C) one head's exact weights there, 0 where masked.
WeightsOf = Callable[[int, range, range], Tensor]


def block_edges(num_tokens: int, grid: int) -> list[int]:
    """Edges of at most grid blocks of equal size (the last may be shorter) covering 0..N."""
    size = -(-num_tokens // max(grid, 1))  # ceil(N / grid)
    blocks = -(-num_tokens // size) if num_tokens else 0
    return [min(b * size, num_tokens) for b in range(blocks + 1)]


def block_size(edges: list[int]) -> int:
    """Tokens per block (the last block may hold fewer)."""
    return edges[1] - edges[0] if len(edges) > 1 else 1


def block_counts(edges: list[int], causal: bool) -> Tensor:
    """(B, B) how many cells of each block a query may see: all, or (causal) keys j ≤ i."""
    bounds = torch.tensor(edges)  # (B + 1,)
    widths = bounds[1:] - bounds[:-1]  # (B,)
    if not causal:
        return widths[:, None] * widths[None, :]  # (B, B)
    queries = torch.arange(edges[-1])  # (N,)
    # Query i sees keys 0..i: in key block c, those from the block's start up to i.
    seen = (queries[:, None] + 1 - bounds[None, :-1]).clamp(min=0)  # (N, B)
    seen = torch.minimum(seen, widths[None, :])  # (N, B)
    block_of = torch.repeat_interleave(torch.arange(len(widths)), widths)  # (N,)
    return torch.zeros(len(widths), len(widths), dtype=seen.dtype).index_add_(0, block_of, seen)


def row_chunks(edges: list[int], num_tokens: int, causal: bool) -> list[tuple[int, range, int]]:
    """(query block, rows, keys up to) for each chunk of rows inside one query block.

    A causal chunk needs keys only up to its last query, rounded up to a block edge.
    """
    size = block_size(edges)

    def keys(stop: int) -> int:
        return num_tokens if not causal else min(-(-stop // size) * size, num_tokens)

    chunks = []
    for b in range(len(edges) - 1):
        step = max(CHUNK_CELLS // max(keys(edges[b + 1]), 1), 1)
        for r0 in range(edges[b], edges[b + 1], step):
            r1 = min(r0 + step, edges[b + 1])
            chunks.append((b, range(r0, r1), keys(r1)))
    return chunks


def pooled_maps(weights_of: WeightsOf, heads: list[int], num_tokens: int, causal: bool,
                pool: str, grid: int, report: Callable[[int], None] | None = None,
                on_cpu: bool = True) -> list[PooledMap]:
    """Each head's weights pooled into blocks by their max, or their mean over unmasked cells.

    Chunks of query rows run in worker threads; report(rows) follows each chunk.
    """
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}")
    edges = block_edges(num_tokens, grid)
    blocks, size = len(edges) - 1, block_size(edges)
    pooled = {h: torch.zeros(blocks, blocks, dtype=torch.float64) for h in heads}  # (B, B) each
    lock = threading.Lock()

    def work(task: tuple[int, int, range, int], _: None) -> None:
        head, b, rows, keys = task
        weights = weights_of(head, rows, range(keys))  # (R, keys) ≥ 0, masked cells 0
        width = -(-keys // size)  # key blocks this chunk reaches
        whole = keys // size * size  # columns of the full key blocks; a last short one follows
        cells = weights[:, :whole].view(len(rows), whole // size, size)  # (R, blocks, size)
        reduce = torch.amax if pool == "max" else torch.sum
        # Weights are ≥ 0 and masked cells 0, so a 0 max only stands in for an empty block.
        part = reduce(cells, dim=(0, 2))  # (blocks,)
        if whole < keys:
            part = torch.cat([part, reduce(weights[:, whole:]).reshape(1)])  # (width,)
        part = part.to("cpu", torch.float64)  # (width,) beside the others, whatever the device
        with lock:
            row = pooled[head][b, :width]
            row.copy_(torch.maximum(row, part) if pool == "max" else row + part)
            if report is not None:
                report(len(rows))

    tasks = [(h, *chunk) for h in heads for chunk in row_chunks(edges, num_tokens, causal)]
    each_in_threads(tasks, work, lambda: None, on_cpu)
    counts = block_counts(edges, causal)  # (B, B)
    return [_pooled_map(h, edges, pooled[h], counts, pool) for h in heads]


def maps_from_blocks(log_max: Tensor, heads: list[int], edges: list[int],
                     causal: bool) -> list[PooledMap]:
    """Max-pooled maps of the heads from the tiled pass's ln block maxima (heads, B, B)."""
    counts = block_counts(edges, causal)  # (B, B)
    return [_pooled_map(h, edges, log_max[h].to("cpu", torch.float64).exp(), counts, "max")
            for h in heads]


def _pooled_map(head: int, edges: list[int], pooled: Tensor, counts: Tensor,
                pool: str) -> PooledMap:
    if pool == "mean":
        pooled = pooled / counts.clamp(min=1)
    values = [[v if n else None for v, n in zip(row, count_row, strict=True)]
              for row, count_row in zip(pooled.tolist(), counts.tolist(), strict=True)]
    return PooledMap(head=head, edges=edges, values=values, counts=counts.tolist())
