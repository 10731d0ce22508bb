"""What each head does, as means over its query rows: the one definition of the head measures.

`attncli heads` takes them from whole weight matrices, a long run from the log-sum-exp; both
hand the per-row values here.
"""

from __future__ import annotations

from torch import Tensor

MEASURES = ("entropy", "prev", "first", "self", "distance")


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
