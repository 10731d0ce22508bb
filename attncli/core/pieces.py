"""One tokenised piece of text, as the tokenizers make it and the token listing draws it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenPiece:
    """One token: its position, id, readable label and exact bytes."""

    index: int
    id: int | None
    label: str
    data: bytes | None
