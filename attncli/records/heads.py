"""What `heads` computes beyond the request, with its options: its layers, its probe, its
labels, its order (models/heads.py computes it; cli/scoring.py offers it); and its result,
typed by its JSON (and `scan`'s summary): the objects it keeps as dicts are TypedDicts declared
as the document has them, so saved/heads.py reads a file by walking HeadsResult itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from attncli.core.display import Window, parse_window
from attncli.core.result import Matrix, ModelInfo, TokenInfo
from attncli.opt import check_bounds, opt

THRESHOLD = 0.4  # --threshold: a head scoring at least this is labelled
PROBES = ("induction", "previous", "duplicate")
MEASURES = ("entropy", "prev", "first", "self", "distance")
SCORES = ("previous_token", "duplicate_token", "induction")
SORTS = ("layer", "head", *MEASURES, *SCORES)


def _layers(text: str) -> Window:
    """--layers as typed: a:b, either end open, negatives from the end."""
    return parse_window(text, "--layers")


@dataclass(frozen=True)
class HeadsOptions:
    """What `heads` computes beyond the request: its layers, its probe, its labels, its order."""

    sort: str = opt("layer", help="Order of the table: layer, head, entropy, prev, first, self, "
                    "distance, previous_token, duplicate_token or induction (measures and scores "
                    "sort largest first).")
    # --layers a:b, 0-based and half-open; None: every layer
    layers: Window | None = opt(None, help="Only these layers: a:b, half-open and 0-based like "
                                "--rows (10:20, 25:, -4:); the forward pass stops at the last.",
                                show_default=False, metavar="A:B", parse=_layers)
    # induction, previous or duplicate: run on a repeated random probe
    probe: str | None = opt(None, help="Run on a built-in probe instead of a text: --probe-length "
                            "seeded random tokens (no special ones), repeated twice, after the "
                            "model's BOS when its tokenizer has one; heads scoring --threshold "
                            "or more on the probed score are labelled.", show_default=False,
                            choices=PROBES)
    probe_length: int = opt(50, min=1, max=4096, help="Random tokens before the probe repeats "
                            "them.")
    probe_seed: int = opt(0, help="Seed of the probe's tokens.")
    threshold: float = opt(THRESHOLD, min=0.0, max=1.0, help="Label a head whose score is at "
                           "least this: the probed score with --probe, else every score.")
    # each head mean-ablated alone: the rise of the text's mean loss
    effect: bool = opt(False, "--effect", help="Add each head's effect: the rise of the text's "
                       "mean loss with its output replaced by its mean over the positions (one "
                       "ablation per head, as `ablate --heads all`).")

    def __post_init__(self) -> None:
        check_bounds(self)


def figure(row: Mapping[str, object], name: str) -> float:
    """A head's number by a name chosen at run time (a column, a sort key): a measure, a score,
    an effect, a share, or a tiled run's summary."""
    value = row[name]
    assert isinstance(value, int | float), f"{name} is {value!r}, not a number"
    return value


class Probe(TypedDict):
    """The probe's kind, length, seed, BOS and ids: BOS + length ids, then the same again."""

    kind: str
    length: int
    seed: int
    bos: bool
    ids: list[int]


class _Settings(TypedDict):
    model: str
    allow_special: bool
    num_tokens: int
    sort: str
    version: str


class Said(TypedDict, total=False):
    """The settings a heads run's config holds where they apply."""

    tokenizer: dict[str, Any]
    encoding: str
    layers: list[int]  # [a, b): the layers shown
    threshold: float
    measure: str  # what the thumbnails drew (absent: the weights)
    probe: Probe


class Config(_Settings, Said):
    """The heads run's settings, as render/heads.py reads them (a base class holds the keys
    every file has: typing.Required is Python 3.11's)."""


class Sink(TypedDict):
    """One shown layer's sink."""

    layer: int
    first_share: float | None
    first_norm: float | None
    median_norm: float | None
    norm_ratio: float | None


class _SharesNeeded(TypedDict):
    previous_token: float
    duplicate_token: float
    induction: float


class Shares(_SharesNeeded, total=False):
    """A scan's share of documents on which each score (and each sink measure) passes the
    threshold."""

    prev: float
    first: float
    self: float


class HeadMeasures(TypedDict):
    """One head's measures, each a mean over query rows 1..T-1 (models/measures.py)."""

    layer: int
    head: int
    entropy: float  # nats; 0 = all weight on one token, ln(i+1) = uniform over row i
    prev: float  # share of attention on the previous token
    first: float  # share on token 0, the "attention sink"
    self: float  # share on the query's own token
    distance: float  # tokens back, weighted by attention


class Measure(HeadMeasures, total=False):
    """One head's measures; its scores and labels, and its effect, in every record or in none."""

    previous_token: float
    duplicate_token: float
    induction: float
    labels: list[str]
    kv_head: int
    effect: float  # with --effect: the rise of the mean loss with the head mean-ablated
    share: Shares  # a scan's summary only


class Top(TypedDict):
    """One of a scan's top heads for a score."""

    layer: int
    head: int
    share: float
    mean: float


class _TopsNeeded(TypedDict):
    previous_token: list[Top]
    duplicate_token: list[Top]
    induction: list[Top]


class Tops(_TopsNeeded, total=False):
    """A scan's top heads for each score (and each sink measure)."""

    prev: list[Top]
    first: list[Top]
    self: list[Top]


class _Counts(TypedDict):
    scored: int
    cut: int
    skipped: int
    tokens: int


class Documents(_Counts, total=False):
    skipped_because: dict[str, int]


class _ScanNeeded(TypedDict):
    documents: Documents
    threshold: float
    top: Tops


class Scan(_ScanNeeded, total=False):
    """`scan` summary's own part: the documents' counts, the threshold, the top heads."""

    corpus: str
    max_tokens: int


@dataclass(frozen=True)
class HeadsResult:
    """Every head of every shown layer of a model, summarised: `attncli heads` (and `scan`'s
    summary, over a corpus: no tokens). Its fields are its JSON's keys (measures: "heads")."""

    config: Config
    model: ModelInfo
    tokens: list[TokenInfo]
    measures: list[Measure]  # per head, in table order
    # [layers][heads, or 1 for rollout][p][p], max-pooled, p ≤ T (not in the JSON)
    thumbnails: list[list[Matrix]] = field(default_factory=list)
    weights: Any = None  # (layers, heads, T, T) float32 numpy: exact, for the page's ranking
    layers: list[Sink] = field(default_factory=list)  # per shown layer: its sink

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli heads`: every head in table order, each layer's sink."""
        return {"kind": "heads", "config": self.config, "model": self.model.to_dict(),
                "heads": self.measures, "tokens": [t.to_dict() for t in self.tokens],
                "layers": self.layers}
