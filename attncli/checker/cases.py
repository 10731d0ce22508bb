"""The cases `check` runs: the book's inputs and random ones, batch sizes 1 and 2, dropout off,
on (the same seed for both sides) and in eval mode, with qkv_bias where the class takes it."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.checker.kinds import Constructor
from attncli.checker.reference import Setting

# "Your journey starts with one step" as the book's six 3-d vectors (section 3.3).
BOOK_INPUTS = ((0.43, 0.15, 0.89), (0.55, 0.87, 0.66), (0.57, 0.85, 0.64),
               (0.22, 0.58, 0.33), (0.77, 0.25, 0.10), (0.05, 0.80, 0.55))
BOOK_TOKENS = ("Your", "journey", "starts", "with", "one", "step")
P = 0.5  # the dropout rate of the dropout cases (the book's example rate)


@dataclass(frozen=True)
class Case:
    """One run of both classes: inputs, constructor values and mode."""

    name: str
    x: Tensor  # (T, d_in) or (b, T, d_in)
    setting: Setting
    book: bool  # the book's inputs (their tokens name the rows)


def _random(batch: int | None, tokens: int, d_in: int, seed: int) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    shape = (tokens, d_in) if batch is None else (batch, tokens, d_in)
    return torch.randn(*shape, generator=g)  # (T, d_in) or (b, T, d_in)


def cases_for(ctor: Constructor) -> list[Case]:
    """Every case for the reader's class, in the order the report lists them."""
    kind, bias = ctor.kind, ctor.bias is not None
    book = torch.tensor(BOOK_INPUTS)  # (6, 3)
    if not kind.batched:
        out = [Case("book inputs (6 × 3), d_out=2", book, Setting(3, 2, 6), True),
               Case("random inputs (5 × 4), d_out=6", _random(None, 5, 4, 1), Setting(4, 6, 5),
                    False)]
        if bias:
            out.append(Case("random inputs, qkv_bias=True", _random(None, 5, 4, 2),
                            Setting(4, 6, 5, qkv_bias=True), False))
        return out
    h2, h3 = (2, 3) if kind.takes_heads else (1, 1)
    two = torch.stack((book, book))  # (2, 6, 3) as the book batches them
    out = [
        Case("book inputs, batch 1", book[None], Setting(3, 2, 6, num_heads=h2), True),
        Case("book inputs, batch 2", two, Setting(3, 2, 6, num_heads=h2), True),
        Case("random inputs, batch 2, context_length 8", _random(2, 5, 4, 1),
             Setting(4, 6, 8, num_heads=h3), False),
    ]
    if kind.multihead:
        out.append(Case("random inputs, batch 1, 2 heads of 4", _random(1, 5, 4, 3),
                        Setting(4, 8, 5, num_heads=2), False))
    out += [
        Case(f"book inputs, batch 2, dropout {P} (seed 123)", two,
             Setting(3, 2, 6, dropout=P, num_heads=h2), True),
        Case(f"random inputs, batch 2, dropout {P} (seed 7)", _random(2, 5, 4, 4),
             Setting(4, 6, 8, dropout=P, seed=7, num_heads=h3), False),
        Case(f"random inputs, dropout {P} in eval mode", _random(2, 5, 4, 5),
             Setting(4, 6, 8, dropout=P, training=False, num_heads=h3), False),
    ]
    if bias:
        out.append(Case("random inputs, qkv_bias=True", _random(2, 5, 4, 6),
                        Setting(4, 6, 8, qkv_bias=True, num_heads=h3), False))
    return out
