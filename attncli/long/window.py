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


@torch.no_grad()
def weights_band(queries: Tensor, keys: Tensor, lse: Tensor, width: int, causal: bool,
                 chunk: int = 1024) -> Tensor:
    """(heads, N, span) each row i's exact weights on keys i-width+1 … i (causal; span = width)
    or i-width+1 … i+width-1 (span = 2·width-1), NaN past the text's ends or masked.

    Any width × width window on the diagonal is read from it: the page's moving window.
    """
    num_tokens = queries.shape[1]
    span = width if causal else 2 * width - 1
    parts = []
    for s in range(0, num_tokens, chunk):
        e = min(s + chunk, num_tokens)
        c0, c1 = max(s - width + 1, 0), min(e + (0 if causal else width - 1), num_tokens)
        weights = weights_window(queries, keys, lse, range(s, e), range(c0, c1), causal)
        rows = torch.arange(s, e, device=queries.device)  # (R,)
        cols = rows[:, None] - (width - 1) + torch.arange(span, device=queries.device)  # (R, S)
        inside = (cols >= 0) & (cols < num_tokens)  # (R, span); causal: every col ≤ its row
        picked = weights.gather(2, (cols - c0).clamp(0, c1 - c0 - 1).expand(
            weights.shape[0], -1, -1))  # (heads, R, span)
        parts.append(picked.masked_fill_(~inside, float("nan")).cpu())
    return torch.cat(parts, 1) if parts else lse[:, :0, None].expand(-1, 0, span).cpu()
