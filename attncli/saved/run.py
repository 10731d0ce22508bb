"""A run's JSON (naive or tiled, explain's too, one of compare's variants) back into its Result:
its records walked, each table of numbers of the shape its rule in SHAPES names (the sizes from
the tokens, config and window), then what no rule says checked against the other parts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from attncli.core.pieces import Prediction, Summary, Window
from attncli.core.result import STAGES, LongStats, QueryRow, Result, RunConfig, TokenInfo
from attncli.core.variants import HEAD_DIM_STAGES, TOKEN_STAGES
from attncli.errors import AttnCliError
from attncli.saved.config import RECORDS, config_from, model_from
from attncli.saved.parts import (
    cells,
    check_cells,
    integer,
    items,
    maybe,
    need,
    obj,
    span,
    string,
    within,
)
from attncli.saved.walk import Key, read

# The tiled path's corner without --rows/--cols (long.run.DEFAULT_WINDOW; a test keeps them equal).
CORNER = 64


def tokens_from(data: Any, where: str = "tokens", first: int = 0) -> list[TokenInfo]:
    """attncli's token objects, labels escaped, each index in order from first (from 0: at least
    one)."""
    tokens = [read(TokenInfo, t, f"{where}[{k}]", RECORDS)
              for k, t in enumerate(items(data, where))]
    for k, token in enumerate(tokens):
        within(token, f"{where}[{k}]", index=(first + k, first + k))
    if not tokens and not first:
        raise AttnCliError(f"saved file: {where} is empty")
    return tokens


def window_from(data: Any, size: int) -> Window:
    """{"rows": [a, b], "cols": [c, d]}, half-open, inside the size tokens."""
    window = read(Window, data, "window", RECORDS)
    return {**window, "rows": span(window["rows"], "window.rows", size),
            "cols": span(window["cols"], "window.cols", size)}


# Each part's shape by its dimensions: H the heads held, W the weights' matrices (a rollout's:
# one, heads averaged), N the tokens, R × C the window a tiled run holds, K the top-k keys per
# query, I and D config.d_in and d_out (0: any), * as wide as its first row; ? may hold null (a
# masked cell). A stage not named here is N *. --measure norm's "norm" is shaped as weights.
SHAPES = {"weights": "W N N ?", "tiled weights": "W R C ?", "context": "N D", "query": "W N ?",
          "stats.lse": "H N", "stats.entropy": "H N", "stats.top_k.weight": "H N K",
          **{f"stages.{name}": "H N N ?" for name in TOKEN_STAGES},
          **{f"stages.{name}": "H N *" for name in HEAD_DIM_STAGES},
          "stages.inputs": "N I", "stages.context": "N D"}


def shaped(data: Any, where: str, sizes: dict[str, int | None], rule: str = "") -> Any:
    """data as its rule in SHAPES (or rule) says, each dimension's size from sizes."""
    dims = (rule or SHAPES.get(where, "N *")).split()
    return cells(data, where, *[sizes.get(d) for d in dims if d != "?"], nulls="?" in dims)


def stages_from(data: Any, config: RunConfig, sizes: dict[str, int | None]) -> dict[str, Any]:
    """The stages kept (null: one the variant lacks), each of its stage's shape."""
    stages = {}
    for name, value in obj(data, "stages").items():
        if name not in STAGES:
            raise AttnCliError(f"saved file: stages holds {string(name, 'a stage name')!r}, "
                               f"not a stage (stages are {', '.join(STAGES)})")
        stages[name] = maybe(value, shaped, f"stages.{name}", sizes)
    heads_context = stages.get("heads_context")
    if heads_context and len(heads_context[0]) % config.heads:
        raise AttnCliError(f"saved file: stages.heads_context rows have "
                           f"{len(heads_context[0])} values, which config.heads "
                           f"{config.heads} does not divide")
    if stages.get("scaled") is not None and stages.get("keys") is None \
            and config.d_out % config.heads:
        raise AttnCliError("saved file: stages.scaled without keys, and config.heads does not "
                           "divide config.d_out: d_k is unknown")
    return stages


def query_from(data: Any, tokens: list[TokenInfo], sizes: dict[str, int | None]) -> QueryRow:
    """The query's index and its weights over every key, per head."""
    query = read(QueryRow, data, "query", {QueryRow: {"weights": Key(
        check=lambda held, at: shaped(held, at, sizes, SHAPES["query"]))}})
    within(query, "query", index=(0, len(tokens) - 1))
    return replace(query, token=tokens[query.index].text)


