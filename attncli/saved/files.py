"""Saved weights back into result records: attncli's JSON, bare [N][N] or [H][N][N] lists, or
{"tokens": [...], "weights": ...}, checked, for `attncli show`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from attncli.core.display import resolve_query
from attncli.core.inputs import _decode, _read_path, parse_json
from attncli.core.result import STAGES, QueryRow, Result, RunConfig, TokenInfo
from attncli.core.variants import HEAD_DIM_STAGES, TOKEN_STAGES
from attncli.errors import AttnCliError
from attncli.saved.heads import heads_from_dict
from attncli.saved.parts import check_cells, items, obj, row
from attncli.saved.run import result_from_dict, tokens_from
from attncli.version import __version__

Doc = dict[str, Any]


@dataclass(frozen=True)
class Saved:
    """What a saved file holds: its kind (run, long, compare, heads, weights or generate) and
    records (generate: none here, its doc is read by models/generate/saved.py)."""

    kind: str
    results: list[Any]
    doc: Doc = field(default_factory=dict)


def read_saved(path: str) -> Any:
    """The JSON of path, or of standard input for '-' (a file named - is ./-)."""
    data = _read_path(path, "FILE")  # the string as typed: Path("./-") would read as '-'
    source = "standard input" if path == "-" else f"FILE {path!r}"
    _decode(data, source)  # names the first byte that is not UTF-8
    return parse_json(data, source)


def weights_stack(data: Any, what: str = "weights") -> list[list[list[float | None]]]:
    """[H][N][N] weights from a [N][N] or [H][N][N] list, each matrix square and the same size."""
    if not isinstance(data, list) or not data:
        raise AttnCliError(f"{what} must be a [N][N] or [H][N][N] list of numbers")
    three = isinstance(data[0], list) and bool(data[0]) and isinstance(data[0][0], list)
    heads = data if three else [data]
    if not isinstance(heads[0], list) or not heads[0]:
        raise AttnCliError(f"{what} must be a non-empty list of rows (a [N][N] list)")
    size = len(heads[0])
    check_cells(len(heads) * size * size, f"{what}: {len(heads)} head(s) of {size}×{size}")
    stack = []
    for h, m in enumerate(heads):
        name = f"{what} head {h}" if len(heads) > 1 else what
        if not isinstance(m, list) or not m or not all(isinstance(r, list) for r in m):
            raise AttnCliError(f"{name} must be a non-empty list of rows (a [N][N] list)")
        if len(m) != size:
            raise AttnCliError(f"{what}: head {h} is {len(m)}×{size}; every head must be "
                               f"{size}×{size}")
        for i, r in enumerate(m):
            if len(r) != size:
                raise AttnCliError(f"{name}: row {i} has {len(r)} values, expected {size} "
                                   "(weights are square: one row and one column per token)")
        stack.append([row(r, f"{name}[{i}]", size, nulls=True) for i, r in enumerate(m)])
    return stack


def weights_result(weights: Any, tokens: Any) -> Result:
    """Bare weights (and token labels) as a Result with only the weights stage."""
    stack = weights_stack(weights)
    size = len(stack[0])
    labels = ([TokenInfo(i, None, str(i)) for i in range(size)] if tokens is None
              else tokens_from(tokens, size, strict=False))
    config = RunConfig(source="saved", num_tokens=size, d_in=0, d_out=0, heads=len(stack),
                       impl="naive", version=__version__)
    return Result(variant="saved", config=config, tokens=labels,
                  weights=stack, context=[], stages={"weights": stack}, present=("weights",))


def pick(result: Result, head: int | None, query: str | None) -> Result:
    """The saved result with --head's head alone and --query's row, as a run would hold them."""
    if head is not None and result.config.measure == "rollout":
        raise AttnCliError("--head does not apply to a rollout's file: it holds one matrix, "
                           "heads averaged")
    if head is not None:
        held = [result.head_number(h) for h in range(result.num_heads)]
        if head not in held:
            raise AttnCliError(f"--head {head} is out of range: this file holds head(s) "
                               f"{', '.join(map(str, held[:8]))}{' ...' * (len(held) > 8)}")
        at = held.index(head)
        row = result.query
        norm = result.norm
        result = replace(result, weights=[result.weights[at]],
                         norm=None if norm is None else [norm[at]],
                         config=replace(result.config, head=head),
                         stages={name: _one_head(name, data, at)
                                 for name, data in result.stages.items()},
                         query=None if row is None else replace(row, weights=[row.weights[at]]))
    if query is not None:
        if result.long is not None:
            raise AttnCliError("--query on a long run's file: it holds the weights of a window "
                               "only; run it again with --query")
        index = resolve_query(query, result.labels)
        result = replace(result, query=QueryRow(index, result.labels[index],
                                                [h[index] for h in result.weights]))
    return result


def _one_head(name: str, data: Any, at: int) -> Any:
    """A stage of one head: [h][T][*] stages keep head at; others are shared by the heads."""
    if data is None or name not in (*TOKEN_STAGES, *HEAD_DIM_STAGES):
        return data
    return [data[at]]


def with_stages(result: Result, names: tuple[str, ...]) -> Result:
    """The result holding each of the --show stages asked for, or one line naming the absent."""
    if result.long is not None:
        raise AttnCliError("--show on a tiled run's file: the tiled path keeps no stages")
    stages = dict(result.stages)
    for name in names:
        if stages.get(name) is None and name in ("weights", "context") and result.context:
            stages[name] = result.weights if name == "weights" else result.context
        if stages.get(name) is None:
            held = [n for n in STAGES if stages.get(n) is not None] or ["weights"]
            raise AttnCliError(f"--show {name}: this file holds no {name} stage; it holds "
                               f"{', '.join(held)}")
    return replace(result, stages=stages)


# What attncli writes that show does not draw, by the keys that tell it: the command to run.
UNDRAWN = (
    (("rows", "fit", "projection"), "a `cost` lesson's", "attncli cost"),
    (("block", "steps", "memory"), "a `flash` lesson's", "attncli flash TEXT"),
    (("steps", "totals"), "a `kvcache` lesson's", "attncli kvcache TEXT"),
    (("a", "b", "permutation"), "a `permute` lesson's", "attncli permute TEXT_A TEXT_B"),
    (("cache", "models"), "`models`'", "attncli models"),
)


def _undrawn(data: dict[str, Any]) -> None:
    """Refuse, by name, a kind of attncli JSON that holds no attention weights to draw."""
    for keys, kind, command in UNDRAWN:
        if all(k in data for k in keys):
            raise AttnCliError(f"show cannot draw {kind} JSON; run `{command}` to see its "
                               "tables")
    if "tokens" in data and "weights" not in data and "variant" not in data \
            and "heads" not in data:
        raise AttnCliError("show cannot draw `tokens`' JSON: it holds tokens, no attention "
                           "weights; run `attncli tokens TEXT` to see its table")


def _compare(data: Any) -> list[Result]:
    """compare's variants: naive runs on the same tokens."""
    docs = items(data, "variants")
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


