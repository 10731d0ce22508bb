"""Group maxima and rescored top-k keys against torch.topk over whole rows of scores."""

from __future__ import annotations

import pytest
import torch

from attncli.long.topk import TOPK_GROUP, group_max_into, group_stride, top_keys
from tests.tolerance import assert_near


@pytest.mark.parametrize(("block_k", "width"), [(64, 64), (64, 40), (20, 20), (3, 3), (64, 5)])
def test_group_max_covers_each_strided_group(block_k: int, width: int) -> None:
    scores = torch.randn(2, 3, width, generator=torch.Generator().manual_seed(width))
    stride = group_stride(block_k)
    out = torch.empty(2, 3, stride)
    group_max_into(out, scores)
    for c in range(stride):
        members = list(range(c, width, stride))
        want = scores[..., members].amax(-1) if members else torch.full((2, 3), -torch.inf)
        assert torch.equal(out[..., c], want)
    assert stride * TOPK_GROUP >= block_k


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("n", "block_k", "k"), [(300, 64, 5), (50, 16, 12), (9, 4, 7)])
def test_top_keys_match_full_rows(n: int, block_k: int, k: int, causal: bool) -> None:
    gen = torch.Generator().manual_seed(n + k)
    keys = torch.randn(2, n, 8, generator=gen)  # (heads, N, head_dim)
    rows = range(n - 6, n) if not causal else range(0, 6)
    q_tile = torch.randn(2, len(rows), 8, generator=gen)  # (heads, bq, head_dim)
    query_pos = torch.tensor(list(rows))
    scores = q_tile @ keys.transpose(1, 2)  # (heads, bq, N)
    if causal:
        scores.masked_fill_(torch.arange(n)[None, :] > query_pos[:, None], -torch.inf)
    seen = query_pos.max().item() + 1 if causal else n
    tiles = range(0, seen, block_k)
    stride = group_stride(block_k)
    group_max = torch.empty(2, len(rows), len(tiles) * stride)
    for t, k0 in enumerate(tiles):
        group_max_into(group_max[..., t * stride:(t + 1) * stride],
                       scores[..., k0:min(k0 + block_k, seen)])
    best, index = top_keys(q_tile, keys, group_max, query_pos, causal, k, block_k)
    want_best, want_index = scores.topk(k, dim=-1)  # (heads, bq, k)
    assert torch.equal(index, want_index.masked_fill(want_best == -torch.inf, -1))
    assert_near(best, want_best)
