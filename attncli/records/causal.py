"""What `ablate` and `patch` found, as plain data (no tensors): the records the renderers,
the API and `--json` read, each with one to_dict()."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from attncli.opt import check_bounds, opt

HOWS = ("zero", "mean", "resample")
METRICS = ("logit-diff", "answer")
HOW_TEXT = {"zero": "each head's output set to zero (off the distribution the model learnt)",
            "mean": "each head's output replaced by its mean over the text's positions",
            "resample": "each head's output taken from the text, its tokens shuffled (seeded)"}
# --position was --at, which generate's and show's answer token means
AT_HELP = ("The position whose next-token distribution is read, 0-based; negative counts from the "
           "end [default: the text's last token].")
ANSWER_HELP = ("A continuation of the text (' Paris'), scored teacher-forced: its log-probability "
               "before and after.")


@dataclass(frozen=True)
class AblateOptions:
    """What `ablate` edits and reads, beyond the request's text and model."""

    # L.H[,L.H…] replaced together, or all: each head alone, ranked
    heads: str = opt("all", "--heads", metavar="L.H[,L.H…]|all", help="The heads ablated "
                     "together, as `heads` numbers them (layer.head, 0-based; a negative layer "
                     "counts from the end), or all: every head alone, ranked by its effect.")
    how: str = opt("mean", help="What replaces a head's output: its mean over the text's "
                   "positions, zero (off the distribution the model was trained on), or its "
                   "output on the text shuffled (--seed).", choices=HOWS)
    at: int | None = opt(None, "--position", help=AT_HELP, show_default=False,
                         alias="--at")  # None: the last position
    answer: str | None = opt(None, help=ANSWER_HELP, show_default=False)
    top: int = opt(5, min=1, max=100, help="Next tokens listed.")  # before and after
    seed: int = opt(0, help="The seed of --how resample's shuffle and of --repeat's tokens.")
    # run on this many seeded random tokens twice, not a text
    repeat: int | None = opt(None, min=1, max=4096, metavar="N", show_default=False,
                             help="Run on N seeded random tokens repeated twice (`heads --probe "
                             "induction`'s probe) instead of a text; --heads all ranks heads by "
                             "the loss on the second copy, where induction heads predict.")

    def __post_init__(self) -> None:
        check_bounds(self)  # the API's values as the command line's


@dataclass(frozen=True)
class PatchOptions:
    """What `patch` patches and measures, beyond the two texts and the model."""

    # logit-diff | answer; None: logit-diff with tokens, else answer
    metric: str | None = opt(None, help="logit-diff: logit(first --tokens) − logit(second) at "
                             "--position; answer: the --answer's log-probability after each text "
                             "[default: logit-diff with --tokens, else answer].",
                             show_default=False, choices=METRICS)
    tokens: tuple[str, str] | None = opt(None, "--tokens", metavar="RIGHT WRONG", help="logit-"
                                         "diff's two next tokens, each one token after the text "
                                         "(' Paris' ' Rome').", show_default=False)
    answer: str | None = opt(None, help=ANSWER_HELP, show_default=False)  # after each text
    # clean heads into the corrupted run; False: corrupt into clean
    denoise: bool = opt(True, "--denoise/--noise", help="--denoise: each head's clean output "
                        "patched into the corrupted run (what restores the answer); --noise: the "
                        "corrupted output into the clean run (what breaks it).")
    per_position: bool = opt(False, "--per-position", help="Also patch each head at each "
                             "position alone: [layer][head][position] (one pass per head and "
                             "position).")
    at: int | None = opt(None, "--position", help=AT_HELP, show_default=False,
                         alias="--at")  # None: the last position
    # the gradient estimate beside (or, for big models, first)
    attribution: bool = opt(False, "--attribution", help="Attribution patching: the gradient "
                            "estimate of every head's effect from two forward passes and one "
                            "backward, beside the exact grid with their agreement.")
    exact: bool = opt(True, "--exact/--no-exact", help="--no-exact with --attribution: the "
                      "estimate alone (an 8B's 1,024 heads).")  # False: the estimate alone


