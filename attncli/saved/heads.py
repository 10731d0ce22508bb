"""`attncli heads` JSON (and `scan`'s summary) back into its HeadsResult: the objects it keeps as
dicts are read by walking their TypedDicts (records/heads.py), then checked against the model
and tokens."""

from __future__ import annotations

from typing import Any, cast

from attncli.core.result import HeadsResult
from attncli.errors import AttnCliError
from attncli.records.heads import PROBES, SCORES, SORTS, Config, Measure, Probe, Scan, Sink, Top
from attncli.saved.config import BOUND, model_from, tokenizer_from
from attncli.saved.parts import items, need, span, within
from attncli.saved.run import tokens_from
from attncli.saved.walk import Key, Table, read

RECORDS: Table = {
    Probe: {"kind": Key(choices=PROBES), "length": Key(low=1),
            "seed": Key(low=-2**63, high=2**64)},
    Config: {"tokenizer": Key(check=tokenizer_from), "sort": Key(choices=SORTS),
             "measure": Key(choices=("norm", "rollout"))},
    Measure: {"labels": Key(choices=SCORES)},
}


def _config(data: Any, size: int, layers: int) -> Config:
    """The settings, the layers shown inside the model's and the probe's ids counted."""
    config = read(Config, need(data, "config", "the file"), "config", RECORDS)
    within(config, "config", num_tokens=(size, size))
    if "layers" in config:
        span(config["layers"], "config.layers", layers)
    if not 0 <= config.get("threshold", 0) <= 1:
        raise AttnCliError(f"saved file: config.threshold is {config['threshold']}, not 0 to 1")
    if "probe" in config:
        probe = config["probe"]
        within(probe, "config.probe", length=(1, size))
        items(probe["ids"], "config.probe.ids", int(probe["bos"]) + 2 * probe["length"])
    return config


def _measures(data: Any, span: list[int], heads: int, kv_heads: int | None,
              over_corpus: bool) -> list[dict[str, Any]]:
    """One record per shown layer × head, each (layer, head) once, with the same keys."""
    first, stop = span
    rows = items(data, "heads", (stop - first) * heads)
    scored = bool(rows) and isinstance(rows[0], dict) and "induction" in rows[0]
    effect = bool(rows) and isinstance(rows[0], dict) and "effect" in rows[0]
    wanted = [*SCORES, "labels"] * scored + ["kv_head"] * (kv_heads is not None) + \
        ["share"] * over_corpus + ["effect"] * effect
    out: list[dict[str, Any]] = [dict(read(Measure, row, f"heads[{k}]", RECORDS))
                                 for k, row in enumerate(rows)]
    seen: set[tuple[int, int]] = set()
    for k, record in enumerate(out):
        at = f"heads[{k}]"
        within(record, at, layer=(first, stop - 1), head=(0, heads - 1),
               **({} if kv_heads is None else {"kv_head": (0, kv_heads - 1)}))
        if (record["layer"], record["head"]) in seen:
            raise AttnCliError(f"saved file: {at} repeats layer {record['layer']} head "
                               f"{record['head']}")
        seen.add((record["layer"], record["head"]))
        for key in wanted:
            need(record, key, at)
        if len(set(record.get("labels", []))) != len(record.get("labels", [])):
            raise AttnCliError(f"saved file: {at}.labels repeats a score")
    return out


def heads_from_dict(doc: dict[str, Any]) -> HeadsResult:
    """`attncli heads` JSON: the measures, scores and sinks (it holds no weights, so no
    thumbnails); `scan`'s summary, which has the same shape over a corpus, holds no tokens."""
    over_corpus = "scan" in doc and doc.get("tokens") == []
    tokens = [] if over_corpus else tokens_from(need(doc, "tokens", "the file"))
    model = model_from(need(doc, "model", "the file"), None)
    if model.layers * model.heads > BOUND:
        raise AttnCliError(f"saved file: model.layers × model.heads is "
                           f"{model.layers * model.heads:,}, too many heads")
    config = _config(doc, len(tokens), model.layers)
    first, stop = shown = config.get("layers", [0, model.layers])
    if "probe" in config and config["probe"]["ids"] != [t.id for t in tokens]:
        raise AttnCliError("saved file: config.probe.ids are not the tokens' ids")
    held = items(doc["layers"], "layers", stop - first) if "layers" in doc else []
    sinks = [read(Sink, s, f"layers[{k}]", RECORDS) for k, s in enumerate(held)]
    for k, sink in enumerate(sinks):
        within(sink, f"layers[{k}]", layer=(first + k, first + k))
    kv_heads = None if model.family is None else model.family.kv_heads
    measures = _measures(need(doc, "heads", "the file"), shown, model.heads, kv_heads,
                         over_corpus)
    return HeadsResult(config=dict(config), model=model, tokens=tokens, measures=measures,
                       thumbnails=[], layers=[dict(s) for s in sinks])


def scan_part(doc: dict[str, Any], layers: int, heads: int) -> dict[str, Any]:
    """`scan` summary's own part, checked: the documents' counts, the threshold, the top heads."""
    scan = read(Scan, need(doc, "scan", "the file"), "scan", RECORDS)
    for name, tops in cast(dict[str, list[Top]], scan["top"]).items():
        for k, top in enumerate(tops):
            within(top, f"scan.top.{name}[{k}]", layer=(0, layers - 1), head=(0, heads - 1))
    scan["documents"].setdefault("skipped_because", {})
    return dict(scan)
