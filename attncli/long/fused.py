"""The tiled pass's score passes in C (_fused.c), when the package was built with them.

Per key tile, torch's operations read the scores five to eight times (mask, maxima, top-k group
maxima, exp2, the entropy's product and sum, the key positions); fold_scores and exp_stats read
them twice. The C code works on contiguous float32 CPU tensors only; anything else, a build
without a C compiler, or ATTNCLI_FUSED=0 in the environment, takes the torch operations.
"""

from __future__ import annotations

import os
from types import ModuleType

import torch
from torch import Tensor

from attncli.long.online import RowState, rescale
from attncli.long.tiles import LAZY_RISE, Buffers, Pass, view

_native: ModuleType | None
try:
    from attncli.long import _fused as _native
except ImportError:  # built without a C compiler: the torch operations do it all
    _native = None

ENABLED = _native is not None and os.environ.get("ATTNCLI_FUSED", "1") != "0"


def usable(*tensors: Tensor) -> bool:
    """Whether the C passes can take these tensors: float32, on the CPU, and enabled."""
    return ENABLED and all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


def _address(t: Tensor | None, numel: int, dtype: torch.dtype = torch.float32) -> int:
    """t's data as the C code reads it (0 for None), once t is what it must be: the C code
    trusts these, so a wrong one would read or write past the end."""
    if t is None:
        return 0
    if t.dtype != dtype or t.device.type != "cpu" or t.numel() != numel or not t.is_contiguous():
        raise ValueError(f"the fused passes need contiguous {dtype} CPU tensors of {numel} "
                         f"elements (got {t.dtype}, {t.device}, {tuple(t.shape)})")
    return int(t.data_ptr())


def fold_scores(scores: Tensor, k0: int, first_query: int | None, row_max: Tensor,
                tile_max: Tensor, top_val: Tensor | None, top_idx: Tensor | None,
                row_block: Tensor | None = None, pool_size: int = 0) -> None:
    """Over a key tile's scores (heads, bq, bk) of s - m, keys k0..: mask the keys after each
    query if first_query (the tile's first query row) is given; write each row's largest s - m
    into tile_max (heads, bq); fold the keys into each row's running top-k, top_val
    (heads, bq, k) in absolute log2 units (s - m + row_max) and top_idx (heads, bq, k); and raise
    row_block (heads, bq, B) to each row's largest absolute score per block of pool_size keys."""
    assert _native is not None
    heads, bq, width = scores.shape
    rows = heads * bq
    k = 0 if top_val is None or top_idx is None else top_val.shape[-1]
    blocks = 0 if row_block is None else row_block.shape[-1]
    _native.fold_scores(_address(scores, rows * width), rows, width, k0, bq,
                        -1 if first_query is None else first_query, _address(row_max, rows),
                        _address(tile_max, rows), _address(top_val if k else None, rows * k),
                        _address(top_idx if k else None, rows * k, torch.long), k,
                        _address(row_block, rows * blocks), blocks,
                        pool_size if row_block is not None else 0)


def exp_stats(scores: Tensor, k0: int, shift: Tensor | None, plogp: Tensor, key_sum: Tensor,
              row_sum: Tensor) -> None:
    """Overwrite scores (heads, bq, bk) with the weights 2^x, x = scores - shift, and add each
    row's Σ 2^x·x to plogp, Σ 2^x·j (j = k0, k0+1, ...) to key_sum and Σ 2^x to row_sum, all
    (heads, bq)."""
    assert _native is not None
    heads, bq, width = scores.shape
    rows = heads * bq
    _native.exp_stats(_address(scores, rows * width), rows, width, k0, _address(shift, rows),
                      _address(plogp, rows), _address(key_sum, rows), _address(row_sum, rows))


def exp2(x: Tensor) -> Tensor:
    """2^x as exp_stats computes it (for the tests)."""
    assert _native is not None
    x = x.contiguous()
    out = torch.empty_like(x)
    _native.exp2_array(_address(x, x.numel()), _address(out, x.numel()), x.numel())
    return out


