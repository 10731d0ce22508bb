"""A run's JSON (naive or tiled, explain's too, one of compare's variants) back into its Result,
every part checked against the others: tokens, config, weights, context, stages, window,
query, model, and a tiled run's stats and summary."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypedDict, cast

from attncli.core.result import STAGES, LongStats, QueryRow, Result, RunConfig, TokenInfo
from attncli.core.variants import HEAD_DIM_STAGES, TOKEN_STAGES
from attncli.errors import AttnCliError
from attncli.saved.config import RECORDS, config_from, model_from
from attncli.saved.parts import (
    check_cells,
    integer,
    items,
    matrix,
    maybe,
    need,
    obj,
    row,
    stack,
    string,
)
from attncli.saved.walk import read

# The tiled path's corner without --rows/--cols (long.run.DEFAULT_WINDOW; a test keeps them equal).
CORNER = 64


class Window(TypedDict):
    rows: list[int]
    cols: list[int]


class Summary(TypedDict):
    """One head's summary of a tiled run."""

    head: int
    entropy: float
    first: float
    prev: float
    self: float
    top_k_mass: float
    distance: float


def tokens_from(data: Any, size: int | None, where: str = "tokens", strict: bool = True,
                first: int = 0) -> list[TokenInfo]:
    """Token records (strict: attncli's objects, each index in order from first, at least one),
    labels escaped."""
    out = []
    for i, t in enumerate(items(data, where, size), first):
        at = f"{where}[{i - first}]"
        if isinstance(t, str) and not strict:
            out.append(TokenInfo(i, None, string(t, at)))
            continue
        token = read(TokenInfo, t if strict or "index" in obj(t, at) else {**t, "index": i},
                     at, RECORDS)
        out.append(replace(token, index=integer(token.index, f"{at}.index", i, i)))
    if strict and not out and not first:
        raise AttnCliError(f"saved file: {where} is empty")
    return out


def window_from(data: Any, size: int) -> dict[str, list[int]]:
    """{"rows": [a, b], "cols": [c, d]}, half-open, inside the size tokens."""
    window = cast(dict[str, list[int]], read(Window, data, "window", RECORDS))
    for axis, span in window.items():
        a = integer(items(span, f"window.{axis}", 2)[0], f"window.{axis}[0]", 0, size - 1)
        integer(span[1], f"window.{axis}[1]", a + 1, size)
    return window


def _stage(name: str, data: Any, config: RunConfig, size: int, heads: int) -> Any:
    where = f"stages.{name}"
    if name in TOKEN_STAGES:
        return stack(data, where, heads, size, size, nulls=True)
    if name in HEAD_DIM_STAGES:
        return stack(data, where, heads, size, None)
    cells = matrix(data, where, size, None)
    if name == "inputs" and config.d_in and len(cells[0]) != config.d_in:
        raise AttnCliError(f"saved file: {where} rows have {len(cells[0])} values, "
                           f"config.d_in is {config.d_in}")
    if name == "heads_context" and len(cells[0]) % config.heads:
        raise AttnCliError(f"saved file: {where} rows have {len(cells[0])} values, which "
                           f"config.heads {config.heads} does not divide")
    if name == "context" and config.d_out and len(cells[0]) != config.d_out:
        raise AttnCliError(f"saved file: {where} rows have {len(cells[0])} values, "
                           f"config.d_out is {config.d_out}")
    return cells


def stages_from(data: Any, config: RunConfig, size: int, heads: int) -> dict[str, Any]:
    """The stages kept (null: one the variant lacks), each of its stage's shape."""
    stages = {}
    for name, value in obj(data, "stages").items():
        if name not in STAGES:
            raise AttnCliError(f"saved file: stages holds {string(name, 'a stage name')!r}, "
                               f"not a stage (stages are {', '.join(STAGES)})")
        stages[name] = maybe(value, lambda v, n=name: _stage(n, v, config, size, heads))
    if stages.get("scaled") is not None and stages.get("keys") is None \
            and config.d_out % config.heads:
        raise AttnCliError("saved file: stages.scaled without keys, and config.heads does not "
                           "divide config.d_out: d_k is unknown")
    return stages


def query_from(data: Any, tokens: list[TokenInfo], heads: int) -> QueryRow:
    """The query's index and its weights over every key, per head."""
    doc = obj(data, "query")
    index = integer(need(doc, "index", "query"), "query.index", 0, len(tokens) - 1)
    string(need(doc, "token", "query"), "query.token")
    rows = [row(r, f"query.weights[{h}]", len(tokens), nulls=True)
            for h, r in enumerate(items(need(doc, "weights", "query"), "query.weights", heads))]
    return QueryRow(index, tokens[index].text, rows)


