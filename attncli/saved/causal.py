"""`ablate`'s and `patch`'s JSON read back into their records (records/causal.py), every part
the renderer reads checked, so `show` draws them with the commands' own renderer."""

from __future__ import annotations

from typing import Any

from attncli.errors import AttnCliError
from attncli.records.causal import HOWS, METRICS, Ablation, Patching
from attncli.saved.parts import (
    choice,
    integer,
    items,
    matrix,
    maybe,
    need,
    number,
    obj,
    printable,
    string,
)

Doc = dict[str, Any]
SCORE_KEYS = ("previous_token", "duplicate_token", "induction")


def _model(doc: Doc) -> Doc:
    model = obj(need(doc, "model", "the file"), "model")
    return {**printable(model), "path": string(need(model, "path", "model"), "model.path")}


def _entry(value: Any, where: str, numbers: tuple[str, ...],
           optional: tuple[str, ...] = (), texts: tuple[str, ...] = ()) -> Doc:
    """An object whose numbers (and optional ones, null allowed) and texts are checked."""
    entry = obj(value, where)
    return {**printable(entry),
            **{k: number(need(entry, k, where), f"{where}.{k}") for k in numbers},
            **{k: maybe(entry.get(k), number, f"{where}.{k}") for k in optional if k in entry},
            **{k: string(need(entry, k, where), f"{where}.{k}") for k in texts}}


def _head(value: Any, where: str, count: int) -> Doc:
    """A ranked head: its layer and head below count (the ranking lists each head once)."""
    entry = obj(value, where)
    return {**printable(entry),
            "layer": integer(need(entry, "layer", where), f"{where}.layer", 0, count - 1),
            "head": integer(need(entry, "head", where), f"{where}.head", 0, count - 1)}


def ablation_from_dict(doc: Doc) -> Ablation:
    """`ablate --json`'s document as the Ablation it was written from."""
    words = items(need(doc, "tokens", "the file"), "tokens")
    if not words:
        raise AttnCliError("saved file: tokens is empty")
    tokens = [obj(t, f"tokens[{i}]") for i, t in enumerate(words)]
    ids = [integer(need(t, "id", f"tokens[{i}]"), f"tokens[{i}].id") for i, t in enumerate(tokens)]
    labels = [string(need(t, "text", f"tokens[{i}]"), f"tokens[{i}].text")
              for i, t in enumerate(tokens)]
    n = len(tokens)
    chosen = need(doc, "heads", "the file")
    pairs = [] if chosen == "all" else [items(pair, f"heads[{k}]", 2)
                                        for k, pair in enumerate(items(chosen, "heads"))]
    heads = [(integer(layer, f"heads[{k}][0]"), integer(head, f"heads[{k}][1]"))
             for k, (layer, head) in enumerate(pairs)]
    losses = [{**_entry(r, f"losses[{k}]", ("before",), ("after",), ("token",)),
               "index": integer(need(obj(r, f"losses[{k}]"), "index", f"losses[{k}]"),
                                f"losses[{k}].index", 1, n - 1)}
              for k, r in enumerate(items(need(doc, "losses", "the file"), "losses"))]
    top = obj(need(doc, "top", "the file"), "top")
    shown = {side: [_entry(e, f"top.{side}[{k}]", ("prob",), texts=("text",))
                    for k, e in enumerate(items(need(top, side, "top"), f"top.{side}"))]
             for side in ("before", "after")}
    answer = maybe(doc.get("answer"), lambda a, w: {
        **_entry(a, w, ("before",), texts=("text",)),
        "after": maybe(obj(a, w).get("after"), number, f"{w}.after"),
        "start": integer(need(obj(a, w), "start", w), f"{w}.start", 1, n - 1)}, "answer")
    ranking = maybe(doc.get("ranking"), lambda rows, w: [
        {**_entry(r, f"{w}[{k}]", ("effect", "kl", *SCORE_KEYS), ("loss_change",
                                                                   "answer_change")),
         **_head(r, f"{w}[{k}]", len(rows))} for k, r in enumerate(items(rows, w))], "ranking")
    if not heads and ranking is None:
        raise AttnCliError("saved file: heads is \"all\" but there is no ranking")
    if heads and (not losses or any(row.get("after") is None for row in losses)):
        raise AttnCliError("saved file: losses must list each token's loss after the ablation")
    return Ablation(_model(doc), labels, ids, choice(need(doc, "how", "the file"), "how", HOWS),
                    heads, integer(need(doc, "at", "the file"), "at", 0, n - 1), losses, shown,
                    maybe(doc.get("kl"), number, "kl"), answer, ranking,
                    integer(doc.get("scored_from", 1), "scored_from", 1, max(1, n - 1)))


def patching_from_dict(doc: Doc) -> Patching:
    """`patch --json`'s document as the Patching it was written from."""
    clean, corrupt = ([string(t, f"{side}[{i}]") for i, t in
                       enumerate(items(need(doc, side, "the file"), side))]
                      for side in ("clean", "corrupt"))
    if not clean or len(clean) != len(corrupt):
        raise AttnCliError("saved file: clean and corrupt must hold as many tokens, at least one")
    n = len(clean)
    grid = matrix(need(doc, "grid", "the file"), "grid", None, None)
    heads = len(grid[0]) if grid else None
    raw = matrix(need(doc, "raw", "the file"), "raw", len(grid), heads)
    positions = maybe(doc.get("positions"), lambda v, w: [
        matrix(layer, f"{w}[{k}]", heads, n) for k, layer in enumerate(items(v, w, len(grid)))],
        "positions")
    attribution = maybe(doc.get("attribution"), obj, "attribution")
    if attribution is not None:
        found = matrix(need(attribution, "grid", "attribution"), "attribution.grid", None,
                       heads)
        attribution = {**printable(attribution), "grid": found, **(
            {"spearman": number(attribution["spearman"], "attribution.spearman")}
            if "spearman" in attribution else {})}
    if not grid and attribution is None:
        raise AttnCliError("saved file: grid is empty and there is no attribution")
    tokens = maybe(doc.get("tokens"), lambda v, w: [
        _entry(t, f"{w}[{k}]", (), texts=("text",)) for k, t in enumerate(items(v, w, 2))],
        "tokens")
    base = printable(obj(need(doc, "baseline", "the file"), "baseline"))
    metric = choice(need(doc, "metric", "the file"), "metric", METRICS)
    if metric == "logit-diff" and tokens is None:
        raise AttnCliError("saved file: metric logit-diff needs its two tokens")
    return Patching(_model(doc), clean, corrupt, metric,
                    choice(need(doc, "direction", "the file"), "direction",
                           ("denoise", "noise")), tokens,
                    integer(need(doc, "at", "the file"), "at", 0, n - 1),
                    {side: number(need(base, side, "baseline"), f"baseline.{side}")
                     for side in ("clean", "corrupt")},
                    grid, raw, positions, attribution)  # type: ignore[arg-type]
