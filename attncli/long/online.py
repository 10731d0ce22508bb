"""The online softmax of one query tile: running sums in log2 units against a lazy maximum.

Each row keeps m, l = Σ 2^(s-m), Σ 2^(s-m)·(s-m) and Σ 2^(s-m)·[v | 1] over the keys seen so far.
Any m gives the same normalised results; it only keeps the float32 weights in range, so the
tiled pass moves it up only when a tile's scores rise well above it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.long.tiles import LN2, TiledOutput


@dataclass
class RowState:
    """Online-softmax state of one query tile, in log2 units, relative to a lazy row maximum."""

    q_ext: Tensor  # (heads, bq, head_dim + 1) [q·log2 e/√d_k | -m]
    row_max: Tensor  # (heads, bq) m: a little below the largest score seen (2^(s-m) ≤ 2^8 · bk)
    plogp: Tensor  # (heads, bq) Σ 2^(s-m)·(s-m), for the entropy
    key_sum: Tensor  # (heads, bq) Σ 2^(s-m)·j, for the mean key position
    # (heads, bq, d_v + 1) Σ 2^(s-m)·[v | 1], the last column l = Σ 2^(s-m); or, where the fused
    # passes sum l themselves into row_sum, (heads, bq, d_v) Σ 2^(s-m)·v.
    acc: Tensor
    row_sum: Tensor | None = None  # (heads, bq) l, when kept apart from acc

    def sums(self) -> tuple[Tensor, Tensor]:
        """Σ 2^(s-m)·v (heads, bq, d_v) and l = Σ 2^(s-m) (heads, bq), wherever l is kept."""
        if self.row_sum is not None:
            return self.acc, self.row_sum
        return self.acc[..., :-1], self.acc[..., -1]


def rescale(state: RowState, shift: Tensor) -> None:
    """Move each row's m up by shift (heads, bq): rescale its sums by 2^-shift."""
    alpha = torch.exp2(-shift)  # (heads, bq)
    # Σ p·(s - m_new) = α·(Σ p_old·(s - m_old) - shift·l_old) for the keys already seen.
    state.plogp = alpha * (state.plogp - shift * state.sums()[1])  # (heads, bq)
    state.key_sum.mul_(alpha)  # (heads, bq)
    state.acc.mul_(alpha[..., None])  # (heads, bq, d_v + 1) or (heads, bq, d_v)
    if state.row_sum is not None:
        state.row_sum.mul_(alpha)  # (heads, bq)
    state.row_max.add_(shift)  # (heads, bq)
    state.q_ext[..., -1] = -state.row_max  # (heads, bq)


def finish_rows(state: RowState, rows: slice, out: TiledOutput) -> Tensor:
    """Normalise a query tile's running sums into out[rows]; returns its lse in log2 units."""
    weighted, row_sum = state.sums()  # (heads, bq, d_v), (heads, bq) l
    log_sum = row_sum.log2()  # (heads, bq)
    lse2 = state.row_max + log_sum  # (heads, bq)
    out.lse[:, rows] = lse2 * LN2  # natural units, as the weights are e^(s - lse)
    # H = -Σ w ln w with w = 2^(s-m)/l, so H = ln 2 · (log2 l - Σ 2^(s-m)·(s-m) / l).
    out.entropy[:, rows] = (log_sum - state.plogp / row_sum) * LN2
    out.mean_key[:, rows] = state.key_sum / row_sum
    out.context[:, rows] = weighted / row_sum[..., None]  # (heads, bq, d_v)
    return lse2
