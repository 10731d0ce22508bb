"""Per-head summaries of attention weights: how spread out each head is and where it looks."""

from __future__ import annotations

from typing import Any, TypeVar, cast

import torch
from torch import Tensor

from attncli.core.measures import MEASURES, head_means
from attncli.errors import AttnCliError
from attncli.models.scores import SCORES
from attncli.records.heads import HeadMeasures, figure

SORT_KEYS = ("layer", "head", *MEASURES, *SCORES)
PAGE_WEIGHTS = 2**22  # `heads` keeps its exact weights for the page's ranking up to this many


def page_weights(weights: Tensor) -> Any:
    """(layers, heads, T, T) as a float32 numpy array for the page, None when too many."""
    return weights.float().cpu().numpy() if weights.numel() <= PAGE_WEIGHTS else None


Row = TypeVar("Row", bound=HeadMeasures)  # a measures row, or one with scores too


def head_measures(weights: Tensor) -> list[HeadMeasures]:
    """Measure every head of weights (layers, heads, T, T), rows in layer-then-head order.

    Row 0 is left out of every mean: the first query can only attend to itself, so its
    weights say nothing about the head.
    """
    assert weights.dim() == 4, f"expected (layers, heads, T, T), got {tuple(weights.shape)}"
    num_tokens = weights.shape[-1]
    if num_tokens < 2:
        raise AttnCliError(f"head measures need at least 2 tokens (got {num_tokens})")
    rows = weights[:, :, 1:, :].double()  # (layers, heads, T-1, T) queries 1..T-1
    query_pos = torch.arange(1, num_tokens, dtype=rows.dtype)  # (T-1,)
    key_pos = torch.arange(num_tokens, dtype=rows.dtype)  # (T,)
    # Row r is query i = r + 1: its previous token is key r, itself key r + 1.
    table = head_means(
        entropy=-torch.xlogy(rows, rows).sum(-1),  # (layers, heads, T-1); 0·log 0 = 0
        first=rows[..., 0],  # (layers, heads, T-1)
        prev=rows.diagonal(offset=0, dim1=-2, dim2=-1),  # (layers, heads, T-1)
        own=rows.diagonal(offset=1, dim1=-2, dim2=-1),  # (layers, heads, T-1)
        mean_key=rows @ key_pos,  # (layers, heads, T-1)
        query_pos=query_pos)
    values = {name: table[name].tolist() for name in MEASURES}  # plain floats from here on
    num_layers, num_heads = weights.shape[:2]
    return [
        cast(HeadMeasures, {"layer": layer, "head": head}
             | {name: values[name][layer][head] for name in MEASURES})
        for layer in range(num_layers)
        for head in range(num_heads)
    ]


def sort_measures(rows: list[Row], key: str) -> list[Row]:
    """Highest measure first (ties by layer, head); `layer` and `head` sort ascending."""
    if key not in SORT_KEYS:
        raise AttnCliError(f"unknown sort key {key!r} (choose from {', '.join(SORT_KEYS)})")
    if key == "layer":
        return sorted(rows, key=lambda r: (r["layer"], r["head"]))
    if key == "head":
        return sorted(rows, key=lambda r: (r["head"], r["layer"]))
    return sorted(rows, key=lambda r: (-figure(r, key), r["layer"], r["head"]))