def long_from(doc: dict[str, Any], size: int, heads: int, top_k: int) -> LongStats:
    """A tiled run's per-row stats and per-head summary."""
    stats = obj(doc["stats"], "stats")
    out: dict[str, Any] = {name: matrix(need(stats, name, "stats"), f"stats.{name}", heads, size)
                           for name in ("lse", "entropy")}
    top = obj(need(stats, "top_k", "stats"), "stats.top_k")
    index = items(need(top, "index", "stats.top_k"), "stats.top_k.index", heads)
    first = items(index[0], "stats.top_k.index[0]", size)[0]
    k = len(items(first, "stats.top_k.index[0][0]"))
    if k > top_k:
        raise AttnCliError(f"saved file: stats.top_k holds {k} keys per query, config.top_k is "
                           f"{top_k}")
    ranks = [[[integer(j, f"stats.top_k.index[{h}][{i}][{r}]", -1, size - 1)
               for r, j in enumerate(items(keys, f"stats.top_k.index[{h}][{i}]", k))]
              for i, keys in enumerate(items(m, f"stats.top_k.index[{h}]", size))]
             for h, m in enumerate(index)]
    weight = stack(need(top, "weight", "stats.top_k"), "stats.top_k.weight", heads, size, k)
    out["top_k"] = {"index": ranks, "weight": weight}
    summary = [dict(read(Summary, part, f"summary[{h}]", RECORDS)) for h, part
               in enumerate(items(need(doc, "summary", "the file"), "summary", heads))]
    return LongStats(stats=out, summary=summary)


def result_from_dict(doc: dict[str, Any]) -> Result:
    """A run's (or explain's, or a long run's) JSON back into its Result, every part checked."""
    for key in ("variant", "config", "tokens", "weights", "context"):
        if key not in doc:
            raise AttnCliError(f"attncli JSON without {key!r}: not a run's output")
    variant = string(doc["variant"], "variant")
    tokens = tokens_from(doc["tokens"], None)
    size = len(tokens)
    config = config_from(doc["config"], size)
    heads = 1 if config.head is not None else config.heads
    model = maybe(doc.get("model"), model_from, config)
    tiled = config.impl == "tiled"
    if tiled != ("stats" in doc):
        raise AttnCliError(f"saved file: config.impl is {config.impl!r} but the file "
                           f"{'has no' if tiled else 'has'} tiled stats")
    window = None if doc.get("window") is None else window_from(doc["window"], size)
    if tiled:
        if window is None:
            raise AttnCliError("saved file: a tiled run's JSON without its window")
        (a, b), (c, d) = window["rows"], window["cols"]
        check_cells(heads * ((b - a) * (d - c) + size * (3 + 2 * (config.top_k or 0))),
                    "the saved tiled run")
        weights = stack(doc["weights"], "weights", heads, b - a, d - c, nulls=True)
        long = long_from(doc, size, heads, config.top_k or 0)
    else:
        saved_stages = doc.get("stages")  # its type is checked by stages_from, below
        count = len(saved_stages) if isinstance(saved_stages, dict) else 0
        check_cells(heads * size * size * (1 + count), "the saved run")
        weights = stack(doc["weights"], "weights", heads, size, size, nulls=True)
        long = None
    context = matrix(doc["context"], "context", size, config.d_out or None)
    stages = maybe(doc.get("stages"), stages_from, config, size, heads) or {}
    present = tuple(name for name in STAGES if name in ("weights", "context")
                    or stages.get(name) is not None)
    query = maybe(doc.get("query"), query_from, tokens, heads)
    return Result(variant=variant, config=config, tokens=tokens, weights=weights,
                  context=context, stages=stages, present=present, model=model, query=query,
                  window=window, long=long)


MEASURES = ("norm", "rollout")  # what config.measure may say "weights" holds instead


def run_from(data: dict[str, Any]) -> Result:
    """A run's JSON back into its Result; with config.measure, what it holds checked too: norm's
    raw lengths ("norm", shaped as weights), or rollout's one matrix (heads averaged)."""
    config = data.get("config")
    measure = config.get("measure") if isinstance(config, dict) else None
    if measure is None:
        if "norm" in data:
            raise AttnCliError('saved file: "norm" without config.measure "norm"')
        return result_from_dict(data)
    if measure not in MEASURES:
        raise AttnCliError(f"saved file: config.measure must be one of {', '.join(MEASURES)} "
                           f"(got {measure!r})")
    doc = dict(data)
    if measure == "rollout":
        # One matrix for every head: checked as each head's would be, then held once.
        heads = config.get("heads") if isinstance(config, dict) else None
        held = data.get("weights")
        if not isinstance(held, list) or len(held) != 1 or not isinstance(heads, int) \
                or not 1 <= heads <= 4096:
            raise AttnCliError("saved file: a rollout's weights are one matrix ([1][N][N]) "
                               "beside config.heads")
        doc["weights"] = held * heads
        query = data.get("query")
        if isinstance(query, dict) and isinstance(query.get("weights"), list) \
                and len(query["weights"]) == 1:
            doc["query"] = {**query, "weights": query["weights"] * heads}
    elif "norm" not in data:
        raise AttnCliError('saved file: config.measure is "norm" but the file has no "norm"')
    result = result_from_dict(doc)
    result = replace(result, config=replace(result.config, measure=measure))
    if measure == "norm":
        norm = result_from_dict({**doc, "weights": data["norm"], "query": None}).weights
        return replace(result, norm=norm)
    query = result.query
    return replace(result, weights=result.weights[:1],
                   query=None if query is None else replace(query, weights=query.weights[:1]))
