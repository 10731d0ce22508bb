"""What a generation is asked, with its options: how the next token is chosen (Sampling),
which of the answer's attention a view shows (GenerateView), and the whole request the model's
door takes (GenerationRequest), built once by the command line and by the Python API alike.
Plain data, no torch, no numpy: the command line reads them for --help."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attncli.errors import AttnCliError
from attncli.opt import check_bounds, opt, said

if TYPE_CHECKING:
    from attncli.core.display import Window
    from attncli.records.given import Reported

COMBINES = ("mean", "max")
VIEWS = ("raw", "value", "occlusion")  # the views a result is made with and drawn in
# generate's arithmetic: float32 (the model's own numbers) or llama.cpp's CPU backend's
# (8-bit activations on a GGUF's quantized blocks, a float16 cache: models/sources/gguf/qmatmul.py)
FLOAT32 = "float32"
NUMERICS = (FLOAT32, "llama.cpp")
AUTO = "auto"  # --view's default: occlusion where its passes are few, else value (run.py)
# The default view (AUTO) is occlusion where its masked passes cost at most this many
# looks (one look: one pass over the whole text, prompt and answer), else value. Occlusion by
# word agrees with occlusion by token at 0.899 Spearman, value at 0.166 and raw at 0.144
# (docs/why.md), so it is the view worth waiting for. The estimate runs above the batched cost
# (bench/given.py: 39 spans over 80 tokens, estimated 29 looks, took 17 looks' time), so 16
# keeps the default under about 10 looks' time, seconds on SmolLM2; the README's question takes
# 2.8, a page of text over 100.
AUTO_LOOKS = 16
OCCLUDE = ("token", "word", "turn")  # what occlusion masks together
GENERATION = "Generation"  # the --help heading of Sampling's options
DEFAULT_MAX_NEW = 48
MAX_NEW_LIMIT = 100_000  # a bound on --max-new-tokens before any memory estimate
SEED_LIMIT = 2**63 - 1  # torch.Generator takes a signed 64-bit seed


@dataclass(frozen=True)
class Sampling:
    """Every setting that decides which token comes next, and how many may come."""

    max_new_tokens: int = opt(DEFAULT_MAX_NEW, help="The most answer tokens written.",
                              panel=GENERATION)
    # False: greedy (the most likely token, the first on a tie)
    sample: bool = opt(False, "--sample", help="Sample the next token (else greedy).",
                       panel=GENERATION)
    temperature: float = opt(1.0, help="With --sample: logits divided by this first.",
                             panel=GENERATION)
    top_p: float = opt(1.0, help="With --sample: keep the likeliest tokens whose mass reaches "
                       "this.", panel=GENERATION)  # 1.0: no nucleus cut
    top_k: int = opt(0, "--top-k", help="With --sample: keep this many likeliest tokens (0: "
                     "all).", panel=GENERATION)  # 0: every token stays a candidate
    # None with sample: a fresh seed, recorded in the result. --sample-seed was --seed, which
    # run's embeddings and weights mean.
    seed: int | None = opt(None, "--sample-seed", help="With --sample: the seed that reproduces "
                           "the draw [default: a fresh one, recorded in --json].",
                           show_default=False, alias="--seed", panel=GENERATION)

    def __post_init__(self) -> None:
        check_bounds(self)  # a marker's bounds, as the command line's
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or not 1 <= self.max_new_tokens <= MAX_NEW_LIMIT:
            raise AttnCliError(f"{said('--max-new-tokens')} must be a whole number from 1 to "
                               f"{MAX_NEW_LIMIT:,} (got {self.max_new_tokens!r})")
        if not (isinstance(self.temperature, int | float) and math.isfinite(self.temperature)
                and self.temperature > 0):
            raise AttnCliError(f"{said('--temperature')} must be a finite number above 0 (got "
                               f"{self.temperature!r}); greedy decoding is the default without "
                               f"{said('--sample', 'sample=True')}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise AttnCliError(f"{said('--top-k')} must be a whole number, 0 or more (got "
                               f"{self.top_k!r}; "
                               "0 keeps every token)")
        if not (isinstance(self.top_p, int | float) and 0 < self.top_p <= 1):
            raise AttnCliError(f"{said('--top-p')} must be above 0 and at most 1 (got "
                               f"{self.top_p!r})")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(
                self.seed, int) or not 0 <= self.seed <= SEED_LIMIT):
            raise AttnCliError(f"{said('--sample-seed', 'seed')} must be a whole number from 0 to "
                               f"{SEED_LIMIT} (got {self.seed!r})")
        knobs = [name for name, value, default in self._knobs() if value != default]
        if knobs and not self.sample:  # llama.cpp and Ollama sample once a temperature is set
            sample = said("--sample", "sample=True")
            raise AttnCliError(f"{knobs[0]} applies with {sample} only: without it each answer "
                               f"token is the likeliest one (greedy); add {sample}")

    def _knobs(self) -> tuple[tuple[str, object, object], ...]:
        """Each setting that shapes a draw: its option, its value and its default."""
        return ((said("--temperature"), self.temperature, 1.0),
                (said("--top-p"), self.top_p, 1.0), (said("--top-k"), self.top_k, 0),
                (said("--sample-seed", "seed"), self.seed, None))

    def to_dict(self) -> dict[str, object]:
        """The settings as the JSON records them (sampling knobs only when sampling)."""
        out: dict[str, object] = {"max_new_tokens": self.max_new_tokens,
                                  "strategy": "sample" if self.sample else "greedy"}
        if self.sample:
            out |= {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p,
                    "seed": self.seed}
        return out



@dataclass(frozen=True)
class GenerateView:
    """Which of a generation's weights a view shows, and how it combines them."""

    # the answer token shown on its own (0-based); None: every one
    at: int | None = opt(None, "--at", help="The answer token whose attention is drawn over the "
                         "text: its index (0-based) or its text (the first such token; its "
                         "leading space optional).", show_default=False, metavar="I|TEXT")
    # half-open [a, b); None: every layer
    layers: tuple[int, int] | None = opt(None, "--layers", help="Layers A:B combined (half-open) "
                                         "[default: all].", show_default=False, metavar="A:B")
    head: int | None = None  # one head; None: every head
    # how the shown layers and heads make one row: mean or max
    combine: str = opt("mean", help="How layers and heads combine: mean or max.")
    # leave out the sink tokens and renormalise what is left
    exclude_sinks: bool = opt(True, "--exclude-sinks/--keep-sinks", help="Leave out the first "
                              "token and the template's own tokens, and renormalise (--json keeps "
                              "raw weights).")
    k: int = 3  # prompt tokens ranked per answer token
    # raw weights, value-weighted (α·‖W_O v‖) or occlusion (log-prob drop)
    kind: str = opt(AUTO, "--view", help="What ranks the prompt tokens: raw (attention "
                    "weights), value (α·‖W_O v‖ per head, Kobayashi 2020), occlusion (the answer "
                    "token's log-prob drop with the token masked: one pass per prompt word, or as "
                    "--occlude says) or auto (occlusion where its passes take at most "
                    f"{AUTO_LOOKS} looks, else value; the legend says which).",
                    metavar="auto|raw|value|occlusion")
    # what occlusion masks together: each token, each word (its tokens together) or each turn
    occlude: str = opt("word", "--occlude", help="With the occlusion view: what is masked "
                       "together, each token, each word (its tokens together) or each turn of "
                       "--messages.", metavar="token|word|turn")

    def __post_init__(self) -> None:
        check_choices(self.combine, self.kind, self.occlude)


