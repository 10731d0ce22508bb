"""Weights saved by another tool, a [N][N] or [H][N][N] list, or {"tokens": [...],
"weights": ...}, checked and read as a Result with only the weights stage."""

from __future__ import annotations

from typing import Any

from attncli.core.result import Result, RunConfig, TokenInfo
from attncli.errors import AttnCliError
from attncli.saved.config import RECORDS
from attncli.saved.parts import check_cells, integer, items, obj, row, string
from attncli.saved.walk import Reader
from attncli.version import __version__


def weights_stack(data: Any, what: str = "weights") -> list[list[list[float | None]]]:
    """[H][N][N] weights from a [N][N] or [H][N][N] list, each matrix square and the same size."""
    if not isinstance(data, list) or not data:
        raise AttnCliError(f"{what} must be a [N][N] or [H][N][N] list of numbers")
    three = isinstance(data[0], list) and bool(data[0]) and isinstance(data[0][0], list)
    heads = data if three else [data]
    if not isinstance(heads[0], list) or not heads[0]:
        raise AttnCliError(f"{what} must be a non-empty list of rows (a [N][N] list)")
    size = len(heads[0])
    check_cells(len(heads) * size * size, f"{what}: {len(heads)} head(s) of {size}×{size}")
    stack = []
    for h, m in enumerate(heads):
        name = f"{what} head {h}" if len(heads) > 1 else what
        if not isinstance(m, list) or not m or not all(isinstance(r, list) for r in m):
            raise AttnCliError(f"{name} must be a non-empty list of rows (a [N][N] list)")
        if len(m) != size:
            raise AttnCliError(f"{what}: head {h} is {len(m)}×{size}; every head must be "
                               f"{size}×{size}")
        for i, r in enumerate(m):
            if len(r) != size:
                raise AttnCliError(f"{name}: row {i} has {len(r)} values, expected {size} "
                                   "(weights are square: one row and one column per token)")
        stack.append([row(r, f"{name}[{i}]", size, nulls=True) for i, r in enumerate(m)])
    return stack


def _label(token: Any, i: int) -> TokenInfo:
    """Another tool's token i: its label, or a token object (with its index, i)."""
    at = f"tokens[{i}]"
    if isinstance(token, str):
        return TokenInfo(i, None, string(token, at))
    info = Reader(RECORDS).read(TokenInfo, {"index": i, **obj(token, at)}, at)
    integer(info.index, f"{at}.index", i, i)
    return info


def weights_result(weights: Any, tokens: Any) -> Result:
    """Bare weights (and token labels) as a Result with only the weights stage."""
    stack = weights_stack(weights)
    size = len(stack[0])
    labels = ([TokenInfo(i, None, str(i)) for i in range(size)] if tokens is None
              else [_label(t, i) for i, t in enumerate(items(tokens, "tokens", size))])
    config = RunConfig(source="saved", num_tokens=size, d_in=0, d_out=0, heads=len(stack),
                       impl="naive", version=__version__)
    return Result(variant="saved", config=config, tokens=labels,
                  weights=stack, context=[], stages={"weights": stack}, present=("weights",))
