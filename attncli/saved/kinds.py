"""The one table of what a saved document may be: its "kind" → how it is read into its records
(or, for a kind show does not draw, how the refusal names it), and the keys that tell a document
saved before kinds were written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attncli.core.inputs import _decode, _read_path, parse_json
from attncli.core.result import Result
from attncli.errors import AttnCliError
from attncli.saved.causal import ablation_from_dict, patching_from_dict
from attncli.saved.generate import generation_from_dict
from attncli.saved.heads import heads_from_dict
from attncli.saved.parts import bad, items, need, obj
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
    """A kind of document: how it is read (None: show does not draw it, and names it and the
    command that shows it), and the keys a document saved before kinds has all of (and none of
    without) to be recognised as this kind (none: never recognised by its keys)."""

    read: Callable[[Doc], list[Any]] | None
    keys: tuple[str, ...] = ()
    without: tuple[str, ...] = ()
    name: str = ""
    command: str = ""
    shows: str = "tables"  # what the command shows: a table or text holds tokens, no weights


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


def _undrawn(name: str, command: str, *keys: str, without: tuple[str, ...] = (),
             shows: str = "tables") -> Kind:
    """A kind show does not draw: its name in the refusal, the command that shows it."""
    return Kind(None, keys, without, name, command, shows)


# In the order a document saved before kinds is recognised: ablate's and patch's hold "heads"
# and "model", as heads' do.
KINDS = {
    "ablate": Kind(lambda doc: [ablation_from_dict(doc)], ("how", "losses", "ranking")),
    "patch": Kind(lambda doc: [patching_from_dict(doc)], ("metric", "grid", "direction")),
    "compare": Kind(_compare, ("variants",)),
    "scan": Kind(lambda doc: [heads_from_dict(doc)], ("scan", "heads", "model")),
    "heads": Kind(lambda doc: [heads_from_dict(doc)], ("heads", "model"), ("weights",)),
    "run": Kind(lambda doc: [result_from_dict(doc)], ("variant",)),
    "cost": _undrawn("a `cost` lesson's", "attncli cost", "rows", "fit", "projection"),
    "flash": _undrawn("a `flash` lesson's", "attncli flash TEXT", "block", "steps", "memory"),
    "kvcache": _undrawn("a `kvcache` lesson's", "attncli kvcache TEXT", "steps", "totals"),
    "streaming": _undrawn("`kvcache --keep`'s", "attncli kvcache TEXT --model M --keep",
                          "policies", "ranges"),
    "permute": _undrawn("a `permute` lesson's", "attncli permute TEXT_A TEXT_B", "a", "b",
                        "permutation"),
    "models": _undrawn("`models`'", "attncli models", "cache", "models"),
    "doctor": _undrawn("`doctor`'s", "attncli doctor", "extensions", "torch"),
    "check": _undrawn("`check`'s", "attncli check FILE:CLASS", "verdict", "cases"),
    "tokens": _undrawn("`tokens`'", "attncli tokens TEXT", "tokens",
                       without=("weights", "heads"), shows="table"),
    "weights": Kind(lambda doc: [weights_result(need(doc, "weights", "the file"),
                                                doc.get("tokens"))], ("weights",)),
    "template": _undrawn("`generate --show-template`'s",
                         "attncli generate TEXT --model M --show-template", shows="text"),
    "config": _undrawn("`config list`'s", "attncli config list"),
    "scan_settings": _undrawn("a scan's settings (its scan.json)", "attncli show OUT/summary.json"),
    "generate": Kind(lambda doc: [generation_from_dict(doc)]),
}


def kind_of(doc: Doc) -> str:
    """The document's kind: its "kind" where attncli wrote one, else (a document without one)
    recognised by its keys."""
    kind = doc.get("kind")
    if isinstance(kind, str) and kind in KINDS:
        return kind
    if "kind" in doc:  # a kind attncli never wrote: not a document to read by its other keys
        raise bad("kind", kind, f"one of the kinds attncli writes ({', '.join(KINDS)})")
    for name, found in KINDS.items():
        if found.keys and all(k in doc for k in found.keys) and not any(
                k in doc for k in found.without):
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
    if (read := (found := KINDS[kind]).read) is None:
        holds = "" if found.shows == "tables" else ": it holds tokens, no attention weights"
        raise AttnCliError(f"show cannot draw {found.name} JSON{holds}; run `{found.command}` to "
                           f"see its {found.shows}")
    results = read(data)
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
