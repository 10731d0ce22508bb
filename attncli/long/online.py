"""The online softmax of one query tile: running sums in log2 units against a lazy maximum.

Each row keeps m, l = Σ 2^(s-m), Σ 2^(s-m)·(s-m) and Σ 2^(s-m)·[v | 1] over the keys seen so far.
Any m gives the same normalised results; it only keeps the float32 weights in range, so the
tiled pass moves it up only when a tile's scores rise well above it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class RowState:
    """Online-softmax state of one query tile, in log2 units, relative to a lazy row maximum."""

    q_ext: Tensor  # (heads, bq, head_dim + 1) [q·log2 e/√d_k | -m]
    row_max: Tensor  # (heads, bq) m: a little below the largest score seen (2^(s-m) ≤ 2^8 · bk)
    plogp: Tensor  # (heads, bq) Σ 2^(s-m)·(s-m), for the entropy
    key_sum: Tensor  # (heads, bq) Σ 2^(s-m)·j, for the mean key position
    acc: Tensor  # (heads, bq, d_v + 1) Σ 2^(s-m)·[v | 1]; the last column is l = Σ 2^(s-m)


def rescale(state: RowState, shift: Tensor) -> None:
    """Move each row's m up by shift (heads, bq): rescale its sums by 2^-shift."""
    alpha = torch.exp2(-shift)  # (heads, bq)
    # Σ p·(s - m_new) = α·(Σ p_old·(s - m_old) - shift·l_old) for the keys already seen.
    state.plogp = alpha * (state.plogp - shift * state.acc[..., -1])  # (heads, bq)
    state.key_sum.mul_(alpha)  # (heads, bq)
    state.acc.mul_(alpha[..., None])  # (heads, bq, d_v + 1)
    state.row_max.add_(shift)  # (heads, bq)
    state.q_ext[..., -1] = -state.row_max  # (heads, bq)
