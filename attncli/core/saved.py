"""Saved weights back into result records: attncli's JSON, bare [N][N] or [H][N][N] lists, or
{"tokens": [...], "weights": ...}, checked, for `attncli show`."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attncli import __version__
from attncli.core.display import resolve_query
from attncli.core.inputs import _decode, _read_path, parse_json
from attncli.core.result import (
    STAGES,
    HeadsResult,
    LongStats,
    ModelInfo,
    QueryRow,
    Result,
    RunConfig,
    TextConfig,
    TokenInfo,
)
from attncli.core.sizes import read_limited
from attncli.errors import AttnCliError

Doc = dict[str, Any]


@dataclass(frozen=True)
class Saved:
    """What a saved file holds: its kind (run, long, compare, heads or weights) and records."""

    kind: str
    results: list[Any]
    doc: Doc = field(default_factory=dict)


def read_saved(path: str) -> Any:
    """The JSON of path, or of standard input for '-'."""
    if path == "-":
        data, source = read_limited(sys.stdin.buffer, "standard input"), "standard input"
    else:
        data, source = _read_path(Path(path), "FILE"), f"FILE {path!r}"
    _decode(data, source)  # names the first byte that is not UTF-8
    return parse_json(data, source)


def _matrix(data: Any, what: str, cols: int | None = None) -> list[list[float | None]]:
    """A list of rows of finite numbers (or null), all of one length."""
    if not isinstance(data, list) or not data or not all(isinstance(r, list) for r in data):
        raise AttnCliError(f"{what} must be a non-empty list of rows (a [N][N] list)")
    width = len(data[0]) if cols is None else cols
    for i, row in enumerate(data):
        if len(row) != width:
            square = " (weights are square: one row and one column per token)" if cols else ""
            raise AttnCliError(f"{what}: row {i} has {len(row)} values, expected {width}{square}")
        for j, v in enumerate(row):
            ok = v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                               and math.isfinite(v))
            if not ok:
                raise AttnCliError(f"{what}: cell [{i}][{j}] is {v!r}, not a number or null")
    return [[None if v is None else float(v) for v in row] for row in data]


def weights_stack(data: Any, what: str = "weights") -> list[list[list[float | None]]]:
    """[H][N][N] weights from a [N][N] or [H][N][N] list, each matrix square and the same size."""
    if not isinstance(data, list) or not data:
        raise AttnCliError(f"{what} must be a [N][N] or [H][N][N] list of numbers")
    heads = data if isinstance(data[0], list) and data[0] and isinstance(data[0][0], list) \
        else [data]
    size = len(heads[0])
    stack = [_matrix(m, f"{what} head {h}" if len(heads) > 1 else what, size)
             for h, m in enumerate(heads)]
    for h, m in enumerate(stack):
        if len(m) != size:
            raise AttnCliError(f"{what}: head {h} is {len(m)}×{size}; every head must be "
                               f"{size}×{size}")
    return stack


def _tokens(data: Any, size: int) -> list[TokenInfo]:
    """Token records from attncli's token objects or plain strings; indices if absent."""
    if data is None:
        return [TokenInfo(i, None, str(i)) for i in range(size)]
    if not isinstance(data, list) or len(data) != size:
        got = len(data) if isinstance(data, list) else type(data).__name__
        raise AttnCliError(f"tokens: expected a list of {size} (one per weights row), got {got}")
    out = []
    for i, t in enumerate(data):
        if isinstance(t, str):
            out.append(TokenInfo(i, None, t))
        elif isinstance(t, dict) and isinstance(t.get("text"), str):
            out.append(TokenInfo(i, t.get("id"), t["text"], t.get("bytes")))
        else:
            raise AttnCliError(f"tokens[{i}] must be a string or an object with \"text\"")
    return out


def _config(doc: Any) -> RunConfig:
    """The JSON "config" back into the typed record (every key checked for its type)."""
    if not isinstance(doc, dict):
        raise AttnCliError("attncli JSON whose \"config\" is not an object")
    text = None
    if "encoding" in doc:
        text = TextConfig(_typed(doc, "encoding", str), _typed(doc, "allow_special", bool),
                          _typed(doc, "emb_dim", int, None),
                          _typed(doc, "context_length", int, None),
                          _typed(doc, "positions", bool, None))
    return RunConfig(
        source=_typed(doc, "source", str, "saved"), num_tokens=_typed(doc, "num_tokens", int, 0),
        d_in=_typed(doc, "d_in", int, 0), d_out=_typed(doc, "d_out", int, 0),
        heads=_typed(doc, "heads", int, 1), impl=_typed(doc, "impl", str, "naive"),
        version=_typed(doc, "version", str, ""), variant=_typed(doc, "variant", str, None),
        seed=_typed(doc, "seed", int, None), dropout=_typed(doc, "dropout", float, None),
        qkv_bias=_typed(doc, "qkv_bias", bool, None), device=_typed(doc, "device", str, None),
        model=_typed(doc, "model", str, None), layer=_typed(doc, "layer", int, None), text=text,
        top_k=_typed(doc, "top_k", int, None), pool=_typed(doc, "pool", str, None),
        head=_typed(doc, "head", int, None))


_MISSING = object()


def _typed(doc: dict[str, Any], key: str, kind: type, default: Any = _MISSING) -> Any:
    """doc[key] when it has the kind asked for (an int counts as a float), else the default."""
    if key not in doc or doc[key] is None:
        if default is _MISSING:
            raise AttnCliError(f"attncli JSON whose config has no {key!r}")
        return default
    value = doc[key]
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise AttnCliError(f"attncli JSON whose config.{key} is {json.dumps(value)[:40]}, "
                           f"not {kind.__name__}")
    return value