def predictions_from(data: Any, size: int) -> list[Prediction]:
    """--predict's entries, each at a token, the logit lens's in every entry or in none."""
    entries = [read(Prediction, e, f"predictions[{k}]", RECORDS)
               for k, e in enumerate(items(data, "predictions"))]
    for k, entry in enumerate(entries):
        within(entry, f"predictions[{k}]", index=(0, size - 1))
        if ("lens" in entry) != ("lens" in entries[0]):
            raise AttnCliError(f"saved file: predictions[{k}] and predictions[0] differ: one "
                               "has a lens, the other none")
    return entries


def long_from(doc: dict[str, Any], sizes: dict[str, int | None], top_k: int) -> LongStats:
    """A tiled run's per-row stats and per-head summary."""
    stats = obj(doc["stats"], "stats")
    out: dict[str, Any] = {name: shaped(need(stats, name, "stats"), f"stats.{name}", sizes)
                           for name in ("lse", "entropy")}
    top = obj(need(stats, "top_k", "stats"), "stats.top_k")
    index = items(need(top, "index", "stats.top_k"), "stats.top_k.index", sizes["H"])
    first = items(index[0], "stats.top_k.index[0]", sizes["N"])[0]
    k = len(items(first, "stats.top_k.index[0][0]"))
    if k > top_k:
        raise AttnCliError(f"saved file: stats.top_k holds {k} keys per query, config.top_k is "
                           f"{top_k}")
    n = len(index[0])
    ranks = [[[integer(j, f"stats.top_k.index[{h}][{i}][{r}]", -1, n - 1)
               for r, j in enumerate(items(keys, f"stats.top_k.index[{h}][{i}]", k))]
              for i, keys in enumerate(items(m, f"stats.top_k.index[{h}]", n))]
             for h, m in enumerate(index)]
    weight = shaped(need(top, "weight", "stats.top_k"), "stats.top_k.weight", {**sizes, "K": k})
    out["top_k"] = {"index": ranks, "weight": weight}
    summary = [read(Summary, part, f"summary[{h}]", RECORDS) for h, part
               in enumerate(items(need(doc, "summary", "the file"), "summary", sizes["H"]))]
    return LongStats(stats=out, summary=summary)


def result_from_dict(doc: dict[str, Any]) -> Result:
    """A run's (or explain's, or a long run's) JSON back into its Result, every part checked;
    with config.measure, what "weights" holds instead: norm's renormalised lengths (beside their
    raw "norm"), or rollout's one matrix (heads averaged)."""
    for key in ("variant", "config", "tokens", "weights", "context"):
        if key not in doc:
            raise AttnCliError(f"attncli JSON without {key!r}: not a run's output")
    variant = string(doc["variant"], "variant")
    tokens = tokens_from(doc["tokens"])
    size = len(tokens)
    config = config_from(doc["config"], size)
    heads = 1 if config.head is not None else config.heads
    model = maybe(doc.get("model"), model_from, config)
    tiled = config.impl == "tiled"
    if tiled != ("stats" in doc):
        raise AttnCliError(f"saved file: config.impl is {config.impl!r} but the file "
                           f"{'has no' if tiled else 'has'} tiled stats")
    window = None if doc.get("window") is None else window_from(doc["window"], size)
    if tiled and window is None:
        raise AttnCliError("saved file: a tiled run's JSON without its window")
    if (config.measure == "norm") != ("norm" in doc):
        raise AttnCliError('saved file: "norm" without config.measure "norm"' if "norm" in doc
                           else 'saved file: config.measure is "norm" but the file has no "norm"')
    (a, b), (c, d) = (window["rows"], window["cols"]) if window else ((0, 0), (0, 0))
    sizes = {"H": heads, "W": 1 if config.measure == "rollout" else heads, "N": size,
             "R": b - a, "C": d - c, "I": config.d_in or None, "D": config.d_out or None}
    stages = doc.get("stages")  # its type is checked by stages_from, below
    held = 1 + ("norm" in doc) + (len(stages) if isinstance(stages, dict) else 0)
    check_cells(heads * (held * (b - a) * (d - c) + size * (3 + 2 * (config.top_k or 0)))
                if tiled else heads * size * size * held,
                "the saved tiled run" if tiled else "the saved run")
    rule = SHAPES["tiled weights" if tiled else "weights"]
    weights = shaped(doc["weights"], "weights", sizes, rule)
    norm = shaped(doc["norm"], "norm", sizes, rule) if "norm" in doc else None
    context = shaped(doc["context"], "context", sizes)
    stages = maybe(stages, stages_from, config, sizes) or {}
    present = tuple(name for name in STAGES if name in ("weights", "context")
                    or stages.get(name) is not None)
    return Result(variant=variant, config=config, tokens=tokens, weights=weights,
                  context=context, stages=stages, present=present, model=model,
                  query=maybe(doc.get("query"), query_from, tokens, sizes), window=window,
                  long=long_from(doc, sizes, config.top_k or 0) if tiled else None, norm=norm,
                  predictions=maybe(doc.get("predictions"), predictions_from, size))
