"""`attncli heads` JSON (and `scan`'s summary) back into its HeadsResult, read by walking the
record's own annotations (records/heads.py), then checked against the model and the tokens."""

from __future__ import annotations

from typing import Any, cast

from attncli.errors import AttnCliError
from attncli.records.heads import (
    PROBES,
    SCORES,
    SORTS,
    Config,
    HeadsResult,
    Measure,
    Probe,
    Scan,
    Shares,
    Sink,
    Top,
    Tops,
)
from attncli.saved.config import BOUND, model_from, tokenizer_from
from attncli.saved.parts import fraction, items, need, span, within
from attncli.saved.run import tokens_from
from attncli.saved.walk import Key, Table, keys_of, read

RECORDS: Table = {
    HeadsResult: {"measures": Key(name="heads"),
                  "model": Key(check=lambda v, at: model_from(v, None)),
                  # a scan's summary holds none (checked below: only a summary may hold none)
                  "tokens": Key(check=lambda v, at: [] if v == [] else tokens_from(v, at)),
                  "thumbnails": Key(skip=True), "weights": Key(skip=True)},
    Probe: {"kind": Key(choices=PROBES), "length": Key(low=1),
            "seed": Key(low=-2**63, high=2**64)},
    Config: {"tokenizer": Key(check=tokenizer_from), "sort": Key(choices=SORTS),
             "measure": Key(choices=("norm", "rollout"))},
    # Scores and shares are shares of attention or of documents, drawn × 100 as whole numbers.
    Measure: {"labels": Key(choices=SCORES), **{name: Key(check=fraction) for name in SCORES}},
    Shares: {name: Key(check=fraction) for name in keys_of(Shares)},
    Top: {"share": Key(check=fraction)},
    Sink: {"first_share": Key(check=fraction)},
}


def _config(config: Config, size: int, layers: int) -> None:
    """The settings: the layers shown inside the model's, the probe's ids counted."""
    within(config, "config", num_tokens=(size, size))
    if "layers" in config:
        span(config["layers"], "config.layers", layers)
    if not 0 <= config.get("threshold", 0) <= 1:
        raise AttnCliError(f"saved file: config.threshold is {config['threshold']}, not 0 to 1")
    if "probe" in config:
        probe = config["probe"]
        within(probe, "config.probe", length=(1, size))
        items(probe["ids"], "config.probe.ids", int(probe["bos"]) + 2 * probe["length"])


def _measures(rows: list[Measure], shown: list[int], heads: int, kv_heads: int | None,
              over_corpus: bool) -> None:
    """One record per shown layer × head, each (layer, head) once, with the same keys."""
    first, stop = shown
    items(rows, "heads", (stop - first) * heads)
    wanted = [*SCORES, "labels"] * bool(rows and "induction" in rows[0]) + \
        ["kv_head"] * (kv_heads is not None) + ["share"] * over_corpus + \
        ["effect"] * bool(rows and "effect" in rows[0])
    seen: set[tuple[int, int]] = set()
    for k, record in enumerate(rows):
        at = f"heads[{k}]"
        if missing := [key for key in wanted if key not in record]:
            raise AttnCliError(f"saved file: {at} has no {missing[0]!r}")
        within(record, at, layer=(first, stop - 1), head=(0, heads - 1),
               **({} if kv_heads is None else {"kv_head": (0, kv_heads - 1)}))
        if (record["layer"], record["head"]) in seen:
            raise AttnCliError(f"saved file: {at} repeats layer {record['layer']} head "
                               f"{record['head']}")
        seen.add((record["layer"], record["head"]))
        if len(set(record.get("labels", []))) != len(record.get("labels", [])):
            raise AttnCliError(f"saved file: {at}.labels repeats a score")


def heads_from_dict(doc: dict[str, Any]) -> HeadsResult:
    """`attncli heads` JSON: the measures, scores and sinks (it holds no weights, so no
    thumbnails); `scan`'s summary, which has the same shape over a corpus, holds no tokens."""
    result = read(HeadsResult, doc, "", RECORDS)
    model, tokens, config = result.model, result.tokens, result.config
    if not tokens and not ("scan" in doc and doc.get("tokens") == []):
        raise AttnCliError("saved file: tokens is empty")
    if model.layers * model.heads > BOUND:
        raise AttnCliError(f"saved file: model.layers × model.heads is "
                           f"{model.layers * model.heads:,}, too many heads")
    _config(config, len(tokens), model.layers)
    first, stop = shown = config.get("layers", [0, model.layers])
    if "probe" in config and config["probe"]["ids"] != [t.id for t in tokens]:
        raise AttnCliError("saved file: config.probe.ids are not the tokens' ids")
    if "layers" in doc:
        items(result.layers, "layers", stop - first)
    for k, sink in enumerate(result.layers):
        within(sink, f"layers[{k}]", layer=(first + k, first + k))
    _measures(result.measures, shown, model.heads,
              None if model.family is None else model.family.kv_heads, not tokens)
    return result


def scan_part(doc: dict[str, Any], layers: int, heads: int) -> Scan:
    """`scan` summary's own part, checked: the documents' counts, the threshold, the top heads."""
    scan = read(Scan, need(doc, "scan", "the file"), "scan", RECORDS)
    for name in keys_of(Tops) & scan["top"].keys():  # what else the file holds is not read
        for k, top in enumerate(cast(list[Top], scan["top"][name])):  # type: ignore[literal-required]
            within(top, f"scan.top.{name}[{k}]", layer=(0, layers - 1), head=(0, heads - 1))
    scan["documents"].setdefault("skipped_because", {})
    return scan