def fold_key_tiles(job: Pass, rows: slice, buffers: Buffers, state: RowState, starts: range,
                   row_block: Tensor | None) -> Tensor:
    """The key-tile loop of tiled._attend_query_tile with the score passes in C, over the key
    tiles starting at starts: each tile's maxima are known, so m moves as soon as a tile rises
    past LAZY_RISE and no tile is folded twice; the top-k is kept as the tiles stream by, in
    place of the group maxima; the weights overwrite the scores and go into P·V without a column
    of ones. Returns each row's top-k key indices (heads, bq, k), -1 where none, unsorted by
    their exact scores (rescored sorts them)."""
    heads, bq = state.row_max.shape
    top_val = state.row_max.new_full((heads, bq, job.k), -torch.inf)  # (h, bq, k) log2, absolute
    top_idx = torch.full((heads, bq, job.k), -1, dtype=torch.long)  # (heads, bq, k)
    tile_max = view(buffers.tile_max, heads, bq)  # (heads, bq)
    for tile, k0 in enumerate(starts):
        k1 = min(k0 + job.block_k, rows.stop if job.causal else job.keys.shape[1])
        scores = view(buffers.scores, heads, bq, k1 - k0)  # (heads, bq, bk)
        torch.matmul(state.q_ext, job.keys_ext[:, k0:k1].transpose(1, 2), out=scores)  # s - m
        diagonal = job.causal and k1 - 1 > rows.start
        fold_scores(scores, k0, rows.start if diagonal else None, state.row_max, tile_max,
                    top_val if job.k else None, top_idx if job.k else None, row_block,
                    job.pool_size)
        shift = None  # (heads, bq) how far m moves up with this tile
        if tile == 0:  # m = 0 so far, and nothing to rescale: m becomes each row's maximum
            shift = tile_max.clone()
            state.row_max.copy_(shift)
            state.q_ext[..., -1] = -shift
        elif bool((tile_max > LAZY_RISE).any()):
            shift = tile_max.clamp_min(0)  # (heads, bq) rows that rose move m to their maximum
            rescale(state, shift)
        assert state.row_sum is not None
        exp_stats(scores, k0, shift, state.plogp, state.key_sum, state.row_sum)
        state.acc.baddbmm_(scores, job.values_ext[:, k0:k1])  # (h, bq, d_v) scores now 2^(s-m)
    return top_idx


def rescored(q_tile: Tensor, keys: Tensor, top_idx: Tensor) -> tuple[Tensor, Tensor]:
    """Each row's top-k keys top_idx (heads, bq, k) scored again from q·k alone (q_tile
    (heads, bq, head_dim) in log2 units, keys (heads, N, head_dim)), heaviest first; an empty
    slot (index -1) scores -inf and stays last. Returns (best, index), each (heads, bq, k)."""
    assert _native is not None
    heads, bq, k = top_idx.shape
    q_tile, index = q_tile.contiguous(), top_idx.clone()  # (heads, bq, hd), (heads, bq, k)
    head_dim = q_tile.shape[-1]
    best = q_tile.new_empty(heads, bq, k)  # (heads, bq, k)
    if keys.dtype != torch.float32 or keys.device.type != "cpu" or keys.dim() != 3 \
            or keys.shape[0] != heads or keys.shape[2] != head_dim:
        raise ValueError(f"rescored: keys {tuple(keys.shape)} {keys.dtype} do not match the "
                         f"queries ({heads}, ·, {head_dim})")
    if bool((index >= keys.shape[1]).any()):
        raise ValueError("rescored: a key index is past the keys")
    _native.rescore(_address(q_tile, heads * bq * head_dim), int(keys.data_ptr()),
                    *keys.stride(), bq, head_dim, _address(index, heads * bq * k, torch.long),
                    _address(best, heads * bq * k), heads * bq, k)
    return best, index
