"""The small plain records a result is made of: one tokenised piece of text, as the tokenizers
make it and the token listing draws it; and the parts of a run's JSON kept as dicts, declared as
the document has them (the tiled run's window and summary, --predict's entries)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


@dataclass(frozen=True)
class TokenPiece:
    """One token: its position, id, readable label and exact bytes."""

    index: int
    id: int | None
    label: str
    data: bytes | None


class Window(TypedDict):  # the tiled run's window: rows [a, b) × cols [c, d)
    rows: list[int]
    cols: list[int]


class Summary(TypedDict):  # one head's summary of a tiled run
    head: int
    entropy: float
    first: float
    prev: float
    self: float
    top_k_mass: float
    distance: float


class Guess(TypedDict):  # one next-token candidate (with "bytes" where its tokenizer has them)
    id: int
    text: str
    prob: float
    logit: float


class _Prediction(TypedDict):
    index: int
    token: str
    top: list[Guess]


class Prediction(_Prediction, total=False):  # --predict's at one position; explain's lens too
    lens: list[Guess]
