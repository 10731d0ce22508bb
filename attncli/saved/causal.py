"""`ablate`'s and `patch`'s JSON read back into their records (records/causal.py): each document
declared as TypedDicts and read by walking them (walk.py), then checked across its parts, so
`show` draws them with the commands' own renderer."""

from __future__ import annotations

from typing import Any, TypedDict

from attncli.errors import AttnCliError
from attncli.records.causal import HOWS, METRICS, Ablation, Patching
from attncli.saved.parts import integer, items, shaped
from attncli.saved.walk import Key, Table, read


# Each object keeps the keys it does not declare (walk.py), printable, as the file has them.
class Model(TypedDict):
    path: str


class Token(TypedDict):
    id: int
    text: str


class Shown(TypedDict):
    """A top next token."""

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
    after: float | None


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


class _Ablate(TypedDict):
    model: Model
    how: str
    heads: Any  # "all", or [layer, head] pairs
    tokens: list[Token]
    at: int
    losses: list[Loss]
    top: Top


class AblateDoc(_Ablate, total=False):
    kl: float | None
    answer: Answer | None
    ranking: list[Ranked] | None
    scored_from: int


class _Attribution(TypedDict):
    grid: list[list[float]]


class Attribution(_Attribution, total=False):
    spearman: float


class Baseline(TypedDict):
    clean: float
    corrupt: float


class Pair(TypedDict):
    text: str  # one of logit-diff's tokens


class _Patch(TypedDict):
    model: Model
    clean: list[str]
    corrupt: list[str]
    metric: str
    direction: str
    at: int
    baseline: Baseline
    grid: list[list[float]]
    raw: list[list[float]]


class PatchDoc(_Patch, total=False):
    tokens: list[Pair] | None
    positions: list[list[list[float]]] | None
    attribution: Attribution | None


RECORDS: Table = {AblateDoc: {"how": Key(choices=HOWS)},
                  PatchDoc: {"metric": Key(choices=METRICS),
                             "direction": Key(choices=("denoise", "noise"))}}


def ablation_from_dict(data: Any) -> Ablation:
    """`ablate --json`'s document as the Ablation it was written from."""
    doc = read(AblateDoc, data, "", RECORDS)
    n = len(doc["tokens"])
    if not n:
        raise AttnCliError("saved file: tokens is empty")
    pairs = [] if doc["heads"] == "all" else items(doc["heads"], "heads")
    heads = [(integer(items(pair, f"heads[{k}]", 2)[0], f"heads[{k}][0]"),
              integer(pair[1], f"heads[{k}][1]")) for k, pair in enumerate(pairs)]
    for k, row in enumerate(doc["losses"]):
        integer(row["index"], f"losses[{k}].index", 1, n - 1)
    if (answer := doc.get("answer")) is not None:
        integer(answer["start"], "answer.start", 1, n - 1)
    ranking = doc.get("ranking")
    for k, ranked in enumerate(ranking or []):  # the ranking lists each head once
        for part in ("layer", "head"):
            integer(ranked[part], f"ranking[{k}].{part}", 0, len(ranking or []) - 1)
    if not heads and ranking is None:
        raise AttnCliError("saved file: heads is \"all\" but there is no ranking")
    if heads and (not doc["losses"] or any(row.get("after") is None for row in doc["losses"])):
        raise AttnCliError("saved file: losses must list each token's loss after the ablation")
    return Ablation(dict(doc["model"]), [t["text"] for t in doc["tokens"]],
                    [t["id"] for t in doc["tokens"]], doc["how"], heads,
                    integer(doc["at"], "at", 0, n - 1), [dict(r) for r in doc["losses"]],
                    {side: [dict(e) for e in doc["top"][side]] for side in ("before", "after")},
                    doc.get("kl"), None if answer is None else dict(answer),
                    None if ranking is None else [dict(r) for r in ranking],
                    integer(doc.get("scored_from", 1), "scored_from", 1, max(1, n - 1)))


def patching_from_dict(data: Any) -> Patching:
    """`patch --json`'s document as the Patching it was written from."""
    doc = read(PatchDoc, data, "", RECORDS)
    n = len(doc["clean"])
    if not n or len(doc["corrupt"]) != n:
        raise AttnCliError("saved file: clean and corrupt must hold as many tokens, at least one")
    grid = shaped(doc["grid"], "grid", None, None)
    heads = len(grid[0]) if grid else None
    shaped(doc["raw"], "raw", len(grid), heads)
    if (positions := doc.get("positions")) is not None:
        shaped(positions, "positions", len(grid), heads, n)
    attribution = doc.get("attribution")
    if attribution is not None:
        shaped(attribution["grid"], "attribution.grid", None, heads)
    if not grid and attribution is None:
        raise AttnCliError("saved file: grid is empty and there is no attribution")
    tokens = doc.get("tokens")
    if tokens is not None:
        items(tokens, "tokens", 2)
    if doc["metric"] == "logit-diff" and tokens is None:
        raise AttnCliError("saved file: metric logit-diff needs its two tokens")
    return Patching(dict(doc["model"]), doc["clean"], doc["corrupt"], doc["metric"],
                    doc["direction"], None if tokens is None else [dict(t) for t in tokens],
                    integer(doc["at"], "at", 0, n - 1),
                    {side: doc["baseline"][side] for side in ("clean", "corrupt")}, grid,
                    doc["raw"], positions, None if attribution is None else dict(attribution))
