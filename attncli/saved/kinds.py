"""The one table of what a saved document may be: its "kind" → the record class it is read into
and the reader; the kinds without weights, named and refused; a document saved before kinds
were written, recognised by its keys."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attncli.core.inputs import _decode, _read_path, parse_json
from attncli.core.result import Result
from attncli.errors import AttnCliError
from attncli.records.causal import Ablation, Patching
from attncli.records.generation import GenerationResult
from attncli.records.heads import HeadsResult
from attncli.saved.causal import ablation_from_dict, patching_from_dict
from attncli.saved.generate import generation_from_dict
from attncli.saved.heads import heads_from_dict
from attncli.saved.parts import items, need, obj
from attncli.saved.run import result_from_dict
from attncli.saved.weights import weights_result

Doc = dict[str, Any]


@dataclass(frozen=True)
class Saved:
    """What a saved file holds: its kind (run, long, compare, weights, heads, scan, generate,
    ablate or patch), its records and the document they were read from."""

    kind: str
    results: list[Any]
    doc: Doc = field(default_factory=dict)


@dataclass(frozen=True)
class Kind:
    """A kind of document: the record class it is read into, and how."""

    record: type
    read: Callable[[Doc], list[Any]]


def _compare(doc: Doc) -> list[Result]:
    """compare's variants: naive runs on the same tokens."""
    docs = items(need(doc, "variants", "the file"), "variants")
    if not docs:
        raise AttnCliError("saved file: variants is empty")
    results = [result_from_dict(obj(d, f"variants[{k}]")) for k, d in enumerate(docs)]
    for k, r in enumerate(results):
        if r.long is not None:
            raise AttnCliError(f"saved file: variants[{k}] is a tiled run; compare holds naive "
                               "runs")
        if r.labels != results[0].labels:
            raise AttnCliError(f"saved file: variants[{k}] has other tokens than variants[0]")
    return results


KINDS = {
    "run": Kind(Result, lambda doc: [result_from_dict(doc)]),
    "compare": Kind(Result, _compare),
    "weights": Kind(Result, lambda doc: [weights_result(need(doc, "weights", "the file"),
                                                        doc.get("tokens"))]),
    "heads": Kind(HeadsResult, lambda doc: [heads_from_dict(doc)]),
    "scan": Kind(HeadsResult, lambda doc: [heads_from_dict(doc)]),
    "generate": Kind(GenerationResult, lambda doc: [generation_from_dict(doc)]),
    "ablate": Kind(Ablation, lambda doc: [ablation_from_dict(doc)]),
    "patch": Kind(Patching, lambda doc: [patching_from_dict(doc)]),
}
# The kinds show does not draw: the keys that tell one saved before kinds, its name, the command.
UNDRAWN = {
    "cost": (("rows", "fit", "projection"), "a `cost` lesson's", "attncli cost"),
    "flash": (("block", "steps", "memory"), "a `flash` lesson's", "attncli flash TEXT"),
    "kvcache": (("steps", "totals"), "a `kvcache` lesson's", "attncli kvcache TEXT"),
    "streaming": (("policies", "ranges"), "`kvcache --keep`'s",
                  "attncli kvcache TEXT --model M --keep"),
    "permute": (("a", "b", "permutation"), "a `permute` lesson's",
                "attncli permute TEXT_A TEXT_B"),
    "models": (("cache", "models"), "`models`'", "attncli models"),
    "doctor": (("extensions", "torch"), "`doctor`'s", "attncli doctor"),
    "check": (("verdict", "cases"), "`check`'s", "attncli check FILE:CLASS"),
    "tokens": ((), "`tokens`'", "attncli tokens TEXT"),
    "template": ((), "`generate --show-template`'s",
                 "attncli generate TEXT --model M --show-template"),
    "config": ((), "`config list`'s", "attncli config list"),
}


# A document saved before kinds were written: the first kind whose keys it has all of (and none
# of those after them). ablate's and patch's hold "heads" and "model", as heads' do.
SNIFFED = (("ablate", ("how", "losses", "ranking"), ()),
           ("patch", ("metric", "grid", "direction"), ()), ("compare", ("variants",), ()),
           ("scan", ("scan", "heads", "model"), ()), ("heads", ("heads", "model"), ("weights",)),
           ("run", ("variant",), ()), *((name, keys, ()) for name, (keys, _, _)
                                       in UNDRAWN.items() if keys),
           ("tokens", ("tokens",), ("weights", "heads")), ("weights", ("weights",), ()))


def kind_of(doc: Doc) -> str:
    """The document's kind: its "kind" where attncli wrote one, else recognised by its keys."""
    kind = doc.get("kind")
    if isinstance(kind, str) and (kind in KINDS or kind in UNDRAWN):
        return kind
    for name, keys, without in SNIFFED:
        if all(k in doc for k in keys) and not any(k in doc for k in without):
            return name
    raise AttnCliError("no weights in this JSON: expected attncli's output, a [N][N] or "
                       '[H][N][N] list, or {"tokens": [...], "weights": ...}')


def saved_from(data: Any) -> Saved:
    """The records a saved document holds, read by its kind, every part checked."""
    if isinstance(data, list):
        return Saved("weights", [weights_result(data, None)])
    if not isinstance(data, dict):
        raise AttnCliError("expected attncli JSON, a [N][N] or [H][N][N] list, or "
                           '{"tokens": [...], "weights": ...}')
    kind = kind_of(data)
    if kind in UNDRAWN:
        _, name, command = UNDRAWN[kind]
        holds = (": it holds tokens, no attention weights" if kind in ("tokens", "template")
                 else "")
        raise AttnCliError(f"show cannot draw {name} JSON{holds}; run `{command}` to see its "
                           f"{ {'tokens': 'table', 'template': 'text'}.get(kind, 'tables')}")
    results = KINDS[kind].read(data)
    if kind == "run" and results[0].long is not None:
        kind = "long"
    return Saved(kind, results, data)


def read_saved(path: str) -> Any:
    """The JSON of path, or of standard input for '-' (a file named - is ./-)."""
    data = _read_path(path, "FILE")  # the string as typed: Path("./-") would read as '-'
    source = "standard input" if path == "-" else f"FILE {path!r}"
    _decode(data, source)  # names the first byte that is not UTF-8
    return parse_json(data, source)


def load_saved(path: str) -> Saved:
    """Read and check a saved file ('-': standard input)."""
    return saved_from(read_saved(path))
