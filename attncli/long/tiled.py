"""Tiled ("flash") attention: exact softmax attention in memory bounded by the tile size.

The naive path keeps several (heads, N, N) tensors; here a query tile meets one key tile at a
time and an online softmax carries each row's running maximum, sum and weighted values, so a
head holds two block_q × block_k tiles per worker thread (and, for top-k, one maximum per 8
keys of its query tile's rows). The same pass yields each row's log-sum-exp (from which any
window of the weights can be rebuilt exactly), its entropy and its top-k keys.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attncli.errors import AttnCliError
from attncli.long.blockmax import block_max_into, fold_rows
from attncli.long.threads import each_in_threads
from attncli.long.topk import group_max_into, group_stride, top_keys

Progress = Callable[[int, int], None]  # (done, total) units of work

BLOCK_Q = 128  # query rows per tile
BLOCK_K = 512  # key columns per tile
# e^x is taken as 2^(x·log2 e): torch's exp2 runs about twice as fast as its exp on CPU.
LOG2E = 1 / math.log(2)
# A masked score: finite, so that 0 · (s - m) stays 0 in the entropy sum, and far enough down that
# e^(s-m) is 0. Anything at or below MASKED_BELOW is read back as masked (-inf).
MASKED, MASKED_BELOW = -1e30, -1e29
# Rescaling by α = e^(m_old - m_new): the first tile's m_old is -inf; the floor keeps
# (m_old - m_new)·l_old at 0 instead of -inf · 0.
SHIFT_FLOOR = -80.0


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
class _Pass:
    """What every query tile of one tiled_attention call reads and writes."""

    queries: Tensor  # (heads, N, head_dim)
    keys: Tensor  # (heads, N, head_dim)
    values: Tensor  # (heads, N, d_v)
    causal: bool
    k: int  # top-k keys per row
    block_k: int
    out: TiledOutput
    positions: Tensor  # (N,) each key's position j as a float
    progress: Progress | None = None
    pool_size: int = 0  # tokens per side of a max-pooled block; 0: none
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _RowState:
    """Online-softmax state of one query tile, relative to the running row maximum."""

    row_max: Tensor  # (heads, bq) m: largest score seen so far
    row_sum: Tensor  # (heads, bq) l = Σ e^(s-m)
    plogp: Tensor  # (heads, bq) Σ e^(s-m)·(s-m), for the entropy
    key_sum: Tensor  # (heads, bq) Σ e^(s-m)·j, for the mean key position
    acc: Tensor  # (heads, bq, d_v) Σ e^(s-m)·v


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
    job = _Pass(queries, keys, values, causal, k, min(block_k, num_tokens), out, positions,
                progress, pool_size)
    tiles = [slice(q0, min(q0 + block_q, num_tokens)) for q0 in range(0, num_tokens, block_q)]
    # Causal tiles near the end see the most keys: hand them out first so threads end together.
    _run_tiles(job, tiles[::-1], min(block_q, num_tokens))
    if bool((out.lse <= MASKED_BELOW).any()):
        # A row whose largest score is down where masked keys are put: its keys would read as
        # masked. Only inputs of magnitude ~1e15 get there.
        raise AttnCliError("the scores reach below -1e29: the inputs are too large for float32")
    return out


def _run_tiles(job: _Pass, tiles: list[slice], block_q: int) -> None:
    """Attend every query tile; on CPU, worker threads take one tile at a time."""
    lock = threading.Lock()
    done, total = 0, sum(_cells(job, rows) for rows in tiles)

    def buffers() -> tuple[Tensor, Tensor, Tensor]:
        # e^x under about -87 is a float32 denormal, 3-4× slower to make and use unless this
        # thread flushes it to 0 (a weight below 1.2e-38, invisible beside the row maximum's 1).
        torch.set_flush_denormal(True)
        # Buffers per thread, reused from tile to tile: fresh large allocations page-fault.
        cells = job.queries.shape[0] * block_q * job.block_k  # heads · bq · bk
        key_tiles = -(-job.keys.shape[1] // job.block_k)
        groups = cells // job.block_k * key_tiles * group_stride(job.block_k) if job.k else 0
        return (job.queries.new_empty(cells),  # scores
                job.queries.new_empty(cells),  # weights
                job.queries.new_empty(groups))  # top-k group maxima

    def attend(rows: slice, state: tuple[Tensor, Tensor, Tensor]) -> None:
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


def _cells(job: _Pass, rows: slice) -> int:
    """Score cells one query tile attends: every key, or (causal) those up to its last query."""
    return (rows.stop - rows.start) * (rows.stop if job.causal else job.keys.shape[1])


def _attend_query_tile(job: _Pass, rows: slice, buffers: tuple[Tensor, Tensor, Tensor]) -> None:
    """Stream every key tile a query tile may see through the online softmax; fill out[rows]."""
    # Scaling Q by 1/√d_k once scales every score: the softmax does not saturate as d_k grows.
    q_tile = job.queries[:, rows] * (1.0 / math.sqrt(job.queries.shape[-1]))  # (h, bq, hd)
    heads, bq, head_dim = q_tile.shape
    state = _RowState(
        row_max=q_tile.new_full((heads, bq), -torch.inf),  # (heads, bq)
        row_sum=q_tile.new_zeros(heads, bq),  # (heads, bq)
        plogp=q_tile.new_zeros(heads, bq),  # (heads, bq)
        key_sum=q_tile.new_zeros(heads, bq),  # (heads, bq)
        acc=q_tile.new_zeros(heads, bq, job.values.shape[-1]),  # (heads, bq, d_v)
    )
    query_pos = torch.arange(rows.start, rows.stop, device=q_tile.device)  # (bq,)
    num_tokens, stride = job.keys.shape[1], group_stride(job.block_k)
    # Causal: key tiles starting at or after the last query are wholly above the diagonal.
    starts = range(0, rows.stop if job.causal else num_tokens, job.block_k)
    group_max = _view(buffers[2], heads, bq, len(starts) * stride if job.k else 0)  # per group
    pooled = job.out.pooled
    row_block = None if pooled is None else q_tile.new_full((heads, bq, pooled.shape[-1]),
                                                            -torch.inf)  # (heads, bq, B)
    for tile, k0 in enumerate(starts):
        # Causal: the diagonal tile stops at the last query; later keys would all be masked.
        k1 = min(k0 + job.block_k, rows.stop if job.causal else num_tokens)
        scores, weights = (_view(b, heads, bq, k1 - k0) for b in buffers[:2])  # (heads, bq, bk)
        torch.matmul(q_tile, job.keys[:, k0:k1].transpose(1, 2), out=scores)  # (heads, bq, bk)
        if job.causal and k1 - 1 > rows.start:
            # Query i may only look at keys 0..i: future keys get weight e^(MASKED - m) = 0.
            key_pos = torch.arange(k0, k1, device=q_tile.device)  # (bk,)
            scores.masked_fill_(key_pos[None, :] > query_pos[:, None], MASKED)  # (h, bq, bk)
        tile_max = None
        if job.k:
            groups = group_max[..., tile * stride:(tile + 1) * stride]  # (heads, bq, stride)
            group_max_into(groups, scores)
            tile_max = groups.amax(dim=-1)  # (heads, bq) the same maximum, from 1/8 the cells
        if row_block is not None:
            block_max_into(row_block, scores, k0, job.pool_size)
        _online_update(state, scores, weights, job.values[:, k0:k1], job.positions[k0:k1],
                       tile_max)
    lse = _finish_rows(state, rows, job.out)  # (heads, bq)
    if row_block is not None and job.out.pooled is not None:
        row_block.masked_fill_(row_block <= MASKED_BELOW, -torch.inf)  # (heads, bq, B)
        fold_rows(job.out.pooled, row_block, lse, rows, job.pool_size, job.lock)
    if job.k:
        best, index = top_keys(q_tile, job.keys, group_max, query_pos, job.causal, job.k,
                               job.block_k)
        job.out.topk_index[:, rows] = index
        job.out.topk_weight[:, rows] = (best - lse[..., None]).exp()  # (h, bq, k); e^-inf = 0


def _online_update(state: _RowState, scores: Tensor, weights: Tensor, values: Tensor,
                   positions: Tensor, tile_max: Tensor | None = None) -> None:
    """Fold one key tile into the running softmax; overwrites scores and weights. tile_max:
    each row's largest score in this tile (heads, bq), when already known."""
    if tile_max is None:
        tile_max = scores.amax(dim=-1)  # (heads, bq)
    new_max = torch.maximum(state.row_max, tile_max)  # (heads, bq)
    # Old terms were relative to the old maximum: rescale them by α = e^(m_old - m_new).
    shift = (state.row_max - new_max).clamp_min_(SHIFT_FLOOR)  # (heads, bq)
    alpha = shift.exp()  # (heads, bq)
    shifted = scores.sub_(new_max[..., None])  # (heads, bq, bk) s - m; masked keys about -1e30
    p = torch.mul(shifted, LOG2E, out=weights).exp2_()  # (heads, bq, bk) e^(s-m); masked 0
    # Σ p·(s - m_new) = α·(Σ p_old·(s - m_old) + shift·l_old) for the keys already seen.
    plogp = shifted.mul_(p).sum(dim=-1)  # (heads, bq)
    state.plogp = alpha * (state.plogp + shift * state.row_sum) + plogp
    state.row_sum = alpha * state.row_sum + p.sum(dim=-1)  # (heads, bq)
    state.key_sum = alpha * state.key_sum + p @ positions  # (heads, bq)
    state.acc.mul_(alpha[..., None]).baddbmm_(p, values)  # (heads, bq, d_v)
    state.row_max = new_max


