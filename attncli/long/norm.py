"""--measure norm on the tiled path: ‖α_ij · W_O v_j‖ (Kobayashi et al. 2020) on a window.

Each weight of the window is exact from its row's log-sum-exp (long/window.py); scaling it by
its key's ‖W_O^h v_j^h‖ gives the raw lengths. Renormalising a row needs its sum over every
key, Σ_j α_ij ‖W_O v_j‖: the window's rows are rebuilt whole a chunk at a time, (heads, r, N),
so memory stays proportional to the rows shown, never (N, N).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attncli.core.attention import Attention
from attncli.core.pipeline import key_norms
from attncli.long.window import weights_window

CHUNK_CELLS = 2**22  # the most weights (heads · rows · N) one chunk of whole rows holds


@torch.no_grad()
def norm_window(module: Attention, x: Tensor, queries: Tensor, keys: Tensor, lse: Tensor,
                rows: range, cols: range, causal: bool) -> tuple[Tensor, Tensor]:
    """The window's raw ‖α_ij · W_O v_j‖ (heads, R, C), and the same divided by each row's sum
    over all its keys; x (N, d_in) the layer's input, queries and keys (heads, N, head_dim)."""
    heads, num_tokens, _ = queries.shape
    norms = key_norms(module, x)  # (heads, N)
    window = weights_window(queries, keys, lse, rows, cols, causal)  # (heads, R, C)
    raw = window * norms[:, None, cols.start:cols.stop]  # (heads, R, C) α ≥ 0: ‖α f‖ = α ‖f‖
    total = raw.new_zeros(heads, len(rows))  # (heads, R) Σ_j α_ij ‖f_j‖ over every key
    step = max(1, CHUNK_CELLS // max(heads * num_tokens, 1))
    for r0 in range(rows.start, rows.stop, step):
        part = range(r0, min(r0 + step, rows.stop))
        whole = weights_window(queries, keys, lse, part, range(num_tokens), causal)  # (h, r, N)
        total[:, r0 - rows.start:part.stop - rows.start] = (whole * norms[:, None, :]).sum(-1)
    shown = torch.where(total[..., None] > 0, raw / total[..., None].clamp_min(1e-38),
                        torch.zeros_like(raw))  # (heads, R, C) rows renormalised
    return raw, shown
