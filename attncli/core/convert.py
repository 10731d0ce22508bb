"""The one place tensors become plain Python data for a Result."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from attncli.errors import AttnCliError


def plain(t: Tensor | None) -> Any:
    """Nested Python lists of floats; -inf (a masked score) becomes None."""
    if t is None:
        return None
    t = t.detach().to("cpu", torch.float32)
    if not torch.isfinite(t).all():
        if torch.isnan(t).any() or torch.isposinf(t).any():
            raise AttnCliError("the numbers overflowed float32: the inputs are too large")
        t = t.to(torch.float64).masked_fill(torch.isneginf(t), math.nan)
        return _nan_to_none(t.tolist())
    return t.tolist()


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return None if math.isnan(value) else value


def masked_lists(weights: Tensor, rows: range, cols: range, causal: bool) -> Any:
    """weights (heads, R, C) as a float32 numpy array, NaN where a causal key follows its query."""
    data = weights.cpu().numpy()  # (heads, R, C)
    if causal:
        row_pos = torch.arange(rows.start, rows.stop)[:, None]  # (R, 1)
        data[:, (torch.arange(cols.start, cols.stop)[None, :] > row_pos).numpy()] = math.nan
    return data
