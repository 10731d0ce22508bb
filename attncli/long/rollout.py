"""Attention rollout (Abnar & Zuidema 2020) on the tiled path: only the rows asked for.

The naive rollout multiplies (T, T) matrices Ã_L ··· Ã_0 (core/measures.py). Here rows
`picked` of it come from walking back through the layers: v starts as those rows of the
identity and becomes v·Ã_l for l = L down to 0, each v·Ã_l built a tile of query rows at a time
from that layer's queries and keys. Memory: the rows (R, b), the layers' inputs (layers, b,
d_model) and one tile of scores; never (T, T), let alone (layers, T, T). A causal model's rows
below b read only tokens before b, so every layer stops at b = the last row picked + 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from attncli.core.attention import Attention
from attncli.core.measures import RESIDUAL, row_normalised
from attncli.core.sizes import FLOAT_BYTES
from attncli.machine import check_fits

TILE_CELLS = 2**22  # the most scores (heads · query rows · keys) one tile holds: 16 MB
Progress = Callable[[str, int, int], None]


def rollout_bytes(rows: int, prefix: int, layers: int, d_model: int) -> int:
    """What rollout_rows keeps: the rows twice, the layers' inputs, a tile's scores (×3)."""
    return FLOAT_BYTES * (2 * rows * prefix + layers * prefix * d_model + 3 * TILE_CELLS)


def check_rollout(rows: int, prefix: int, layers: int, d_model: int) -> None:
    """Refuse a rollout whose rows and stored layer inputs would not fit, before any work."""
    check_fits(rollout_bytes(rows, prefix, layers, d_model),
               f"--measure rollout keeps {rows:,} rows × {prefix:,} keys and {layers} layers' "
               f"inputs of {prefix:,} tokens", "pick fewer rows, or rows nearer the start")


def times_residual(v: Tensor, queries: Tensor, keys: Tensor, window: int | None) -> Tensor:
    """v (R, b) · Ã, Ã = 0.5·I + 0.5·(mean over heads of the causal softmax(q·kᵀ/√d)), rows
    renormalised; queries and keys (heads, b, head_dim) unscaled. Ã is built a tile of query
    rows at a time; a window hides keys window or more tokens back, as the layer does."""
    heads, num_tokens, head_dim = queries.shape
    out = torch.zeros_like(v)  # (R, b)
    tile = max(1, TILE_CELLS // max(heads * num_tokens, 1))
    scale = 1.0 / math.sqrt(head_dim)
    for i0 in range(0, num_tokens, tile):
        i1 = min(i0 + tile, num_tokens)
        reach = v[:, i0:i1]  # (R, bq) how much of each picked row rests on these queries
        if not bool(reach.any()):
            continue  # rows v does not reach add nothing
        scores = (queries[:, i0:i1] * scale) @ keys[:, :i1].transpose(1, 2)  # (heads, bq, i1)
        query_pos = torch.arange(i0, i1, device=v.device)[:, None]  # (bq, 1)
        key_pos = torch.arange(i1, device=v.device)[None, :]  # (1, i1)
        hidden = key_pos > query_pos  # (bq, i1) the future
        if window is not None:
            hidden |= key_pos <= query_pos - window  # (bq, i1) and keys out of the window
        mean = torch.softmax(scores.masked_fill_(hidden, -torch.inf), -1).mean(0)  # (bq, i1)
        step = (1 - RESIDUAL) * mean  # (bq, i1) heads averaged
        step[torch.arange(i1 - i0), torch.arange(i0, i1)] += RESIDUAL  # + 0.5·I: the residual
        out[:, :i1] += reach @ row_normalised(step)  # (R, i1)
    return out


@torch.no_grad()
def rollout_rows(layers: Sequence[tuple[Tensor, Attention]], windows: Sequence[int | None],
                 picked: Sequence[int], progress: Progress | None = None) -> Tensor:
    """Rows `picked` of Ã_L ··· Ã_0, (R, b) with b = max(picked) + 1: layers[l] is layer l's
    input (at least b tokens, (b', d_model)) and its module; windows[l] its sliding window."""
    prefix = max(picked) + 1
    v = torch.zeros(len(picked), prefix)  # (R, b) rows of the identity
    v[torch.arange(len(picked)), torch.tensor(list(picked))] = 1.0
    for done, layer in enumerate(range(len(layers) - 1, -1, -1)):
        x, module = layers[layer]
        queries, keys, _ = module.heads_qkv(x)  # each (heads, b' ≥ b, head_dim)
        v = times_residual(v, queries[:, :prefix], keys[:, :prefix],
                           windows[layer])  # (R, b) v·Ã_layer
        if progress is not None:
            progress("rollout", done + 1, len(layers))
    return v
