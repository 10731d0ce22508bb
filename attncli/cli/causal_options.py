"""The options of `ablate` and `patch`, declared on their records (records/causal.py:
AblateOptions, PatchOptions) and given here as the command line parses them (a choice as its
Enum); they stay under the commands' own heading, "Options"."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from attncli.opt import of
from attncli.records.causal import AblateOptions, PatchOptions


class How(str, Enum):
    """What replaces an ablated head's output."""

    zero = "zero"
    mean = "mean"
    resample = "resample"


class Metric(str, Enum):
    """What `patch` measures on each run."""

    logit_diff = "logit-diff"
    answer = "answer"


@dataclass(frozen=True)
class Ablating:
    """What `ablate` edits and reads."""

    heads: str = of(AblateOptions, "heads")
    how: How = of(AblateOptions, "how", How)
    at: int | None = of(AblateOptions, "at")
    answer: str | None = of(AblateOptions, "answer")
    top: int = of(AblateOptions, "top")
    seed: int = of(AblateOptions, "seed")
    repeat: int | None = of(AblateOptions, "repeat")

    def options(self) -> AblateOptions:
        """The AblateOptions record."""
        return AblateOptions(heads=self.heads, how=self.how.value, at=self.at, answer=self.answer,
                             top=self.top, seed=self.seed, repeat=self.repeat)


@dataclass(frozen=True)
class Patching:
    """What `patch` patches and measures."""

    metric: Metric | None = of(PatchOptions, "metric")  # chosen from --tokens or --answer
    tokens: tuple[str, str] | None = of(PatchOptions, "tokens")
    answer: str | None = of(PatchOptions, "answer")
    denoise: bool = of(PatchOptions, "denoise")
    per_position: bool = of(PatchOptions, "per_position")
    at: int | None = of(PatchOptions, "at")
    attribution: bool = of(PatchOptions, "attribution")
    exact: bool = of(PatchOptions, "exact")

    def options(self) -> PatchOptions:
        """The PatchOptions record."""
        return PatchOptions(metric=self.metric and self.metric.value, tokens=self.tokens,
                            answer=self.answer, denoise=self.denoise,
                            per_position=self.per_position, at=self.at,
                            attribution=self.attribution, exact=self.exact)
