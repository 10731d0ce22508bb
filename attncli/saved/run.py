"""A run's JSON (naive or tiled, explain's too, one of compare's variants) back into its Result,
walked whole: each table of numbers of the shape its Key names, the sizes (N tokens, H heads held,
W matrices of weights, R × C the window held, I and D config.d_in and d_out) read first from the
tokens, config and window; then what no Key says checked against the other parts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from attncli.core.pieces import Prediction, Summary, Window
from attncli.core.result import STAGES, LongStats, QueryRow, Result, RunConfig
from attncli.core.variants import HEAD_DIM_STAGES, TOKEN_STAGES
from attncli.errors import AttnCliError
from attncli.saved.config import MODEL
from attncli.saved.config import RECORDS as SHARED
from attncli.saved.parts import check_cells, integer, items, maybe, need, obj, string
from attncli.saved.walk import Key, Reader, Table

# The tiled path's corner without --rows/--cols (long.run.DEFAULT_WINDOW; a test keeps them equal).
CORNER = 64
WEIGHTS = Key(shape="W R C ?")  # a rollout's: one matrix, heads averaged; ? a masked cell
RECORDS: Table = {**SHARED, Result: {
    "tokens": Key(counts="index=0"), "weights": WEIGHTS, "norm": WEIGHTS,
    "context": Key(shape="N D"), "model": MODEL,
    **{name: Key(skip=True) for name in ("stages", "present", "long")}},
    QueryRow: {"index": Key(high="N-1"), "weights": Key(shape="W N ?")},
    Window: {"rows": Key(span="N"), "cols": Key(span="N")}, Prediction: {"index": Key(high="N-1")}}
# Each stage's shape: the token stages as the weights, the head-dim ones as wide as their rows.
SHAPES = {**{name: "H N N ?" for name in TOKEN_STAGES}, **{name: "H N *" for name in
                                                            HEAD_DIM_STAGES},
          "inputs": "N I", "context": "N D"}


def result_from_dict(doc: dict[str, Any]) -> Result:
    """A run's (or explain's, or a long run's) JSON back into its Result, every part checked;
    with config.measure, what "weights" holds instead: norm's renormalised lengths (beside their
    raw "norm"), or rollout's one matrix (heads averaged)."""
    for key in ("variant", "config", "tokens", "weights", "context"):
        if key not in doc:
            raise AttnCliError(f"attncli JSON without {key!r}: not a run's output")
    if not (size := len(items(doc["tokens"], "tokens"))):
        raise AttnCliError("saved file: tokens is empty")
    reader = Reader(RECORDS, {"N": size})
    config = reader.read(RunConfig, doc["config"], "config")
    tiled = config.impl == "tiled"
    if tiled != ("stats" in doc):
        raise AttnCliError(f"saved file: config.impl is {config.impl!r} but the file "
                           f"{'has no' if tiled else 'has'} tiled stats")
    window = None if doc.get("window") is None else reader.read(Window, doc["window"], "window")
    if tiled and window is None:
        raise AttnCliError("saved file: a tiled run's JSON without its window")
    if (config.measure == "norm") != ("norm" in doc):
        raise AttnCliError('saved file: "norm" without config.measure "norm"' if "norm" in doc
                           else 'saved file: config.measure is "norm" but the file has no "norm"')
    (a, b), (c, d) = (window["rows"], window["cols"]) if window and tiled else ((0, size),) * 2
    heads = 1 if config.head is not None else config.heads
    reader.sizes.update(H=heads, W=1 if config.measure == "rollout" else heads, R=b - a, C=d - c,
                        I=config.d_in or None, D=config.d_out or None)
    stages = doc.get("stages")  # its type is checked by _stages, below
    held = 1 + ("norm" in doc) + (len(stages) if isinstance(stages, dict) else 0)
    check_cells(heads * (held * (b - a) * (d - c) + size * (3 + 2 * (config.top_k or 0)))
                if tiled else heads * size * size * held,
                "the saved tiled run" if tiled else "the saved run")
    result = reader.read(Result, doc)
    if result.model is not None and result.model.heads != config.heads:
        raise AttnCliError(f"saved file: model.heads is {result.model.heads}, config.heads "
                           f"{config.heads}")
    stages = maybe(stages, _stages, reader, config) or {}
    present = tuple(name for name in STAGES if name in ("weights", "context")
                    or stages.get(name) is not None)
    predictions = result.predictions or []
    for k, entry in enumerate(predictions):
        if ("lens" in entry) != ("lens" in predictions[0]):
            raise AttnCliError(f"saved file: predictions[{k}] and predictions[0] differ: one "
                               "has a lens, the other none")
    query = result.query
    return replace(result, stages=stages, present=present,
                   config=config if tiled else replace(config, top_k=None, pool=None),
                   query=query and replace(query, token=result.tokens[query.index].text),
                   long=_long(doc, reader, config.top_k or 0) if tiled else None)


def _stages(data: Any, reader: Reader, config: RunConfig) -> dict[str, Any]:
    """The stages kept (null: one the variant lacks), each of its stage's shape."""
    stages = {}
    for name, value in obj(data, "stages").items():
        if name not in STAGES:
            raise AttnCliError(f"saved file: stages holds {string(name, 'a stage name')!r}, "
                               f"not a stage (stages are {', '.join(STAGES)})")
        stages[name] = maybe(value, reader.shaped, f"stages.{name}", SHAPES.get(name, "N *"))
    if (heads_context := stages.get("heads_context")) and len(heads_context[0]) % config.heads:
        raise AttnCliError(f"saved file: stages.heads_context rows have "
                           f"{len(heads_context[0])} values, which config.heads "
                           f"{config.heads} does not divide")
    if stages.get("scaled") is not None and stages.get("keys") is None \
            and config.d_out % config.heads:
        raise AttnCliError("saved file: stages.scaled without keys, and config.heads does not "
                           "divide config.d_out: d_k is unknown")
    return stages


def _long(doc: dict[str, Any], reader: Reader, top_k: int) -> LongStats:
    """A tiled run's per-row stats (each head's top keys: K of them, at most config.top_k) and
    per-head summary."""
    stats = obj(doc["stats"], "stats")
    out: dict[str, Any] = {name: reader.shaped(need(stats, name, "stats"), f"stats.{name}",
                                               "H N") for name in ("lse", "entropy")}
    top = obj(need(stats, "top_k", "stats"), "stats.top_k")
    index = items(need(top, "index", "stats.top_k"), "stats.top_k.index", reader.sizes["H"])
    first = items(index[0], "stats.top_k.index[0]", reader.sizes["N"])[0]
    if (k := len(items(first, "stats.top_k.index[0][0]"))) > top_k:
        raise AttnCliError(f"saved file: stats.top_k holds {k} keys per query, config.top_k is "
                           f"{top_k}")
    n = len(index[0])
    ranks = [[[integer(j, f"stats.top_k.index[{h}][{i}][{r}]", -1, n - 1)
               for r, j in enumerate(items(keys, f"stats.top_k.index[{h}][{i}]", k))]
              for i, keys in enumerate(items(m, f"stats.top_k.index[{h}]", n))]
             for h, m in enumerate(index)]
    reader.sizes["K"] = k
    out["top_k"] = {"index": ranks, "weight": reader.shaped(need(top, "weight", "stats.top_k"),
                                                           "stats.top_k.weight", "H N K")}
    summary = [reader.read(Summary, part, f"summary[{h}]") for h, part
               in enumerate(items(need(doc, "summary", "the file"), "summary", reader.sizes["H"]))]
    return LongStats(stats=out, summary=summary)
