"""A scan's summary, read back from its committed parts: per score the corpus mean of each
layer × head, the share of documents on which the head scores at least the threshold, the top
heads, each layer's mean sink, and what happened to the documents.

The summary is `heads` JSON in shape (config, model, tokens, heads, layers), so `attncli show`
and the heads grid read it, with a "scan" part beside: the documents and the top heads.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from attncli.scan.parts import parts
from attncli.scan.worker import EFFECT, HEAD_COLUMNS, LAYER_COLUMNS

SHARES = ("previous_token", "duplicate_token", "induction", "prev", "first", "self")
SCORES = ("previous_token", "duplicate_token", "induction")
TOP = 10
MAJORITY = 0.5  # a head is labelled by a score when more than this share of documents pass


def summarise(out: Path, threshold: float, layers: int, heads: int,
              effect: bool = False) -> dict[str, Any]:
    """The summary of the scan in out (see the module); effect: each head's mean effect too."""
    import pyarrow.parquet as pq

    means = (*HEAD_COLUMNS, EFFECT) if effect else HEAD_COLUMNS
    sums = {name: np.zeros((layers, heads)) for name in means}
    above = {name: np.zeros((layers, heads)) for name in SHARES}
    sinks = {name: np.zeros(layers) for name in LAYER_COLUMNS}
    sink_counts = {name: np.zeros(layers) for name in LAYER_COLUMNS}
    counts = np.zeros((layers, heads))
    for path in sorted(parts(out / "heads").values()):
        table = pq.read_table(path)
        layer = table.column("layer").to_numpy()
        head = table.column("head").to_numpy()
        np.add.at(counts, (layer, head), 1)
        for name in means:
            values = table.column(name).to_numpy(zero_copy_only=False)
            np.add.at(sums[name], (layer, head), values)
            if name in SHARES:
                np.add.at(above[name], (layer, head), values >= threshold)
        first = head == 0  # a layer's sink is repeated on each of its heads' rows
        for name in LAYER_COLUMNS:
            values = table.column(name).to_numpy(zero_copy_only=False).astype(float)[first]
            known = ~np.isnan(values)
            np.add.at(sinks[name], layer[first][known], values[known])
            np.add.at(sink_counts[name], layer[first][known], 1)
    seen = np.maximum(counts, 1)
    rows = []
    for layer in range(layers):
        for head in range(heads):
            row: dict[str, Any] = {"layer": layer, "head": head}
            row |= {name: float(sums[name][layer, head] / seen[layer, head]) for name in means}
            share = {name: float(above[name][layer, head] / seen[layer, head])
                     for name in SHARES}
            row["labels"] = [name for name in SCORES if share[name] > MAJORITY]
            row["share"] = share
            rows.append(row)
    layer_rows = [{"layer": layer} | {
        name: (float(sinks[name][layer] / sink_counts[name][layer])
               if sink_counts[name][layer] else None) for name in LAYER_COLUMNS}
        for layer in range(layers)]
    top = {name: [{"layer": r["layer"], "head": r["head"], "share": r["share"][name],
                   "mean": r[name]}
                  for r in sorted(rows, key=lambda r: (-r["share"][name], -r[name],
                                                       r["layer"], r["head"]))[:TOP]]
           for name in SHARES}
    return {"heads": rows, "layers": layer_rows,
            "scan": {"documents": documents_summary(out), "threshold": threshold,
                     "majority": MAJORITY, "top": top}}


def documents_summary(out: Path) -> dict[str, Any]:
    """How many documents were scored, cut and skipped (and why), and their tokens."""
    import pyarrow.parquet as pq

    status: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    tokens = 0
    for path in sorted(parts(out / "documents").values()):
        table = pq.read_table(path).to_pydict()
        status.update(table["status"])
        reasons.update(_reason(r) for r, s in zip(table["reason"], table["status"], strict=True)
                       if s == "skipped")
        tokens += sum(t for t, s in zip(table["tokens"], table["status"], strict=True)
                      if s != "skipped")
    return {"scored": status["scored"] + status["cut"], "cut": status["cut"],
            "skipped": status["skipped"], "tokens": tokens,
            "skipped_because": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))}


def _reason(reason: str | None) -> str:
    """A skip reason without its document-specific details (a byte offset), for counting."""
    text = reason or "unknown"
    return text.split(" (byte ")[0]
