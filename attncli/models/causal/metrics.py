"""What an edit changes, read from logits (T, vocab): each token's loss, the next-token
distribution at a position and its KL divergence, an answer's log-probability, a logit
difference."""

from __future__ import annotations

import torch
from torch import Tensor


def token_losses(logits: Tensor, ids: list[int]) -> Tensor:
    """Cross-entropy of each next token, −log p(t_{i+1} | t_≤i): (T - 1,)."""
    return next_losses(logits[:-1], ids[1:])


def next_losses(logits: Tensor, targets: list[int]) -> Tensor:
    """−log p(target) of each row of logits (P, vocab) and its target: (P,)."""
    log_probs = torch.log_softmax(logits.double(), dim=-1)  # (P, vocab)
    return -log_probs.gather(-1, torch.tensor(targets)[:, None])[:, 0]  # (P,)


def kl_divergence(before: Tensor, after: Tensor) -> float:
    """KL(p_before ‖ p_after) of two logit rows (vocab,), in nats."""
    p = torch.log_softmax(before.double(), dim=-1)  # (vocab,)
    q = torch.log_softmax(after.double(), dim=-1)  # (vocab,)
    return float((p.exp() * (p - q)).sum())


def answer_log_prob(logits: Tensor, ids: list[int], start: int) -> float:
    """log p(ids[start:] | ids[:start]), teacher-forced: Σ_i log p(t_i | t_<i) for i ≥ start."""
    log_probs = torch.log_softmax(logits[start - 1:-1].double(), dim=-1)  # (A, vocab)
    targets = torch.tensor(ids[start:])  # (A,)
    return float(log_probs.gather(-1, targets[:, None]).sum())


def logit_diff(logits: Tensor, at: int, correct: int, wrong: int) -> Tensor:
    """logit(correct) − logit(wrong) at position at: () (a tensor, so gradients flow)."""
    return logits[at, correct] - logits[at, wrong]
