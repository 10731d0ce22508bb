"""Saved weights back into result records: attncli's JSON, bare [N][N] or [H][N][N] lists, or
{"tokens": [...], "weights": ...}, checked, for `attncli show`."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attncli.core.inputs import _decode, _read_path
from attncli.core.result import STAGES, HeadsResult, LongResult, Result, TokenInfo
from attncli.errors import AttnCliError

Doc = dict[str, Any]


@dataclass(frozen=True)
class Saved:
    """What a saved file holds: its kind, its records, and what the command that wrote it showed.

    kind: run (a run or explain), weights (bare weights), compare, long or heads.
    """

    kind: str
    results: list[Any]
    query: int | None = None
    window: dict[str, list[int]] | None = None
    stages: tuple[str, ...] | None = None
    doc: Doc = field(default_factory=dict)


def read_saved(path: str) -> Any:
    """The JSON of path, or of standard input for '-'."""
    if path == "-":
        text, source = _decode(sys.stdin.buffer.read(), "standard input"), "standard input"
    else:
        text, source = _decode(_read_path(Path(path), "FILE"), f"FILE {path!r}"), repr(path)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise AttnCliError(f"{source} is not JSON ({err.msg} at line {err.lineno} column "
                           f"{err.colno})") from None


def _no_constant(name: str) -> float:
    raise AttnCliError(f"the weights hold {name}, which strict JSON does not allow")


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


def _causal_mask(variant: str, model: Any, size: int, heads: int) -> list[Any] | None:
    """The causal mask as the masked stage's None cells, for variants that mask."""
    if model is None and variant not in ("causal", "multihead"):
        return None
    return [[[None if j > i else 0.0 for j in range(size)] for i in range(size)]
            for _ in range(heads)]


def result_from_dict(doc: Doc) -> Result:
    """A run's or explain's JSON back into its Result (the masked cells rebuilt for causal)."""
    for key in ("variant", "config", "tokens", "weights", "context"):
        if key not in doc:
            raise AttnCliError(f"attncli JSON without {key!r}: not a run's output")
    weights = weights_stack(doc["weights"])
    size = len(weights[0])
    stages: dict[str, Any] = dict(doc.get("stages") or {})
    stages.setdefault("weights", doc["weights"])
    stages.setdefault("context", doc["context"])
    present = tuple(name for name in STAGES if stages.get(name) is not None)
    if stages.get("masked") is None:
        stages["masked"] = _causal_mask(doc["variant"], doc.get("model"), size, len(weights))
    return Result(variant=doc["variant"], config=doc["config"],
                  tokens=_tokens(doc["tokens"], size), weights=weights,  # type: ignore[arg-type]
                  context=_matrix(doc["context"], "context"),  # type: ignore[arg-type]
                  stages=stages, model=doc.get("model"), present=present)


def weights_result(weights: Any, tokens: Any) -> Result:
    """Bare weights (and token labels) as a Result with only the weights stage."""
    stack = weights_stack(weights)
    size = len(stack[0])
    config = {"num_tokens": size, "heads": len(stack), "source": "saved"}
    return Result(variant="saved", config=config, tokens=_tokens(tokens, size),
                  weights=stack, context=[], stages={"weights": stack},  # type: ignore[arg-type]
                  present=("weights",))


def long_from_dict(doc: Doc) -> LongResult:
    """A tiled run's JSON back into its LongResult (no pooled maps: the JSON has none)."""
    size = len(doc["tokens"])
    return LongResult(variant=doc["variant"], config=doc["config"],
                      tokens=_tokens(doc["tokens"], size), context=doc["context"],
                      stats=doc["stats"], summary=doc["summary"], window=doc["window"],
                      weights=doc["weights"], query=doc.get("query"))


def heads_from_dict(doc: Doc) -> HeadsResult:
    """`attncli heads` JSON: the measures (it holds no weights, so no thumbnails)."""
    return HeadsResult(config=doc["config"], model=doc["model"],
                       tokens=_tokens(doc["tokens"], len(doc["tokens"])),
                       measures=doc["heads"], thumbnails=[])


def _run(doc: Doc) -> Saved:
    result = result_from_dict(doc)
    query = doc.get("query", {}).get("index") if isinstance(doc.get("query"), dict) else None
    shown = tuple(doc["stages"]) if isinstance(doc.get("stages"), dict) else None
    return Saved("run", [result], query, doc.get("window"), shown, doc)


def saved_from(data: Any) -> Saved:
    """The records a saved document holds, by its shape."""
    if isinstance(data, list):
        return Saved("weights", [weights_result(data, None)], stages=("weights",))
    if not isinstance(data, dict):
        raise AttnCliError("expected attncli JSON, a [N][N] or [H][N][N] list, or "
                           '{"tokens": [...], "weights": ...}')
    try:
        if "variants" in data:
            results = [result_from_dict(d) for d in data["variants"]]
            return Saved("compare", results, window=data["variants"][0].get("window"), doc=data)
        if "stats" in data:
            return Saved("long", [long_from_dict(data)], doc=data)
        if "heads" in data and "model" in data:
            return Saved("heads", [heads_from_dict(data)], doc=data)
        if "variant" in data:
            return _run(data)
    except (KeyError, TypeError, IndexError, AttributeError) as err:
        raise AttnCliError(f"attncli JSON with a missing or malformed part ({err!s})") from None
    if "weights" in data:
        return Saved("weights", [weights_result(data["weights"], data.get("tokens"))],
                     stages=("weights",))
    raise AttnCliError("no weights in this JSON: expected attncli's output, a [N][N] or "
                       '[H][N][N] list, or {"tokens": [...], "weights": ...}')


def load_saved(path: str) -> Saved:
    """Read and check a saved file ('-': standard input)."""
    return saved_from(read_saved(path))
