"""`attncli heads` JSON back into its HeadsResult: config, model, tokens and every measure."""

from __future__ import annotations

from typing import Any

from attncli.core.checks.config import BOUND, model_from, tokenizer_from
from attncli.core.checks.parts import (
    choice,
    flag,
    integer,
    items,
    need,
    number,
    obj,
    string,
)
from attncli.core.checks.run import tokens_from
from attncli.core.result import HeadsResult
from attncli.errors import AttnCliError

MEASURES = ("entropy", "prev", "first", "self", "distance")
SORTS = ("layer", "head", *MEASURES)


def _config(data: Any, size: int) -> dict[str, Any]:
    """The heads run's settings, as render/heads.py reads them."""
    doc = obj(data, "config")
    out: dict[str, Any] = {"model": string(need(doc, "model", "config"), "config.model")}
    if doc.get("tokenizer") is not None:
        out["tokenizer"] = tokenizer_from(doc["tokenizer"], "config.tokenizer")
    if doc.get("encoding") is not None:
        out["encoding"] = string(doc["encoding"], "config.encoding")
    out |= {"allow_special": flag(need(doc, "allow_special", "config"), "config.allow_special"),
            "num_tokens": integer(need(doc, "num_tokens", "config"), "config.num_tokens", size,
                                  size),
            "sort": choice(need(doc, "sort", "config"), "config.sort", SORTS),
            "version": string(need(doc, "version", "config"), "config.version")}
    return out


def _measures(data: Any, layers: int, heads: int, kv_heads: int | None) -> list[dict[str, Any]]:
    """One measure record per layer × head, each (layer, head) once."""
    seen: set[tuple[int, int]] = set()
    out = []
    for k, m in enumerate(items(data, "heads", layers * heads)):
        at = f"heads[{k}]"
        m = obj(m, at)
        pair = (integer(need(m, "layer", at), f"{at}.layer", 0, layers - 1),
                integer(need(m, "head", at), f"{at}.head", 0, heads - 1))
        if pair in seen:
            raise AttnCliError(f"saved file: {at} repeats layer {pair[0]} head {pair[1]}")
        seen.add(pair)
        record: dict[str, Any] = {"layer": pair[0], "head": pair[1]}
        record |= {name: number(need(m, name, at), f"{at}.{name}") for name in MEASURES}
        if kv_heads is not None:
            record["kv_head"] = integer(need(m, "kv_head", at), f"{at}.kv_head", 0, kv_heads - 1)
        out.append(record)
    return out


def heads_from_dict(doc: dict[str, Any]) -> HeadsResult:
    """`attncli heads` JSON: the measures (it holds no weights, so no thumbnails)."""
    tokens = tokens_from(need(doc, "tokens", "the file"), None)
    model = model_from(doc["model"], None)
    if model.layers * model.heads > BOUND:
        raise AttnCliError(f"saved file: model.layers × model.heads is "
                           f"{model.layers * model.heads:,}, too many heads")
    kv_heads = None if model.family is None else model.family.kv_heads
    return HeadsResult(config=_config(need(doc, "config", "the file"), len(tokens)), model=model,
                       tokens=tokens, measures=_measures(doc["heads"], model.layers, model.heads,
                                                         kv_heads),
                       thumbnails=[])
