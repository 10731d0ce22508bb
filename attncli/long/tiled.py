"""Tiled ("flash") attention: exact softmax attention in memory bounded by the tile size.

The naive path keeps several (heads, N, N) tensors; here a query tile meets one key tile at a
time and an online softmax carries each row's running maximum, sum and weighted values, so a
head holds two block_q × block_k tiles per worker thread (and, for top-k, one maximum per 8
keys of its query tile's rows). The same pass yields each row's log-sum-exp (from which any
window of the weights can be rebuilt exactly), its entropy and its top-k keys.

Per key tile the work is two matrix products and four passes over the scores: the products
carry what they can (the shift by m in [q | -m]·[k | 1], the row sum in P·[v | 1]), the scores
come out in log2 units for exp2, and m only moves when a tile rises well above it (online.py).
Where the package was built with its C passes (long/fused.py), those four passes and the top-k's
group maxima are two passes in C, and the values go in without the column of ones.
"""

from __future__ import annotations

import math
import threading

import torch
from torch import Tensor

from attncli.errors import AttnCliError
from attncli.long import fused
from attncli.long.blockmax import block_max_into, fold_rows
from attncli.long.online import RowState, finish_rows, rescale
from attncli.long.threads import each_in_threads
from attncli.long.tiles import (
    BLOCK_K,
    BLOCK_Q,
    LAZY_RISE,
    LN2,
    LOG2E,
    MASKED,
    MASKED_BELOW,
    Buffers,
    Pass,
    Progress,
    TiledOutput,
    view,
)
from attncli.long.topk import group_max_into, group_stride, top_keys


def _check_inputs(queries: Tensor, keys: Tensor, values: Tensor, top_k: int, block_q: int,
                  block_k: int, dropout: float) -> None:
    if dropout > 0:
        raise AttnCliError(
            f"dropout is not supported on the tiled path (got dropout={dropout}); use --impl naive"
        )
    shapes = [tuple(t.shape) for t in (queries, keys, values)]
    if queries.dim() != 3 or shapes[0] != shapes[1] or shapes[2][:-1] != shapes[0][:-1]:
        raise AttnCliError(
            "queries and keys must share one (heads, N, head_dim) shape, and values be "
            f"(heads, N, d_v) (got {', '.join(map(str, shapes))})"
        )
    if top_k < 0 or block_q < 1 or block_k < 1:
        raise AttnCliError(
            "top_k must be ≥ 0 and block sizes ≥ 1 "
            f"(got top_k={top_k}, block_q={block_q}, block_k={block_k})"
        )


