"""`attncli heads` JSON (and `scan`'s summary) back into its HeadsResult: the objects it keeps as
dicts declared as TypedDicts and read by walking them, then checked against the model and tokens."""

from __future__ import annotations

from typing import Any, TypedDict, cast

from attncli.core.result import HeadsResult
from attncli.errors import AttnCliError
from attncli.saved.config import BOUND, model_from, tokenizer_from
from attncli.saved.parts import integer, items, need
from attncli.saved.run import tokens_from
from attncli.saved.walk import Key, Table, read

MEASURES = ("entropy", "prev", "first", "self", "distance")
SCORES = ("previous_token", "duplicate_token", "induction")


class Probe(TypedDict):
    """The probe's kind, length, seed, BOS and ids: BOS + length ids, then the same again."""

    kind: str
    length: int
    seed: int
    bos: bool
    ids: list[int]


class _Settings(TypedDict):
    model: str
    allow_special: bool
    num_tokens: int
    sort: str
    version: str


class Config(_Settings, total=False):
    """The heads run's settings, as render/heads.py reads them (a base class holds the keys
    every file has: typing.Required is Python 3.11's)."""

    tokenizer: dict[str, Any]
    encoding: str
    layers: list[int]  # [a, b): the layers shown
    threshold: float
    measure: str  # what the thumbnails drew (absent: the weights)
    probe: Probe


class Sink(TypedDict):
    """One shown layer's sink."""

    layer: int
    first_share: float | None
    first_norm: float | None
    median_norm: float | None
    norm_ratio: float | None


class Shares(TypedDict):
    """A scan's share of documents on which each score passes the threshold."""

    previous_token: float
    duplicate_token: float
    induction: float


class _Measures(TypedDict):
    layer: int
    head: int
    entropy: float
    prev: float
    first: float
    self: float
    distance: float


class Measure(_Measures, total=False):
    """One head's measures; its scores and labels in every record or in none."""

    previous_token: float
    duplicate_token: float
    induction: float
    labels: list[str]
    kv_head: int
    share: Shares  # a scan's summary only


class Top(TypedDict):
    """One of a scan's top heads for a score."""

    layer: int
    head: int
    share: float
    mean: float


class Tops(TypedDict):
    previous_token: list[Top]
    duplicate_token: list[Top]
    induction: list[Top]


class _Counts(TypedDict):
    scored: int
    cut: int
    skipped: int
    tokens: int


class Documents(_Counts, total=False):
    skipped_because: dict[str, int]


class _ScanNeeded(TypedDict):
    documents: Documents
    threshold: float
    top: Tops


class Scan(_ScanNeeded, total=False):
    """`scan` summary's own part: the documents' counts, the threshold, the top heads."""

    corpus: str
    max_tokens: int


SORTS = ("layer", "head", *MEASURES, *SCORES)
RECORDS: Table = {
    Probe: {"kind": Key(choices=("induction", "previous", "duplicate")), "length": Key(low=1),
            "seed": Key(low=-2**63, high=2**64)},
    Config: {"tokenizer": Key(check=tokenizer_from), "sort": Key(choices=SORTS),
             "measure": Key(choices=("norm", "rollout"))},
    Measure: {"labels": Key(choices=SCORES)},
}


def _config(data: Any, size: int, layers: int) -> Config:
    """The settings, the layers shown inside the model's and the probe's ids counted."""
    config = read(Config, need(data, "config", "the file"), "config", RECORDS)
    integer(config["num_tokens"], "config.num_tokens", size, size)
    if "layers" in config:
        span = items(config["layers"], "config.layers", 2)
        integer(span[1], "config.layers[1]", integer(span[0], "config.layers[0]", 0, layers - 1)
                + 1, layers)
    if not 0 <= config.get("threshold", 0) <= 1:
        raise AttnCliError(f"saved file: config.threshold is {config['threshold']}, not 0 to 1")
    if "probe" in config:
        probe = config["probe"]
        integer(probe["length"], "config.probe.length", 1, size)
        items(probe["ids"], "config.probe.ids", int(probe["bos"]) + 2 * probe["length"])
    return config


def _measures(data: Any, span: list[int], heads: int, kv_heads: int | None,
              over_corpus: bool) -> list[dict[str, Any]]:
    """One record per shown layer × head, each (layer, head) once."""
    first, stop = span
    rows = items(data, "heads", (stop - first) * heads)
    scored = bool(rows) and isinstance(rows[0], dict) and "induction" in rows[0]
    wanted = [*SCORES, "labels"] * scored + ["kv_head"] * (kv_heads is not None) + \
        ["share"] * over_corpus
    seen: set[tuple[int, int]] = set()
    out = []
    for k, row in enumerate(rows):
        at = f"heads[{k}]"
        record: dict[str, Any] = dict(read(Measure, row, at, RECORDS))
        pair = (integer(record["layer"], f"{at}.layer", first, stop - 1),
                integer(record["head"], f"{at}.head", 0, heads - 1))
        if pair in seen:
            raise AttnCliError(f"saved file: {at} repeats layer {pair[0]} head {pair[1]}")
        seen.add(pair)
        for key in wanted:
            need(record, key, at)
        if len(set(record.get("labels", []))) != len(record.get("labels", [])):
            raise AttnCliError(f"saved file: {at}.labels repeats a score")
        if kv_heads is not None:
            integer(record["kv_head"], f"{at}.kv_head", 0, kv_heads - 1)
        out.append(record)
    return out


def heads_from_dict(doc: dict[str, Any]) -> HeadsResult:
    """`attncli heads` JSON: the measures, scores and sinks (it holds no weights, so no
    thumbnails); `scan`'s summary, which has the same shape over a corpus, holds no tokens."""
    over_corpus = "scan" in doc and doc.get("tokens") == []
    tokens = [] if over_corpus else tokens_from(need(doc, "tokens", "the file"), None)
    model = model_from(need(doc, "model", "the file"), None)
    if model.layers * model.heads > BOUND:
        raise AttnCliError(f"saved file: model.layers × model.heads is "
                           f"{model.layers * model.heads:,}, too many heads")
    config = _config(doc, len(tokens), model.layers)
    first, stop = span = config.get("layers", [0, model.layers])
    if "probe" in config and config["probe"]["ids"] != [t.id for t in tokens]:
        raise AttnCliError("saved file: config.probe.ids are not the tokens' ids")
    held = items(doc["layers"], "layers", stop - first) if "layers" in doc else []
    sinks = [read(Sink, s, f"layers[{k}]", RECORDS) for k, s in enumerate(held)]
    for k, sink in enumerate(sinks):
        integer(sink["layer"], f"layers[{k}].layer", first + k, first + k)
    kv_heads = None if model.family is None else model.family.kv_heads
    measures = _measures(need(doc, "heads", "the file"), span, model.heads, kv_heads,
                         over_corpus)
    return HeadsResult(config=dict(config), model=model, tokens=tokens, measures=measures,
                       thumbnails=[], layers=[dict(s) for s in sinks])


def scan_part(doc: dict[str, Any], layers: int, heads: int) -> dict[str, Any]:
    """`scan` summary's own part, checked: the documents' counts, the threshold, the top heads."""
    scan = read(Scan, need(doc, "scan", "the file"), "scan", RECORDS)
    for name, tops in cast(dict[str, list[Top]], scan["top"]).items():
        for k, top in enumerate(tops):
            at = f"scan.top.{name}[{k}]"
            integer(top["layer"], f"{at}.layer", 0, layers - 1)
            integer(top["head"], f"{at}.head", 0, heads - 1)
    scan["documents"].setdefault("skipped_because", {})
    return dict(scan)
