"""Weights rebuilt exactly for any window of rows and keys, from the tiled pass's lse."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attncli.errors import AttnCliError


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
