"""The options of `ablate` and `patch`, declared once in two groups whose defaults are the
records' own (records/causal.py: AblateOptions, PatchOptions); they stay under the
commands' own heading, "Options"."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import typer

from attncli.cli.groups import DEFAULT_PANEL, Group
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


HeadsOpt = Annotated[str, typer.Option(
    "--heads", metavar="L.H[,L.H…]|all",
    help="The heads ablated together, as `heads` numbers them (layer.head, 0-based; a negative "
    "layer counts from the end), or all: every head alone, ranked by its effect.")]
HowOpt = Annotated[How, typer.Option(
    help="What replaces a head's output: its mean over the text's positions, zero (off the "
    "distribution the model was trained on), or its output on the text shuffled (--seed).")]
AtOpt = Annotated[int | None, typer.Option(
    help="The position whose next-token distribution is read, 0-based; negative counts from "
    "the end [default: the text's last token].", show_default=False)]
AnswerOpt = Annotated[str | None, typer.Option(
    help="A continuation of the text (' Paris'), scored teacher-forced: its log-probability "
    "before and after.", show_default=False)]
TopOpt = Annotated[int, typer.Option(min=1, max=100, help="Next tokens listed.")]
SeedOpt = Annotated[int, typer.Option(
    help="The seed of --how resample's shuffle and of --repeat's tokens.")]
RepeatOpt = Annotated[int | None, typer.Option(
    min=1, max=4096, metavar="N", show_default=False,
    help="Run on N seeded random tokens repeated twice (`heads --probe induction`'s probe) "
    "instead of a text; --heads all ranks heads by the loss on the second copy, where "
    "induction heads predict.")]
MetricOpt = Annotated[Metric | None, typer.Option(
    help="logit-diff: logit(first --tokens) − logit(second) at --at; answer: the --answer's "
    "log-probability after each text [default: logit-diff with --tokens, else answer].",
    show_default=False)]
TokensOpt = Annotated[tuple[str, str] | None, typer.Option(
    "--tokens", metavar="RIGHT WRONG", help="logit-diff's two next tokens, each one token after "
    "the text (' Paris' ' Rome').", show_default=False)]
DenoiseOpt = Annotated[bool, typer.Option(
    "--denoise/--noise", help="--denoise: each head's clean output patched into the corrupted "
    "run (what restores the answer); --noise: the corrupted output into the clean run (what "
    "breaks it).")]
PerPositionOpt = Annotated[bool, typer.Option(
    "--per-position", help="Also patch each head at each position alone: [layer][head][position] "
    "(one pass per head and position).")]
AttributionOpt = Annotated[bool, typer.Option(
    "--attribution", help="Attribution patching: the gradient estimate of every head's effect "
    "from two forward passes and one backward, beside the exact grid with their agreement.")]
ExactOpt = Annotated[bool, typer.Option(
    "--exact/--no-exact", help="--no-exact with --attribution: the estimate alone (an 8B's "
    "1,024 heads).")]


@dataclass(frozen=True)
class Ablating(Group):
    """What `ablate` edits and reads."""

    panel = DEFAULT_PANEL
    heads: HeadsOpt = AblateOptions.heads
    how: HowOpt = How(AblateOptions.how)
    at: AtOpt = AblateOptions.at
    answer: AnswerOpt = AblateOptions.answer
    top: TopOpt = AblateOptions.top
    seed: SeedOpt = AblateOptions.seed
    repeat: RepeatOpt = AblateOptions.repeat

    def options(self) -> AblateOptions:
        """The AblateOptions record."""
        return AblateOptions(heads=self.heads, how=self.how.value, at=self.at, answer=self.answer,
                             top=self.top, seed=self.seed, repeat=self.repeat)


@dataclass(frozen=True)
class Patching(Group):
    """What `patch` patches and measures."""

    panel = DEFAULT_PANEL
    metric: MetricOpt = None  # PatchOptions' own: chosen from --tokens or --answer
    tokens: TokensOpt = PatchOptions.tokens
    answer: AnswerOpt = PatchOptions.answer
    denoise: DenoiseOpt = PatchOptions.denoise
    per_position: PerPositionOpt = PatchOptions.per_position
    at: AtOpt = PatchOptions.at
    attribution: AttributionOpt = PatchOptions.attribution
    exact: ExactOpt = PatchOptions.exact

    def options(self) -> PatchOptions:
        """The PatchOptions record."""
        return PatchOptions(metric=self.metric and self.metric.value, tokens=self.tokens,
                            answer=self.answer, denoise=self.denoise,
                            per_position=self.per_position, at=self.at,
                            attribution=self.attribution, exact=self.exact)