def check_choices(combine: str, kind: str, occlude: str) -> None:
    """Refuse a --combine, --view or --occlude that is none of its choices, in one line."""
    if combine not in COMBINES:
        raise AttnCliError(f"{said('--combine')} must be one of {', '.join(COMBINES)} (got "
                           f"{combine!r})")
    if kind not in (AUTO, *VIEWS):
        raise AttnCliError(f"{said('--view')} must be one of {', '.join((AUTO, *VIEWS))} (got "
                           f"{kind!r})")
    if occlude not in OCCLUDE:
        raise AttnCliError(f"{said('--occlude')} must be one of {', '.join(OCCLUDE)} (got "
                           f"{occlude!r})")


@dataclass(frozen=True)
class GenerationRequest:
    """One generation, each part parsed once: the checkpoint, the prompt (or a conversation),
    an answer to explain instead of writing one, the sampling, and what the result keeps and
    which view shows it."""

    model: str
    prompt: str = ""
    messages: list[dict[str, Any]] | None = None  # a chat, rendered by the template
    answer: str | None = None  # teacher-forced in one pass, no generation
    reported: list[Reported] | None = None  # a runtime's log-probs: the receipt (and answer)
    system: str | None = opt(None, help="A system message for the chat template.",
                             show_default=False)
    raw: bool = opt(False, "--raw", help="Send the prompt without the chat template.")
    allow_special: bool = False
    sampling: Sampling = field(default_factory=Sampling)
    numerics: str = opt(FLOAT32, "--numerics", choices=NUMERICS, metavar="NAME",
                        help="float32: the model's own numbers, as transformers computes them. "
                        "llama.cpp: a GGUF's products on 8-bit activations and the cache in "
                        "float16, as llama.cpp's CPU backend computes (an 8B's answer about "
                        "1.8x faster; its numbers no longer equal transformers').")
    # The view: raw, value, occlusion or auto (decided once the text is known, the one made
    # recorded in the result), and GenerateView's other choices as given.
    view: str = GenerateView.kind
    occlude: str = GenerateView.occlude
    exclude_sinks: bool = GenerateView.exclude_sinks
    combine: str = GenerateView.combine
    layers: Window | None = None  # --layers, resolved against the model's
    head: int | None = None
    at: int | str | None = None  # the answer token shown: its index, or its text
    keep_all: bool = False  # keep every layer's and head's weights, not only those shown
    json: bool = False  # the weights go into a JSON: its size is checked against its budget
    also: tuple[str, ...] = ()  # views made beside the one shown (bench/views.py compares)

    def __post_init__(self) -> None:
        check_choices(self.combine, self.view, self.occlude)
        if self.numerics not in NUMERICS:
            raise AttnCliError(f"{said('--numerics')} must be one of {', '.join(NUMERICS)} (got "
                               f"{self.numerics!r})")
        for name in self.also:
            check_choices(self.combine, name, self.occlude)
        if self.occlude != GenerateView.occlude and self.view in ("raw", "value") \
                and "occlusion" not in self.also:
            raise AttnCliError(f"{said('--occlude')} chooses what the occlusion view masks, and "
                               f"{said(f'--view {self.view}', f'view={self.view!r}')} makes no "
                               "occlusion passes: leave it out, or use "
                               f"{said('--view occlusion', 'view=' + repr('occlusion'))}")
        system = said("--system")
        if self.system is not None and self.raw:
            raise AttnCliError(f"{system} goes into the chat template, and {said('--raw')} sends "
                               "the prompt without it: use one of them")
        if self.system is not None and self.messages is not None:
            raise AttnCliError(f"{said('--messages')} holds the system turn: give it there, not "
                               f"with {system}")
        given = said("--answer") if self.reported is None else "--logprobs"
        if (self.answer is not None or self.reported is not None) and self.sampling.sample:
            sample = said("--sample", "sample=True")
            raise AttnCliError(f"{sample} chooses the tokens the model writes, and {given} gives "
                               f"the answer: leave {sample} out")
        if (self.answer is not None or self.reported is not None) \
                and self.sampling.max_new_tokens != DEFAULT_MAX_NEW:
            raise AttnCliError(f"{said('--max-new-tokens')} bounds the answer the model writes, "
                               f"and {given} gives the answer (its length is its own): leave it "
                               "out")

    @property
    def norms(self) -> bool:
        """Whether the value norms are made: for the value view (which auto may choose), and
        for the sinks found by what they are."""
        return self.view in ("value", AUTO) or self.exclude_sinks or "value" in self.also

    @property
    def narrowed(self) -> bool:
        """Whether --layers, --head or --combine chose among attention's layers and heads: auto
        then shows value, since occlusion covers the whole model."""
        return self.layers is not None or self.head is not None or self.combine != "mean"
