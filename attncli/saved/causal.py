"""`ablate`'s and `patch`'s JSON read back into their records (records/causal.py) by walking
the records' own annotations, bounded by the text's n tokens (R: the heads ranked; L × G: the
patched grid's layers and heads), then checked across their parts, so `show` draws them with
the commands' own renderer."""

from __future__ import annotations

from typing import Any, TypedDict

from attncli.errors import AttnCliError
from attncli.records.causal import (
    HOWS,
    METRICS,
    Ablation,
    Answer,
    Attribution,
    Loss,
    Patching,
    Ranked,
)
from attncli.saved.parts import items, need
from attncli.saved.walk import Key, Reader, Table


class Model(TypedDict):  # with the keys the file adds, kept printable
    path: str


class Token(TypedDict):
    id: int
    text: str


def _tokens(part: str) -> Key:
    """The ablated text's token objects, read for one part of each (its id, or its text)."""
    return Key(name="tokens", check=lambda data, at: [
        t[part] for t in Reader(RECORDS).value(list[Token], data, at, Key())])


def _heads(data: Any, at: str) -> list[tuple[int, int]]:
    """The heads ablated together as [layer, head] pairs, or "all" (each alone: none)."""
    return [] if data == "all" else Reader(RECORDS).value(list[tuple[int, int]], data, at, Key())


MODEL = Key(check=lambda data, at: dict(Reader(RECORDS).read(Model, data, at)))
RECORDS: Table = {
    Ablation: {"model": MODEL, "how": Key(choices=HOWS), "heads": Key(check=_heads),
               "tokens": _tokens("text"), "ids": _tokens("id"), "at": Key(high="n-1"),
               "scored": Key(name="scored_from", low=1, high="scored")},
    Loss: {"index": Key(low=1, high="n-1")}, Answer: {"start": Key(low=1, high="n-1")},
    Ranked: {"layer": Key(high="R-1"), "head": Key(high="R-1")},  # each head once
    Patching: {"model": MODEL, "metric": Key(choices=METRICS), "at": Key(high="n-1"),
               "direction": Key(choices=("denoise", "noise")), "tokens": Key(length=2),
               "grid": Key(shape="* *"), "raw": Key(shape="L G"),
               "positions": Key(shape="L G n")},
    Attribution: {"grid": Key(shape="* G")}}


def ablation_from_dict(data: dict[str, Any]) -> Ablation:
    """`ablate --json`'s document as the Ablation it was written from."""
    if not (n := len(items(need(data, "tokens", "the file"), "tokens"))):
        raise AttnCliError("saved file: tokens is empty")
    ranking = data.get("ranking")
    ablation = Reader(RECORDS, {"n": n, "scored": max(1, n - 1), "R": len(
        ranking) if isinstance(ranking, list) else 0}).read(Ablation, data)
    if not ablation.heads and ablation.ranking is None:
        raise AttnCliError("saved file: heads is \"all\" but there is no ranking")
    if ablation.heads and (not ablation.losses or any(
            row.get("after") is None for row in ablation.losses)):
        raise AttnCliError("saved file: losses must list each token's loss after the ablation")
    return ablation


def patching_from_dict(data: dict[str, Any]) -> Patching:
    """`patch --json`'s document as the Patching it was written from."""
    n = len(items(need(data, "clean", "the file"), "clean"))
    if not n or len(items(need(data, "corrupt", "the file"), "corrupt")) != n:
        raise AttnCliError("saved file: clean and corrupt must hold as many tokens, at least one")
    reader = Reader(RECORDS, {"n": n})
    grid = reader.shaped(need(data, "grid", "the file"), "grid", "* *")
    reader.sizes.update(L=len(grid), G=len(grid[0]) if grid else None)
    patching = reader.read(Patching, data)
    if patching.attribution is None and not grid:
        raise AttnCliError("saved file: grid is empty and there is no attribution")
    if patching.tokens is None and patching.metric == "logit-diff":
        raise AttnCliError("saved file: metric logit-diff needs its two tokens")
    for side in ("clean", "corrupt"):
        need(patching.baseline, side, "baseline")
    return patching
