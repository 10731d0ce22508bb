"""`ablate`'s and `patch`'s JSON read back into their records (records/causal.py) by walking
the records' own annotations (walk.py), then checked across their parts, so `show` draws them
with the commands' own renderer."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypedDict

from attncli.errors import AttnCliError
from attncli.records.causal import HOWS, METRICS, Ablation, Patching
from attncli.saved.parts import cells, integer, items, need, within
from attncli.saved.walk import Key, Table, read, value


class Model(TypedDict):  # with the keys the file adds, kept printable
    path: str


class Token(TypedDict):
    id: int
    text: str


def _tokens(part: str) -> Key:
    """The ablated text's token objects, read for one part of each (its id, or its text)."""
    return Key(name="tokens", check=lambda data, at: [
        t[part] for t in value(list[Token], data, at, Key(), RECORDS)])


def _heads(data: Any, at: str) -> list[tuple[int, int]]:
    """The heads ablated together as [layer, head] pairs, or "all" (each alone: none)."""
    return [] if data == "all" else value(list[tuple[int, int]], data, at, Key(), RECORDS)


MODEL = Key(check=lambda data, at: dict(read(Model, data, at, RECORDS)))
RECORDS: Table = {
    Ablation: {"model": MODEL, "how": Key(choices=HOWS), "heads": Key(check=_heads),
               "tokens": _tokens("text"), "ids": _tokens("id"),
               "scored": Key(name="scored_from", low=1)},
    Patching: {"model": MODEL, "metric": Key(choices=METRICS),
               "direction": Key(choices=("denoise", "noise"))}}


def ablation_from_dict(data: Any) -> Ablation:
    """`ablate --json`'s document as the Ablation it was written from."""
    ablation = read(Ablation, data, "", RECORDS)
    n = len(ablation.tokens)
    if not n:
        raise AttnCliError("saved file: tokens is empty")
    for k, row in enumerate(ablation.losses):
        within(row, f"losses[{k}]", index=(1, n - 1))
    if ablation.answer is not None:
        within(ablation.answer, "answer", start=(1, n - 1))
    ranking = ablation.ranking or []
    for k, ranked in enumerate(ranking):  # the ranking lists each head once
        within(ranked, f"ranking[{k}]", layer=(0, len(ranking) - 1), head=(0, len(ranking) - 1))
    if not ablation.heads and ablation.ranking is None:
        raise AttnCliError("saved file: heads is \"all\" but there is no ranking")
    if ablation.heads and (not ablation.losses or any(
            row.get("after") is None for row in ablation.losses)):
        raise AttnCliError("saved file: losses must list each token's loss after the ablation")
    within(ablation, "", at=(0, n - 1))
    return replace(ablation, scored=integer(ablation.scored, "scored_from", 1, max(1, n - 1)))


def patching_from_dict(data: Any) -> Patching:
    """`patch --json`'s document as the Patching it was written from."""
    patching = read(Patching, data, "", RECORDS)
    n = len(patching.clean)
    if not n or len(patching.corrupt) != n:
        raise AttnCliError("saved file: clean and corrupt must hold as many tokens, at least one")
    grid = cells(patching.grid, "grid", None, None)
    heads = len(grid[0]) if grid else None
    cells(patching.raw, "raw", len(grid), heads)
    if patching.positions is not None:
        cells(patching.positions, "positions", len(grid), heads, n)
    if patching.attribution is not None:
        cells(patching.attribution["grid"], "attribution.grid", None, heads)
    elif not grid:
        raise AttnCliError("saved file: grid is empty and there is no attribution")
    if patching.tokens is not None:
        items(patching.tokens, "tokens", 2)
    elif patching.metric == "logit-diff":
        raise AttnCliError("saved file: metric logit-diff needs its two tokens")
    for side in ("clean", "corrupt"):
        need(patching.baseline, side, "baseline")
    within(patching, "", at=(0, n - 1))
    return patching
