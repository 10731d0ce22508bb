"""`attncli heads` JSON back into its HeadsResult: config, model, tokens and every measure."""

from __future__ import annotations

from typing import Any

from attncli.core.result import HeadsResult
from attncli.errors import AttnCliError
from attncli.saved.config import BOUND, model_from, tokenizer_from
from attncli.saved.parts import (
    choice,
    flag,
    integer,
    items,
    maybe,
    need,
    number,
    obj,
    string,
)
from attncli.saved.run import tokens_from

MEASURES = ("entropy", "prev", "first", "self", "distance")
SCORES = ("previous_token", "duplicate_token", "induction")
SORTS = ("layer", "head", *MEASURES, *SCORES)
VIEWS = ("norm", "rollout")  # config.measure: what the thumbnails drew (absent: the weights)
PROBES = ("induction", "previous", "duplicate")
SINKS = ("first_share", "first_norm", "median_norm", "norm_ratio")


def _config(data: Any, size: int, layers: int) -> dict[str, Any]:
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
            "sort": choice(need(doc, "sort", "config"), "config.sort", SORTS)}
    if "layers" in doc:
        span = items(doc["layers"], "config.layers", 2)
        first = integer(span[0], "config.layers[0]", 0, layers - 1)
        out["layers"] = [first, integer(span[1], "config.layers[1]", first + 1, layers)]
    if "threshold" in doc:
        out["threshold"] = number(doc["threshold"], "config.threshold")
        if not 0 <= out["threshold"] <= 1:
            raise AttnCliError(f"saved file: config.threshold is {out['threshold']}, not 0 to 1")
    if "measure" in doc:
        out["measure"] = choice(doc["measure"], "config.measure", VIEWS)
    if "probe" in doc:
        out["probe"] = _probe(doc["probe"], size)
    out["version"] = string(need(doc, "version", "config"), "config.version")
    return out


def _probe(data: Any, size: int) -> dict[str, Any]:
    """The probe's kind, length, seed, BOS and ids: BOS + length ids, then the same again."""
    at = "config.probe"
    doc = obj(data, at)
    length = integer(need(doc, "length", at), f"{at}.length", 1, size)
    bos = flag(need(doc, "bos", at), f"{at}.bos")
    ids = items(need(doc, "ids", at), f"{at}.ids", int(bos) + 2 * length)
    return {"kind": choice(need(doc, "kind", at), f"{at}.kind", PROBES), "length": length,
            "seed": integer(need(doc, "seed", at), f"{at}.seed", -2**63, 2**64),
            "bos": bos, "ids": [integer(i, f"{at}.ids[{k}]") for k, i in enumerate(ids)]}


def _sinks(data: Any, first: int, stop: int) -> list[dict[str, Any]]:
    """One sink record per shown layer, in order."""
    out = []
    for k, s in enumerate(items(data, "layers", stop - first)):
        at = f"layers[{k}]"
        s = obj(s, at)
        record: dict[str, Any] = {"layer": integer(need(s, "layer", at), f"{at}.layer",
                                                   first + k, first + k)}
        record |= {name: maybe(need(s, name, at), number, f"{at}.{name}") for name in SINKS}
        out.append(record)
    return out


def _measures(data: Any, span: list[int], heads: int,
              kv_heads: int | None) -> list[dict[str, Any]]:
    """One measure record per shown layer × head, each (layer, head) once; the scores and
    labels in every record or in none."""
    seen: set[tuple[int, int]] = set()
    out = []
    first, stop = span
    rows = items(data, "heads", (stop - first) * heads)
    scored = bool(rows) and isinstance(rows[0], dict) and "induction" in rows[0]
    for k, m in enumerate(rows):
        at = f"heads[{k}]"
        m = obj(m, at)
        pair = (integer(need(m, "layer", at), f"{at}.layer", first, stop - 1),
                integer(need(m, "head", at), f"{at}.head", 0, heads - 1))
        if pair in seen:
            raise AttnCliError(f"saved file: {at} repeats layer {pair[0]} head {pair[1]}")
        seen.add(pair)
        record: dict[str, Any] = {"layer": pair[0], "head": pair[1]}
        record |= {name: number(need(m, name, at), f"{at}.{name}") for name in MEASURES}
        if scored:
            record |= {name: number(need(m, name, at), f"{at}.{name}") for name in SCORES}
            labels = [choice(v, f"{at}.labels[{j}]", SCORES)
                      for j, v in enumerate(items(need(m, "labels", at), f"{at}.labels"))]
            if len(set(labels)) != len(labels):
                raise AttnCliError(f"saved file: {at}.labels repeats a score")
            record["labels"] = labels
        if kv_heads is not None:
            record["kv_head"] = integer(need(m, "kv_head", at), f"{at}.kv_head", 0, kv_heads - 1)
        out.append(record)
    return out