# The parts ablate and patch keep as dicts, declared as their JSON holds them: the models build
# them, the renderers read them, and saved/causal.py reads them back by walking these.
class Shown(TypedDict):
    """A top next token (and its id, kept as the file has it)."""

    text: str
    prob: float


class Top(TypedDict):
    before: list[Shown]
    after: list[Shown]


class _Loss(TypedDict):
    index: int
    token: str
    before: float


class Loss(_Loss, total=False):
    after: float | None  # None until the ablation ran


class _Answer(TypedDict):
    text: str
    start: int
    before: float


class Answer(_Answer, total=False):
    after: float | None


class _Ranked(TypedDict):
    layer: int
    head: int
    effect: float
    kl: float
    previous_token: float
    duplicate_token: float
    induction: float


class Ranked(_Ranked, total=False):
    loss_change: float | None
    answer_change: float | None


class Pair(TypedDict):
    """One of logit-diff's tokens (and its id)."""

    text: str


class _Attribution(TypedDict):
    grid: list[list[float]]


class Attribution(_Attribution, total=False):
    spearman: float


@dataclass(frozen=True)
class Ablation:
    """`attncli ablate`: the text run with heads' outputs replaced, and what changed."""

    model: dict[str, Any]  # the model's info (path, layers, heads)
    tokens: list[str]  # each token's label, answer tokens included
    ids: list[int]
    how: str  # zero, mean or resample
    heads: list[tuple[int, int]]  # (layer, head) replaced together; [] with --heads all
    at: int  # the position whose next-token distribution is shown
    losses: list[Loss]  # per predicted token
    top: Top  # the likeliest next tokens at position at, before and after
    kl: float | None  # KL(before ‖ after) at position at, nats
    answer: Answer | None  # its log-probability before and after
    ranking: list[Ranked] | None = None  # --heads all: every head, largest effect first
    scored: int = 1  # the first token whose loss the effect averages (--repeat: the second copy)

    @property
    def legend(self) -> str:
        """How each ablated head's output was replaced, in words."""
        return HOW_TEXT[self.how]

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli ablate`."""
        return {"kind": "ablate", "model": self.model, "how": self.how,
                "legend": self.legend,
                "heads": [list(h) for h in self.heads] or "all",
                "tokens": [{"index": i, "id": t, "text": s}
                           for i, (t, s) in enumerate(zip(self.ids, self.tokens, strict=True))],
                "at": self.at, "losses": self.losses, "top": self.top, "kl": self.kl,
                "answer": self.answer, "scored_from": self.scored, "ranking": self.ranking}


@dataclass(frozen=True)
class Patching:
    """`attncli patch`: each layer × head's output patched between two runs, and the metric."""

    model: dict[str, Any]
    clean: list[str]  # the clean text's token labels
    corrupt: list[str]
    metric: str  # logit-diff or answer
    direction: str  # denoise: clean into corrupt; noise: corrupt into clean
    tokens: list[Pair] | None  # logit-diff's two tokens
    at: int
    baseline: dict[str, float]  # the metric on the clean and on the corrupted run
    grid: list[list[float]]  # [layer][head]: the metric with that head patched, normalised
    raw: list[list[float]]  # [layer][head]: the metric itself
    positions: list[list[list[float]]] | None = None  # [layer][head][position], normalised
    attribution: Attribution | None = None  # the gradient estimate and its agreement

    def top(self, count: int = 10) -> list[dict[str, Any]]:
        """The heads whose patch moves the metric most, largest |effect| first."""
        cells = [{"layer": layer, "head": head, "effect": v, "metric": self.raw[layer][head]}
                 for layer, row in enumerate(self.grid) for head, v in enumerate(row)]
        return sorted(cells, key=lambda c: -abs(c["effect"]))[:count]

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli patch`."""
        return {"kind": "patch", "model": self.model, "metric": self.metric,
                "direction": self.direction, "tokens": self.tokens, "at": self.at,
                "clean": self.clean, "corrupt": self.corrupt, "baseline": self.baseline,
                "grid": self.grid, "raw": self.raw, "positions": self.positions,
                "top": self.top(), "attribution": self.attribution}