# no_grad rather than inference_mode: the context may go on into out_proj outside any guard.
@torch.no_grad()
def tiled_attention(queries: Tensor, keys: Tensor, values: Tensor, causal: bool,
                    top_k: int = 5, block_q: int = BLOCK_Q, block_k: int = BLOCK_K,
                    dropout: float = 0.0, progress: Progress | None = None,
                    pool_size: int = 0) -> TiledOutput:
    """Exact scaled dot-product attention over (heads, N, head_dim) inputs, one tile at a time.

    progress(done, total) is called after each query tile, from the worker threads (one at a
    time), with the score cells attended so far and in all. pool_size > 0 also max-pools the
    weights into blocks of pool_size × pool_size tokens (out.pooled, as logarithms).
    """
    _check_inputs(queries, keys, values, top_k, block_q, block_k, dropout)
    heads, num_tokens, head_dim = queries.shape
    k = min(top_k, num_tokens)
    out = TiledOutput(
        context=values.new_empty(heads, num_tokens, values.shape[-1]),  # (heads, N, d_v)
        lse=queries.new_empty(heads, num_tokens),  # (heads, N)
        entropy=queries.new_empty(heads, num_tokens),  # (heads, N)
        mean_key=queries.new_empty(heads, num_tokens),  # (heads, N)
        topk_index=torch.empty(heads, num_tokens, k, dtype=torch.long,
                               device=queries.device),  # (heads, N, k)
        topk_weight=queries.new_empty(heads, num_tokens, k),  # (heads, N, k)
    )
    if pool_size > 0:
        blocks = -(-num_tokens // pool_size)
        out.pooled = queries.new_full((heads, blocks, blocks), -torch.inf)  # (heads, B, B)
    if num_tokens == 0:
        return out
    positions = torch.arange(num_tokens, dtype=queries.dtype, device=queries.device)  # (N,)
    ones = queries.new_ones(heads, num_tokens, 1)  # (heads, N, 1)
    in_c = fused.usable(queries, keys, values)
    job = Pass(queries, keys, torch.cat([keys, ones], -1),  # (heads, N, head_dim + 1)
                values if in_c else torch.cat([values, ones.to(values.dtype)], -1),
                causal, k, min(block_k, num_tokens), out, positions, progress, pool_size, in_c)
    tiles = [slice(q0, min(q0 + block_q, num_tokens)) for q0 in range(0, num_tokens, block_q)]
    # Causal tiles near the end see the most keys: hand them out first so threads end together.
    _run_tiles(job, tiles[::-1], min(block_q, num_tokens))
    if bool((out.lse <= MASKED_BELOW).any()):
        # A row whose largest score is down where masked keys are put: its keys would read as
        # masked. Only inputs of magnitude ~1e15 get there.
        raise AttnCliError("the scores reach below -1e29: the inputs are too large for float32")
    return out


def _run_tiles(job: Pass, tiles: list[slice], block_q: int) -> None:
    """Attend every query tile; on CPU, worker threads take one tile at a time."""
    lock = threading.Lock()
    done, total = 0, sum(_cells(job, rows) for rows in tiles)

    def buffers() -> Buffers:
        # e^x under about -87 is a float32 denormal, 3-4× slower to make and use unless this
        # thread flushes it to 0 (a weight below 1.2e-38, invisible beside the row maximum's 1).
        torch.set_flush_denormal(True)
        heads, width = job.queries.shape[0], job.values_ext.shape[-1]
        cells = heads * block_q * job.block_k  # heads · bq · bk
        key_tiles = -(-job.keys.shape[1] // job.block_k)
        groups = heads * block_q * key_tiles * group_stride(job.block_k) if job.k else 0
        new = job.queries.new_empty
        if job.fused:  # the weights overwrite the scores; no tile of P·V, no group maxima
            return Buffers(new(cells), new(0), new(0), new(0), new(heads * block_q))
        return Buffers(new(cells), new(cells), job.values_ext.new_empty(heads * block_q * width),
                        new(groups), new(0))

    def attend(rows: slice, state: Buffers) -> None:
        nonlocal done
        _attend_query_tile(job, rows, state)
        if job.progress is not None:
            with lock:  # one caller at a time, with a count that only grows
                done += _cells(job, rows)
                job.progress(done, total)

    try:
        each_in_threads(tiles, attend, buffers, on_cpu=job.queries.device.type == "cpu")
    finally:
        torch.set_flush_denormal(False)  # this thread may have been a worker: back to the default


def _cells(job: Pass, rows: slice) -> int:
    """Score cells one query tile attends: every key, or (causal) those up to its last query."""
    return (rows.stop - rows.start) * (rows.stop if job.causal else job.keys.shape[1])


def _attend_query_tile(job: Pass, rows: slice, buffers: Buffers) -> None:
    """Stream every key tile a query tile may see through the online softmax; fill out[rows]."""
    # Scaling Q by log2 e/√d_k once scales every score: the softmax does not saturate as d_k grows,
    # and the scores come out in log2 units.
    q_tile = job.queries[:, rows] * (LOG2E / math.sqrt(job.queries.shape[-1]))  # (h, bq, hd)
    heads, bq, _ = q_tile.shape
    state = RowState(
        q_ext=torch.cat([q_tile, q_tile.new_zeros(heads, bq, 1)], -1),  # (h, bq, hd + 1); m = 0
        row_max=q_tile.new_zeros(heads, bq),  # (heads, bq)
        plogp=q_tile.new_zeros(heads, bq),  # (heads, bq)
        key_sum=q_tile.new_zeros(heads, bq),  # (heads, bq)
        acc=q_tile.new_zeros(heads, bq, job.values_ext.shape[-1]),  # (h, bq, d_v + 1) or d_v
        row_sum=q_tile.new_zeros(heads, bq) if job.fused else None,  # (heads, bq)
    )
    # Causal: key tiles starting at or after the last query are wholly above the diagonal.
    starts = range(0, rows.stop if job.causal else job.keys.shape[1], job.block_k)
    pooled = job.out.pooled
    row_block = None if pooled is None else q_tile.new_full((heads, bq, pooled.shape[-1]),
                                                            -torch.inf)  # (heads, bq, B)
    # What the top-k is chosen from: each row's k key indices (fused), or the group maxima.
    found = (fused.fold_key_tiles if job.fused else _fold_key_tiles)(job, rows, buffers, state,
                                                                     starts, row_block)
    lse2 = finish_rows(state, rows, job.out)  # (heads, bq) in log2 units
    if row_block is not None and pooled is not None:
        row_block.masked_fill_(row_block <= MASKED_BELOW, -torch.inf)  # (heads, bq, B)
        fold_rows(pooled, row_block.mul_(LN2), lse2 * LN2, rows, job.pool_size, job.lock)
    if job.k:
        if job.fused:
            best, index = fused.rescored(q_tile, job.keys, found)  # each (heads, bq, k)
        else:
            query_pos = torch.arange(rows.start, rows.stop, device=q_tile.device)  # (bq,)
            best, index = top_keys(q_tile, job.keys, found, query_pos, job.causal, job.k,
                                   job.block_k)  # best in log2 units
        job.out.topk_index[:, rows] = index
        job.out.topk_weight[:, rows] = (best - lse2[..., None]).exp2()  # (h, bq, k); 2^-inf = 0


def _fold_key_tiles(job: Pass, rows: slice, buffers: Buffers, state: RowState, starts: range,
                    row_block: Tensor | None) -> Tensor:
    """The key-tile loop with torch operations; returns the top-k's group maxima of every key
    tile (heads, bq, tiles · stride), empty without top-k."""
    heads, bq = state.row_max.shape
    num_tokens, stride = job.keys.shape[1], group_stride(job.block_k)
    group_max = view(buffers.groups, heads, bq, len(starts) * stride if job.k else 0)
    for tile, k0 in enumerate(starts):
        # Causal: the diagonal tile stops at the last query; later keys would all be masked.
        keys = range(k0, min(k0 + job.block_k, rows.stop if job.causal else num_tokens))
        groups = group_max[..., tile * stride:(tile + 1) * stride] if job.k else None
        # The first tile sets m from its own maxima; without top-k a later tile is only measured
        # (one more pass) if its weights against the old m come out too large.
        if not _fold_key_tile(job, state, rows, keys, buffers, groups, row_block, tile == 0):
            _fold_key_tile(job, state, rows, keys, buffers, groups, row_block, False, True)
    return group_max


def _fold_key_tile(job: Pass, state: RowState, rows: slice, keys: range, buffers: Buffers,
                   groups: Tensor | None, row_block: Tensor | None, first: bool,
                   measure: bool = False) -> bool:
    """Fold the key tile keys into the running softmax (first: the query tile's first, which sets
    m). Returns False, having changed nothing the next call depends on, if its weights against the
    lazy m came out too large to keep: the caller folds it again with measure=True."""
    heads, bq = state.row_max.shape
    k0, k1 = keys.start, keys.stop
    scores, weights = (view(b, heads, bq, k1 - k0) for b in (buffers.scores, buffers.weights))
    # [q | -m]·[k | 1] = s - m: the shift rides in the product instead of a pass of its own.
    torch.matmul(state.q_ext, job.keys_ext[:, k0:k1].transpose(1, 2), out=scores)  # (h,bq,bk)
    if job.causal and k1 - 1 > rows.start:
        # Query i may only look at keys 0..i: future keys get weight 2^(MASKED - m) = 0. Only the
        # keys from the tile's first query on can be future ones.
        lo = max(rows.start - k0, 0)
        key_pos = torch.arange(k0 + lo, k1, device=scores.device)  # (bk - lo,)
        query_pos = torch.arange(rows.start, rows.stop, device=scores.device)  # (bq,)
        scores[..., lo:].masked_fill_(key_pos[None, :] > query_pos[:, None], MASKED)
    tile_max = None  # (heads, bq) each row's largest s - m in this tile, where measured
    if groups is not None:
        group_max_into(groups, scores)  # (heads, bq, stride)
        tile_max = groups.amax(dim=-1)  # (heads, bq) the same maximum, from 1/8 the cells
        groups.add_(state.row_max[..., None])  # absolute scores, comparable across key tiles
    elif measure or first:
        tile_max = scores.amax(dim=-1)  # (heads, bq)
    if row_block is not None:
        block_max_into(row_block, scores, k0, job.pool_size, state.row_max)
    if first:  # m = 0 so far, and nothing to rescale: m becomes each row's maximum
        assert tile_max is not None
        state.row_max.copy_(tile_max)
        state.q_ext[..., -1] = -tile_max
        scores.sub_(tile_max[..., None])  # (heads, bq, bk) s - m
    elif tile_max is not None and (measure or bool((tile_max > LAZY_RISE).any())):
        shift = tile_max.clamp_min(0)  # (heads, bq) rows that rose move m to their new maximum
        rescale(state, shift)
        scores.sub_(shift[..., None])  # (heads, bq, bk) s - m for the new m
    p = torch.exp2(scores, out=weights)  # (heads, bq, bk) 2^(s-m); masked 0
    tile_acc = view(buffers.tile_acc, heads, bq, job.values_ext.shape[-1])  # (h, bq, d_v + 1)
    torch.bmm(p, job.values_ext[:, k0:k1], out=tile_acc)  # (heads, bq, d_v + 1)
    if tile_max is None and not bool((tile_acc[..., -1] <= 2**LAZY_RISE * (k1 - k0)).all()):
        return False  # some weight rose past 2^8 (or overflowed): measure this tile's maxima
    state.acc.add_(tile_acc)  # (heads, bq, d_v + 1)
    state.key_sum.add_(p @ job.positions[k0:k1])  # (heads, bq)
    state.plogp.add_(scores.mul_(p).sum(dim=-1))  # (heads, bq) Σ p·(s - m)
    return True
