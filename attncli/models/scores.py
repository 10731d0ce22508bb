"""What kind of head each one is: TransformerLens's head-detector scores, and attention sinks.

A score is the share of a head's attention that falls on a detection pattern, exactly as
`transformer_lens.head_detector.detect_head` computes it with its defaults (error measure
"mul", the first token and the current token kept): Σ pattern ⊙ detection / Σ pattern over
the whole (T, T) matrix, row 0 included.

- previous_token: query i on key i - 1.
- duplicate_token: query i on an earlier key j < i holding the same token id.
- induction: query i on key j + 1, where token j is an earlier copy of token i (the token
  that followed the last time this one appeared).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attncli.records.heads import Sink

SCORES = ("previous_token", "duplicate_token", "induction")
SINK_SHARE = 0.5  # a head putting at least this share on the first token is a sink head


def detection_patterns(token_ids: list[int]) -> dict[str, Tensor]:
    """Each score's 0/1 detection pattern (T, T), lower triangular, as TransformerLens builds it."""
    ids = torch.tensor(token_ids)  # (T,)
    n = ids.shape[0]
    previous = torch.diag(torch.ones(n - 1), -1)  # (T, T) ones just below the diagonal
    same = (ids[:, None] == ids[None, :]).float()  # (T, T) token i equals token j
    duplicate = torch.tril(same, -1)  # (T, T) earlier copies only: the token itself left out
    # Shift right by one: key j + 1 follows the earlier copy j; nothing wraps into column 0.
    induction = torch.zeros_like(duplicate)  # (T, T)
    induction[:, 1:] = duplicate[:, :-1]
    return {"previous_token": previous, "duplicate_token": duplicate,
            "induction": torch.tril(induction)}


def head_scores(weights: Tensor, patterns: Tensor) -> dict[str, Tensor]:
    """Every score of every head of weights (layers, heads, T, T), patterns (scores, T, T)
    stacked in SCORES order: one (layers, heads) each."""
    w = weights.double()  # (layers, heads, T, T)
    total = w.sum((-2, -1))  # (layers, heads); T when every row sums to 1
    hits = torch.einsum("lhqk,sqk->slh", w, patterns.double())  # (scores, layers, heads)
    return {name: hits[k] / total for k, name in enumerate(SCORES)}


def stacked_patterns(token_ids: list[int]) -> Tensor:
    """detection_patterns in SCORES order: (scores, T, T)."""
    patterns = detection_patterns(token_ids)
    return torch.stack([patterns[name] for name in SCORES])  # (scores, T, T)


def head_labels(scores: dict[str, float], threshold: float, kinds: tuple[str, ...]) -> list[str]:
    """The score names among kinds at or above threshold, in SCORES order."""
    return [name for name in SCORES if name in kinds and scores[name] >= threshold]


def layer_sinks(layer: int, weights: Tensor, residual: Tensor | None) -> Sink:
    """Layer's sink: the heads' mean share on token 0 over query rows 1..T-1, weights
    (heads, T, T), and token 0's norm in the residual stream (T, d_model) entering the layer
    beside the median norm of the other tokens (None without a residual stream)."""
    share = weights[:, 1:, 0].double().mean()  # () heads and query rows 1..T-1 averaged
    if residual is None:
        return {"layer": layer, "first_share": float(share), "first_norm": None,
                "median_norm": None,
                "norm_ratio": None}
    norms = residual.double().norm(dim=-1)  # (T,)
    others, count = norms[1:].sort().values, norms.shape[0] - 1  # (T-1,) ascending
    median = (others[(count - 1) // 2] + others[count // 2]) / 2  # () the two middle ones' mean
    return {"layer": layer, "first_share": float(share), "first_norm": float(norms[0]),
            "median_norm": float(median),
            "norm_ratio": float(norms[0] / median) if median > 0 else 0.0}
