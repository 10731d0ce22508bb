"""`attncli heads` JSON (and `scan`'s summary) back into its HeadsResult, walked whole from the
record's own annotations (records/heads.py), its bounds named by the model's layers and heads,
the layers shown (first to stop) and the N tokens; then each head's row checked against the rest."""

from __future__ import annotations

from typing import Any

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
)
from attncli.saved.config import BOUND, MODEL, model_from, tokenizer_from
from attncli.saved.config import RECORDS as SHARED
from attncli.saved.parts import items, need
from attncli.saved.walk import SHARE, Key, Reader, Table, keys_of

HEAD = Key(high="heads-1")
RECORDS: Table = {**SHARED, HeadsResult: {
    "measures": Key(name="heads", length="M"), "model": MODEL, "tokens": Key(counts="index=0"),
    "layers": Key(length="stop-first", counts="layer=first"), "thumbnails": Key(skip=True),
    "weights": Key(skip=True)},
    Probe: {"kind": Key(choices=PROBES), "length": Key(low=1, high="N"),
            "seed": Key(low=-2**63, high=2**64), "ids": Key(length="bos+length+length")},
    Config: {"tokenizer": Key(check=tokenizer_from), "sort": Key(choices=SORTS),
             "measure": Key(choices=("norm", "rollout")), "num_tokens": Key(low="N", high="N"),
             "layers": Key(span="layers"),
             "threshold": Key(low=0, high=1, means="0 to 1")},
    # Scores and shares are shares of attention or of documents, drawn × 100 as whole numbers.
    Measure: {"labels": Key(choices=SCORES), **{name: SHARE for name in SCORES},
              "layer": Key(low="first", high="stop-1"), "head": HEAD,
              "kv_head": Key(high="kv_heads-1")},
    Shares: {name: SHARE for name in keys_of(Shares)},
    Top: {"share": SHARE, "layer": Key(high="layers-1"), "head": HEAD},
    Sink: {"first_share": SHARE},
}


def _sized(doc: dict[str, Any]) -> Reader:
    """The reader of a heads document, its sizes read first: the model's, the tokens', and the
    layers its config shows."""
    model = model_from(need(doc, "model", "the file"))
    if model.layers * model.heads > BOUND:
        raise AttnCliError(f"saved file: model.layers × model.heads is "
                           f"{model.layers * model.heads:,}, too many heads")
    reader = Reader(RECORDS, {"layers": model.layers, "heads": model.heads,
                              "kv_heads": model.kv_heads,
                              "N": len(items(need(doc, "tokens", "the file"), "tokens"))})
    config = reader.read(Config, need(doc, "config", "the file"), "config")
    first, stop = config.get("layers", [0, model.layers])
    reader.sizes.update(first=first, stop=stop, M=(stop - first) * model.heads)
    return reader


def heads_from_dict(doc: dict[str, Any]) -> HeadsResult:
    """`attncli heads` JSON: the measures, scores and sinks (it holds no weights, so no
    thumbnails); `scan`'s summary, which has the same shape over a corpus, holds no tokens."""
    result = _sized(doc).read(HeadsResult, doc)
    config, tokens, rows = result.config, result.tokens, result.measures
    if not tokens and not ("scan" in doc and doc.get("tokens") == []):
        raise AttnCliError("saved file: tokens is empty")
    if "probe" in config and config["probe"]["ids"] != [t.id for t in tokens]:
        raise AttnCliError("saved file: config.probe.ids are not the tokens' ids")
    # scores and labels, and the effect, in every row or in none; a grouped model's kv heads
    wanted = [*SCORES, "labels"] * bool(rows and "induction" in rows[0]) + \
        ["kv_head"] * (result.model.family is not None) + ["share"] * (not tokens) + \
        ["effect"] * bool(rows and "effect" in rows[0])
    seen: set[tuple[int, int]] = set()
    for k, row in enumerate(rows):
        if missing := [key for key in wanted if key not in row]:
            raise AttnCliError(f"saved file: heads[{k}] has no {missing[0]!r}")
        if (row["layer"], row["head"]) in seen:
            raise AttnCliError(f"saved file: heads[{k}] repeats layer {row['layer']} head "
                               f"{row['head']}")
        seen.add((row["layer"], row["head"]))
        if len(set(row.get("labels", []))) != len(row.get("labels", [])):
            raise AttnCliError(f"saved file: heads[{k}].labels repeats a score")
    return result


def scan_part(doc: dict[str, Any], layers: int, heads: int) -> Scan:
    """`scan` summary's own part, checked: the documents' counts, the threshold, the top heads."""
    scan = Reader(RECORDS, {"layers": layers, "heads": heads}).read(
        Scan, need(doc, "scan", "the file"), "scan")
    scan["documents"].setdefault("skipped_because", {})
    return scan