def _finish_rows(state: _RowState, rows: slice, out: TiledOutput) -> Tensor:
    """Normalise a query tile's running sums into out[rows]; returns its lse (heads, bq)."""
    log_sum = state.row_sum.log()  # (heads, bq)
    lse = state.row_max + log_sum  # (heads, bq)
    out.lse[:, rows] = lse
    # H = -Σ w ln w with w = e^(s-m)/l, so H = ln l - Σ e^(s-m)·(s-m) / l.
    out.entropy[:, rows] = log_sum - state.plogp / state.row_sum
    out.mean_key[:, rows] = state.key_sum / state.row_sum
    out.context[:, rows] = state.acc / state.row_sum[..., None]  # (heads, bq, d_v)
    return lse


def _view(buffer: Tensor, *shape: int) -> Tensor:
    """The front of a flat buffer as a contiguous tensor of the given shape."""
    return buffer[: math.prod(shape)].view(shape)


@torch.no_grad()
def weights_window(queries: Tensor, keys: Tensor, lse: Tensor, rows: range, cols: range,
                   causal: bool) -> Tensor:
    """Weights[:, rows, cols] rebuilt exactly from the stored lse; masked cells are 0."""
    num_tokens = queries.shape[1]
    row_idx = _range_index(rows, num_tokens, "rows", queries.device)  # (R,)
    col_idx = _range_index(cols, num_tokens, "cols", queries.device)  # (C,)
    # Same scaling as the tiled pass, so a row of weights sums to 1 against its stored lse.
    q_rows = queries.index_select(1, row_idx) * (1.0 / math.sqrt(queries.shape[-1]))  # (h, R, d)
    k_cols = keys.index_select(1, col_idx)  # (heads, C, head_dim)
    scores = q_rows @ k_cols.transpose(1, 2)  # (heads, R, C)
    weights = scores.sub_(lse.index_select(1, row_idx)[..., None]).exp_()  # (heads, R, C)
    if causal and len(cols):
        # Only keys after the first query can be masked: fill those columns, not every one.
        first = 0
        if cols.step == 1 and len(rows):
            first = min(max(min(rows) + 1 - cols.start, 0), len(cols))
        tail = weights[..., first:]  # (heads, R, C - first)
        tail.masked_fill_(col_idx[first:][None, :] > row_idx[:, None], 0.0)
    return weights


def _range_index(span: range, num_tokens: int, name: str, device: torch.device) -> Tensor:
    """The positions of span as a long tensor, after checking they lie in 0..N-1."""
    if len(span) and (min(span) < 0 or max(span) >= num_tokens):
        raise AttnCliError(
            f"{name} must lie within 0..{num_tokens - 1} (got {name}={span!r}, N={num_tokens})"
        )
    return torch.arange(span.start, span.stop, span.step, device=device)  # (len(span),)
