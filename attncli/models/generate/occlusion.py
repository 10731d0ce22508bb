"""Occlusion: what removing a prompt token does to the answer. Token j is masked as a padding
token is: no query but its own may look at its key, in every layer and head. The drop in each
answer token's log-probability (teacher-forced) is how much the answer needed token j.

Each masked pass is one trace over prompt + answer with that column hidden, one pass per
prompt token outside the sinks, in one process.
"""

from __future__ import annotations

import torch

from attncli.activity import counted, doing
from attncli.models.family import Model


@torch.no_grad()
def answer_logprobs(model: Model, prompt_ids: list[int], answer_ids: list[int],
                    visible: torch.Tensor | None = None) -> torch.Tensor:
    """Each answer token's log-probability (A,) float64, teacher-forced; visible (T, T), True
    where a query may look, narrows the causal mask."""
    p, a = len(prompt_ids), len(answer_ids)
    hidden = None
    for trace in model.trace(prompt_ids + answer_ids, model.spec.n_layer - 1, visible):
        hidden = trace.output
    assert hidden is not None, "a decoder has at least one layer"
    logits = model.logits(hidden[p - 1:p + a - 1]).float().double()  # (A, vocab)
    chosen = torch.tensor(answer_ids)  # (A,)
    return torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None])[:, 0]  # (A,)


def masked(num_tokens: int, hidden: list[int]) -> torch.Tensor:
    """(T, T) True where a query may look: every key but those hidden (each still sees
    itself, so its own row is not empty; what it computes reaches no other token)."""
    visible = torch.ones(num_tokens, num_tokens, dtype=torch.bool)  # (T, T)
    visible[:, hidden] = False
    visible[hidden, hidden] = True
    return visible


def occlusion(model: Model, prompt_ids: list[int], answer_ids: list[int],
              skip: list[int]) -> list[list[float]]:
    """(A, P) the drop in answer token s's log-prob when prompt token j is masked; 0 for the
    tokens in skip (the sinks: masking the first token breaks the model, not the reason)."""
    p, a = len(prompt_ids), len(answer_ids)
    doing(f"occlusion: {p:,} masked passes over {p + a:,} tokens")
    base = answer_logprobs(model, prompt_ids, answer_ids)  # (A,)
    drops = torch.zeros(a, p, dtype=torch.float64)  # (A, P)
    left_out = set(skip)
    for j in range(p):
        counted("masked passes", j + 1, p)
        if j in left_out:
            continue
        drops[:, j] = base - answer_logprobs(model, prompt_ids, answer_ids,
                                             masked(p + a, [j]))
    return drops.tolist()
