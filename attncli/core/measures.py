"""What each head does, as means over its query rows: the one definition of the head measures.

`attncli heads` takes them from whole weight matrices, a long run from the log-sum-exp; both
hand the per-row values here.

And the views beyond raw weights, which say how much each attended token moves the output:

- norm (Kobayashi et al. 2020, "Attention is Not Only a Weight"): ‖α_ij · W_O^h v_j^h‖, the
  length of what token j adds to query i's output through head h. A head may put most of its
  weight on a token whose transformed value is nearly zero (the attention sink).
- rollout (Abnar & Zuidema 2020): the residual stream as 0.5·I + 0.5·A, heads averaged, rows
  renormalised, multiplied from the first layer up to the one shown.
"""

from __future__ import annotations

import torch
from torch import Tensor

MEASURES = ("entropy", "prev", "first", "self", "distance")
RESIDUAL = 0.5  # rollout's share of the identity: the residual connection around attention


def head_means(entropy: Tensor, first: Tensor, prev: Tensor, own: Tensor, mean_key: Tensor,
               query_pos: Tensor) -> dict[str, Tensor]:
    """Means over rows (last axis, R) of per-row values (..., R), one tensor (...) per measure.

    entropy in nats (0 = all weight on one key); first, prev, own: the weight on key 0, on
    the previous key and on the query itself; mean_key: Σ_j w_ij·j, so distance is how many
    tokens back the weight lies on average (negative: ahead, without a causal mask).
    """
    return {
        "entropy": entropy.mean(-1),  # (...)
        "prev": prev.mean(-1),  # (...)
        "first": first.mean(-1),  # (...)
        "self": own.mean(-1),  # (...)
        "distance": (query_pos - mean_key).mean(-1),  # (...)
    }


def value_norms(values: Tensor, out_proj: Tensor | None) -> Tensor:
    """‖W_O^h v_j^h‖ per head and token: values (heads, T, head_dim), out_proj (d_out,
    heads · head_dim) as nn.Linear holds it, or None where there is none (single-head)."""
    heads, num_tokens, head_dim = values.shape
    if out_proj is None:
        return values.norm(dim=-1)  # (heads, T) the value itself is what the head adds
    w_o = out_proj.reshape(out_proj.shape[0], heads, head_dim)  # (d_out, heads, head_dim)
    # Head h's value through its own columns of W_O: what it writes into the stream, one head
    # at a time (all at once would be a (heads, T, d_out) temporary: 100 MB an 8B layer).
    return torch.stack([(values[h] @ w_o[:, h].T).norm(dim=-1)  # (T, d_out) -> (T,)
                        for h in range(heads)])  # (heads, T)


def norm_weights(weights: Tensor, norms: Tensor) -> Tensor:
    """α_ij · ‖f(x_j)‖: weights (heads, T, T) scaled by each key's norms (heads, T)."""
    return weights * norms[:, None, :]  # (heads, T, T); α ≥ 0, so ‖α f‖ = α ‖f‖


def row_normalised(matrix: Tensor) -> Tensor:
    """Each row divided by its sum (a row of zeros stays zeros): (..., T, T)."""
    total = matrix.sum(-1, keepdim=True)  # (..., T, 1)
    return torch.where(total > 0, matrix / total.clamp_min(torch.finfo(matrix.dtype).tiny),
                       torch.zeros_like(matrix))  # (..., T, T)


def residual_attention(weights: Tensor) -> Tensor:
    """One layer for rollout: 0.5·I + 0.5·(heads' mean), rows renormalised: (T, T)."""
    mean = weights.mean(0)  # (T, T) heads averaged
    eye = torch.eye(mean.shape[-1], dtype=mean.dtype, device=mean.device)  # (T, T)
    return row_normalised(RESIDUAL * eye + (1 - RESIDUAL) * mean)  # (T, T)


def rollout(per_layer: list[Tensor]) -> Tensor:
    """Attention rollout through layers 0..L, each weights (heads, T, T): Ã_L ··· Ã_0, (T, T)."""
    rolled = residual_attention(per_layer[0])  # (T, T)
    for weights in per_layer[1:]:
        rolled = residual_attention(weights) @ rolled  # (T, T) layer l on top of 0..l-1
    return rolled
