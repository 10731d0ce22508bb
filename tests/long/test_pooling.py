"""Block edges, unmasked-cell counts and row chunks of the pooled heatmaps, against brute force."""

from __future__ import annotations

import pytest
import torch

from attncli.long import pooling
from attncli.long.pooling import block_counts, block_edges, pooled_maps, row_chunks


@pytest.mark.parametrize(("n", "grid", "edges"), [
    (1, 128, [0, 1]),
    (10, 128, list(range(11))),
    (10, 4, [0, 3, 6, 9, 10]),
    (256, 128, list(range(0, 257, 2))),
    (257, 128, [*range(0, 257, 3), 257]),  # 86 blocks of 3 tokens: never more than grid
])
def test_block_edges(n: int, grid: int, edges: list[int]) -> None:
    assert block_edges(n, grid) == edges
    assert len(edges) - 1 <= grid


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("n", "grid"), [(1, 4), (10, 4), (23, 5), (64, 8)])
def test_block_counts_count_the_cells_a_query_may_see(n: int, grid: int, causal: bool) -> None:
    edges = block_edges(n, grid)
    spans = [range(edges[b], edges[b + 1]) for b in range(len(edges) - 1)]
    want = [[sum(1 for i in rows for j in cols if j <= i or not causal) for cols in spans]
            for rows in spans]
    assert block_counts(edges, causal).tolist() == want


@pytest.mark.parametrize("causal", [True, False])
def test_row_chunks_cover_every_row_once_with_the_keys_it_needs(
        causal: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pooling, "CHUNK_CELLS", 40)
    edges = block_edges(23, 5)  # blocks of 5
    chunks = row_chunks(edges, 23, causal)
    assert [i for _, rows, _ in chunks for i in rows] == list(range(23))
    for block, rows, keys in chunks:
        assert edges[block] <= rows.start and rows.stop <= edges[block + 1]
        assert keys == (min(-(-rows.stop // 5) * 5, 23) if causal else 23)
        assert len(rows) * keys <= 40 or len(rows) == 1


def test_unknown_pool_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown pool 'median'"):
        pooled_maps(lambda h, r, c: torch.zeros(len(r), len(c)), [0], 4, False, "median", 2)
