"""Top-k keys per query row for the tiled pass, without a torch.topk over every tile.

torch.topk on CPU costs more per score than the rest of a tile's softmax, so a tile only keeps
the maximum of each group of TOPK_GROUP keys (one vectorised reduction). Once a query tile has
seen all its keys, the k best groups are chosen, their keys are scored again, and the k best of
those are the row's top-k: a group holding one of the k best keys is beaten only by groups that
hold a larger key, of which there are fewer than k.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

TOPK_GROUP = 8  # keys per group


def group_stride(block_k: int) -> int:
    """Groups per key tile: group c of a tile holds its keys c, c+stride, c+2·stride, ..."""
    return -(-block_k // TOPK_GROUP)


def group_max_into(out: Tensor, scores: Tensor) -> None:
    """Write into out (heads, bq, stride) the maximum score of each key group of a tile."""
    heads, bq, stride = out.shape
    members = -(-scores.shape[-1] // stride)  # TOPK_GROUP, or fewer in a narrower last tile
    if scores.shape[-1] < members * stride:
        scores = F.pad(scores, (0, members * stride - scores.shape[-1]), value=-torch.inf)
    # Strided groups reduce across rows of a (members, stride) view, which vectorises well.
    torch.amax(scores.view(heads, bq, members, stride), dim=-2, out=out)


def top_keys(q_tile: Tensor, keys: Tensor, group_max: Tensor, query_pos: Tensor, causal: bool,
             k: int, block_k: int) -> tuple[Tensor, Tensor]:
    """Each row's k best scores, heaviest first, and their key indices (-1 past a short row)."""
    heads, bq, head_dim = q_tile.shape
    num_tokens, stride = keys.shape[1], group_stride(block_k)
    _, group = group_max.topk(min(k, group_max.shape[-1]), dim=-1)  # (heads, bq, kg)
    column = group % stride  # (heads, bq, kg) first column of each group in its tile
    offset = torch.arange(TOPK_GROUP, device=q_tile.device) * stride  # (g,)
    member = ((group // stride * block_k + column)[..., None] + offset).flatten(2)  # (h, bq, m)
    valid = ((column[..., None] + offset) < block_k).flatten(2) & (member < num_tokens)
    if causal:
        valid &= member <= query_pos[:, None]  # (heads, bq, m)
    member.clamp_(max=num_tokens - 1)
    scores = q_tile.new_empty(member.shape)  # (heads, bq, m)
    picked = q_tile.new_empty(bq * member.shape[-1], head_dim)  # (bq·m, head_dim)
    for h in range(heads):  # a head at a time keeps the gathered keys small
        torch.index_select(keys[h], 0, member[h].flatten(), out=picked)
        torch.sum(picked.view(bq, -1, head_dim).mul_(q_tile[h, :, None]), -1, out=scores[h])
    scores.masked_fill_(~valid, -torch.inf)  # (heads, bq, m)
    if scores.shape[-1] < k:  # a short causal row: pad with empty slots
        scores = F.pad(scores, (0, k - scores.shape[-1]), value=-torch.inf)
        member = F.pad(member, (0, k - member.shape[-1]), value=-1)
    best, where = scores.topk(k, dim=-1)  # each (heads, bq, k), heaviest first
    index = member.gather(-1, where).masked_fill_(best == -torch.inf, -1)  # (heads, bq, k)
    return best, index