def _model(doc: Any) -> ModelInfo | None:
    if doc is None:
        return None
    return ModelInfo(path=_typed(doc, "path", str), layers=_typed(doc, "layers", int),
                     heads=_typed(doc, "heads", int), d_model=_typed(doc, "d_model", int),
                     layer=_typed(doc, "layer", int, None))


def _query(doc: Any, tokens: list[TokenInfo]) -> QueryRow | None:
    if doc is None:
        return None
    index = _typed(doc, "index", int)
    if not 0 <= index < len(tokens):
        raise AttnCliError(f"attncli JSON whose query.index {index} is not a token's index")
    rows = [_matrix([row], "query weights", len(tokens))[0] for row in doc["weights"]]
    return QueryRow(index, tokens[index].text, rows)


def _window(doc: Any, size: int) -> dict[str, list[int]] | None:
    if doc is None:
        return None
    window = {axis: [int(v) for v in doc[axis]] for axis in ("rows", "cols")}
    for axis, (a, b) in window.items():
        if not 0 <= a < b <= size:
            raise AttnCliError(f"attncli JSON whose window.{axis} [{a}, {b}] is outside its "
                               f"{size} tokens")
    return window


def result_from_dict(doc: Doc) -> Result:
    """A run's (or explain's, or a long run's) JSON back into its Result."""
    for key in ("variant", "config", "tokens", "weights", "context"):
        if key not in doc:
            raise AttnCliError(f"attncli JSON without {key!r}: not a run's output")
    config = _config(doc["config"])
    long = None
    if "stats" in doc:
        long = LongStats(stats=doc["stats"], summary=doc["summary"])
    weights = weights_stack(doc["weights"]) if long is None else doc["weights"]
    size = len(doc["tokens"]) if isinstance(doc["tokens"], list) else -1
    tokens = _tokens(doc["tokens"], size if long is not None else len(weights[0]))
    stages: dict[str, Any] = dict(doc.get("stages") or {})
    present = tuple(name for name in STAGES if name in ("weights", "context")
                    or stages.get(name) is not None)
    return Result(variant=str(doc["variant"]), config=config, tokens=tokens, weights=weights,
                  context=_context(doc["context"]),
                  stages=stages, present=present, model=_model(doc.get("model")),
                  query=_query(doc.get("query"), tokens),
                  window=_window(doc.get("window"), len(tokens)), long=long)


def _context(data: Any) -> list[list[float]]:
    """The context vectors: finite numbers only (no masked cells)."""
    if not data:
        return []
    rows = _matrix(data, "context")
    if any(v is None for row in rows for v in row):
        raise AttnCliError("context: every cell must be a number (null is for masked weights)")
    return [[float(v) for v in row if v is not None] for row in rows]


def weights_result(weights: Any, tokens: Any) -> Result:
    """Bare weights (and token labels) as a Result with only the weights stage."""
    stack = weights_stack(weights)
    size = len(stack[0])
    config = RunConfig(source="saved", num_tokens=size, d_in=0, d_out=0, heads=len(stack),
                       impl="naive", version=__version__)
    return Result(variant="saved", config=config, tokens=_tokens(tokens, size),
                  weights=stack, context=[], stages={"weights": stack}, present=("weights",))


def heads_from_dict(doc: Doc) -> HeadsResult:
    """`attncli heads` JSON: the measures (it holds no weights, so no thumbnails)."""
    model = _model(doc["model"])
    assert model is not None
    return HeadsResult(config=doc["config"], model=model,
                       tokens=_tokens(doc["tokens"], len(doc["tokens"])),
                       measures=doc["heads"], thumbnails=[])


def pick(result: Result, head: int | None, query: str | None) -> Result:
    """The saved result with --head's head alone and --query's row, as a run would hold them."""
    if head is not None:
        if not 0 <= head < result.num_heads:
            raise AttnCliError(f"--head {head} is out of range: this file holds "
                               f"{result.num_heads} head(s), numbered 0 to {result.num_heads - 1}")
        row = result.query
        result = replace(result, weights=[result.weights[head]],
                         config=replace(result.config, head=result.head_number(head)),
                         query=None if row is None else replace(row, weights=[row.weights[head]]))
    if query is not None:
        if result.long is not None:
            raise AttnCliError("--query on a long run's file: it holds the weights of a window "
                               "only; run it again with --query")
        index = resolve_query(query, result.labels)
        result = replace(result, query=QueryRow(index, result.labels[index],
                                                [h[index] for h in result.weights]))
    return result


def saved_from(data: Any) -> Saved:
    """The records a saved document holds, by its shape."""
    if isinstance(data, list):
        return Saved("weights", [weights_result(data, None)])
    if not isinstance(data, dict):
        raise AttnCliError("expected attncli JSON, a [N][N] or [H][N][N] list, or "
                           '{"tokens": [...], "weights": ...}')
    try:
        if "variants" in data:
            results = [result_from_dict(d) for d in data["variants"]]
            return Saved("compare", results, doc=data)
        if "stats" in data:
            return Saved("long", [result_from_dict(data)], doc=data)
        if "heads" in data and "model" in data:
            return Saved("heads", [heads_from_dict(data)], doc=data)
        if "variant" in data:
            return Saved("run", [result_from_dict(data)], doc=data)
    except (KeyError, TypeError, IndexError, AttributeError) as err:
        raise AttnCliError(f"attncli JSON with a missing or malformed part ({err!s})") from None
    if "weights" in data:
        return Saved("weights", [weights_result(data["weights"], data.get("tokens"))])
    raise AttnCliError("no weights in this JSON: expected attncli's output, a [N][N] or "
                       '[H][N][N] list, or {"tokens": [...], "weights": ...}')


def load_saved(path: str) -> Saved:
    """Read and check a saved file ('-': standard input)."""
    return saved_from(read_saved(path))
