"""How the next token is chosen from one step's logits: greedy, or sampled with temperature,
top-k and top-p applied in the order transformers' generate applies them."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from attncli.errors import AttnCliError

DEFAULT_MAX_NEW = 48
MAX_NEW_LIMIT = 100_000  # a bound on --max-new-tokens before any memory estimate
SEED_LIMIT = 2**63 - 1  # torch.Generator takes a signed 64-bit seed


@dataclass(frozen=True)
class Sampling:
    """Every setting that decides which token comes next, and how many may come."""

    max_new_tokens: int = DEFAULT_MAX_NEW
    sample: bool = False  # False: greedy (the most likely token, the first on a tie)
    temperature: float = 1.0
    top_k: int = 0  # 0: every token stays a candidate
    top_p: float = 1.0  # 1.0: no nucleus cut
    seed: int | None = None  # None with sample: a fresh seed, recorded in the result

    def __post_init__(self) -> None:
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or not 1 <= self.max_new_tokens <= MAX_NEW_LIMIT:
            raise AttnCliError(f"--max-new-tokens must be a whole number from 1 to "
                               f"{MAX_NEW_LIMIT:,} (got {self.max_new_tokens!r})")
        if not (isinstance(self.temperature, int | float) and math.isfinite(self.temperature)
                and self.temperature > 0):
            raise AttnCliError(f"--temperature must be a finite number above 0 (got "
                               f"{self.temperature!r}); greedy decoding is the default without "
                               "--sample")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise AttnCliError(f"--top-k must be a whole number, 0 or more (got {self.top_k!r}; "
                               "0 keeps every token)")
        if not (isinstance(self.top_p, int | float) and 0 < self.top_p <= 1):
            raise AttnCliError(f"--top-p must be above 0 and at most 1 (got {self.top_p!r})")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(
                self.seed, int) or not 0 <= self.seed <= SEED_LIMIT):
            raise AttnCliError(f"--seed must be a whole number from 0 to {SEED_LIMIT} (got "
                               f"{self.seed!r})")

    def to_dict(self) -> dict[str, object]:
        """The settings as the JSON records them (sampling knobs only when sampling)."""
        out: dict[str, object] = {"max_new_tokens": self.max_new_tokens,
                                  "strategy": "sample" if self.sample else "greedy"}
        if self.sample:
            out |= {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p,
                    "seed": self.seed}
        return out


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
    """sampling with its seed fixed: a fresh one when sampling without --seed, so the result
    records the seed that reproduces it."""
    if sampling.sample and sampling.seed is None:
        return replace(sampling, seed=secrets.randbits(63))
    return sampling


def generator_for(sampling: Sampling) -> torch.Generator:
    """A generator seeded with sampling's seed: the same settings draw the same tokens."""
    generator = torch.Generator()
    generator.manual_seed(sampling.seed or 0)
    return generator
