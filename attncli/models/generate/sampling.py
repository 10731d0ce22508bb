"""How the next token is chosen from one step's logits: greedy, or sampled with temperature,
top-k and top-p applied in the order transformers' generate applies them."""

from __future__ import annotations

import math
import secrets
from dataclasses import replace

import torch
from torch import Tensor

from attncli.records.asking import Sampling

__all__ = ["Sampling", "choose", "generator_for", "warped", "with_seed"]


def warped(logits: Tensor, sampling: Sampling) -> Tensor:
    """logits (vocab,) after temperature, top-k and top-p, as transformers' warpers leave them:
    a token cut from the candidates has -inf."""
    scores = logits.float() / sampling.temperature  # (vocab,)
    if not torch.isfinite(scores).all():
        # A tiny temperature overflowed: shifted by the largest first (softmax does not change)
        # and divided in float64 (a temperature below float32's range is not 0 there), the
        # others go to -inf and the largest stays 0, never inf (inf - inf is nan).
        shifted = logits.double() - logits.double().max()  # (vocab,) all <= 0
        scores = (shifted / sampling.temperature).float()  # (vocab,)
    if 0 < sampling.top_k < scores.shape[-1]:
        kth = torch.topk(scores, sampling.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, -math.inf)
    if sampling.top_p < 1.0:
        # Cut the least likely tokens whose mass together is at most 1 - top_p; the most
        # likely token always stays.
        ascending, order = torch.sort(scores, descending=False)  # (vocab,)
        cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)  # (vocab,)
        remove = cumulative <= 1 - sampling.top_p
        remove[-1] = False
        scores = scores.masked_fill(torch.zeros_like(remove).scatter(0, order, remove), -math.inf)
    return scores


def choose(logits: Tensor, sampling: Sampling, generator: torch.Generator) -> int:
    """The next token's id from one step's logits (vocab,)."""
    if not sampling.sample:
        return int(torch.argmax(logits))
    probs = torch.softmax(warped(logits, sampling), dim=-1)  # (vocab,)
    return int(torch.multinomial(probs, 1, generator=generator))


def with_seed(sampling: Sampling) -> Sampling:
    """sampling with its seed fixed: a fresh one when sampling without --sample-seed, so the result
    records the seed that reproduces it."""
    if sampling.sample and sampling.seed is None:
        return replace(sampling, seed=secrets.randbits(63))
    return sampling


def generator_for(sampling: Sampling) -> torch.Generator:
    """A generator seeded with sampling's seed: the same settings draw the same tokens."""
    generator = torch.Generator()
    generator.manual_seed(sampling.seed or 0)
    return generator