def heads_from_dict(doc: dict[str, Any]) -> HeadsResult:
    """`attncli heads` JSON: the measures, scores and sinks (it holds no weights, so no
    thumbnails); `scan`'s summary, which has the same shape over a corpus, holds no tokens."""
    over_corpus = "scan" in doc and doc.get("tokens") == []
    tokens = [] if over_corpus else tokens_from(need(doc, "tokens", "the file"), None)
    model = model_from(doc["model"], None)
    if model.layers * model.heads > BOUND:
        raise AttnCliError(f"saved file: model.layers × model.heads is "
                           f"{model.layers * model.heads:,}, too many heads")
    kv_heads = None if model.family is None else model.family.kv_heads
    config = _config(need(doc, "config", "the file"), len(tokens), model.layers)
    span = config.get("layers", [0, model.layers])
    if "probe" in config and config["probe"]["ids"] != [t.id for t in tokens]:
        raise AttnCliError("saved file: config.probe.ids are not the tokens' ids")
    sinks = _sinks(doc["layers"], *span) if "layers" in doc else []
    measures = _measures(doc["heads"], span, model.heads, kv_heads)
    if over_corpus:  # each score's share of documents passing the threshold
        for k, record in enumerate(measures):
            share = obj(need(doc["heads"][k], "share", f"heads[{k}]"), f"heads[{k}].share")
            record["share"] = {name: number(need(share, name, f"heads[{k}].share"),
                                            f"heads[{k}].share.{name}") for name in SCORES}
    return HeadsResult(config=config, model=model, tokens=tokens, measures=measures,
                       thumbnails=[], layers=sinks)


def scan_part(doc: dict[str, Any], layers: int, heads: int) -> dict[str, Any]:
    """`scan` summary's own part, checked: the documents' counts, the threshold, the top heads."""
    scan = obj(need(doc, "scan", "the file"), "scan")
    docs = obj(need(scan, "documents", "scan"), "scan.documents")
    counts: dict[str, Any] = {
        name: integer(need(docs, name, "scan.documents"), f"scan.documents.{name}", 0)
        for name in ("scored", "cut", "skipped", "tokens")}
    because = obj(docs.get("skipped_because", {}), "scan.documents.skipped_because")
    counts["skipped_because"] = {string(k, "scan.documents.skipped_because"): integer(
        v, f"scan.documents.skipped_because[{k!r}]", 0) for k, v in because.items()}
    out: dict[str, Any] = {"documents": counts,
                           "threshold": number(need(scan, "threshold", "scan"), "scan.threshold")}
    top = obj(need(scan, "top", "scan"), "scan.top")
    out["top"] = {name: [{"layer": integer(need(obj(t, at), "layer", at), f"{at}.layer", 0,
                                           layers - 1),
                          "head": integer(need(t, "head", at), f"{at}.head", 0, heads - 1),
                          "share": number(need(t, "share", at), f"{at}.share"),
                          "mean": number(need(t, "mean", at), f"{at}.mean")}
                         for k, t in enumerate(items(need(top, name, "scan.top"),
                                                     f"scan.top.{name}"))
                         for at in [f"scan.top.{name}[{k}]"]]
                  for name in SCORES}
    for name in ("corpus", "max_tokens"):
        if isinstance(scan.get(name), str | int) and not isinstance(scan.get(name), bool):
            out[name] = scan[name]
    return out