MEASURES = ("norm", "rollout")  # what config.measure may say "weights" holds instead


def run_from(data: dict[str, Any]) -> Result:
    """A run's JSON back into its Result; with config.measure, what it holds checked too: norm's
    raw lengths ("norm", shaped as weights), or rollout's one matrix (heads averaged)."""
    config = data.get("config")
    measure = config.get("measure") if isinstance(config, dict) else None
    if measure is None:
        if "norm" in data:
            raise AttnCliError('saved file: "norm" without config.measure "norm"')
        return result_from_dict(data)
    if measure not in MEASURES:
        raise AttnCliError(f"saved file: config.measure must be one of {', '.join(MEASURES)} "
                           f"(got {measure!r})")
    doc = dict(data)
    if measure == "rollout":
        # One matrix for every head: checked as each head's would be, then held once.
        heads = config.get("heads") if isinstance(config, dict) else None
        held = data.get("weights")
        if not isinstance(held, list) or len(held) != 1 or not isinstance(heads, int) \
                or not 1 <= heads <= 4096:
            raise AttnCliError("saved file: a rollout's weights are one matrix ([1][N][N]) "
                               "beside config.heads")
        doc["weights"] = held * heads
        query = data.get("query")
        if isinstance(query, dict) and isinstance(query.get("weights"), list) \
                and len(query["weights"]) == 1:
            doc["query"] = {**query, "weights": query["weights"] * heads}
    elif "norm" not in data:
        raise AttnCliError('saved file: config.measure is "norm" but the file has no "norm"')
    result = result_from_dict(doc)
    result = replace(result, config=replace(result.config, measure=measure))
    if measure == "norm":
        norm = result_from_dict({**doc, "weights": data["norm"], "query": None}).weights
        return replace(result, norm=norm)
    query = result.query
    return replace(result, weights=result.weights[:1],
                   query=None if query is None else replace(query, weights=query.weights[:1]))


def saved_from(data: Any) -> Saved:
    """The records a saved document holds, by its shape, every part checked."""
    if isinstance(data, list):
        return Saved("weights", [weights_result(data, None)])
    if not isinstance(data, dict):
        raise AttnCliError("expected attncli JSON, a [N][N] or [H][N][N] list, or "
                           '{"tokens": [...], "weights": ...}')
    if data.get("kind") == "generate":  # read by models/generate/saved.py, for show
        return Saved("generate", [], doc=data)
    if "variants" in data:
        return Saved("compare", _compare(data["variants"]), doc=data)
    if "scan" in data and "heads" in data and "model" in data:
        return Saved("scan", [heads_from_dict(data)], doc=data)
    if "heads" in data and "model" in data and "weights" not in data:
        return Saved("heads", [heads_from_dict(data)], doc=data)
    if "variant" in data:
        result = run_from(data)
        return Saved("long" if result.long is not None else "run", [result], doc=data)
    _undrawn(data)
    if "weights" in data:
        return Saved("weights", [weights_result(data["weights"], data.get("tokens"))])
    raise AttnCliError("no weights in this JSON: expected attncli's output, a [N][N] or "
                       '[H][N][N] list, or {"tokens": [...], "weights": ...}')


def load_saved(path: str) -> Saved:
    """Read and check a saved file ('-': standard input)."""
    return saved_from(read_saved(path))
