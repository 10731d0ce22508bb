"""What `attncli show` draws of a saved file: the view options each kind of file has no use for,
--head's head and --query's row picked, the window and stages the saved run showed, and the
JSON written back."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

from attncli.core.display import Window, resolve_query
from attncli.core.result import STAGES, QueryRow, Result
from attncli.core.variants import HEAD_DIM_STAGES, TOKEN_STAGES
from attncli.errors import AttnCliError
from attncli.saved.parts import printable
from attncli.saved.run import CORNER

Windows = tuple[Window | None, Window | None]
# A kind's view options it has nothing for, in the order they are named, and why.
HEADS_ONLY = (("--head", "--query", "--show", "--rows", "--cols"),
              "`heads` JSON: it holds each head's measures, not its weights")
NOT_FOR = {"generate": (("--query", "--show", "--rows", "--cols"),
                        "`generate` JSON: choose the answer token with --at, and --layers, "
                        "--head, --combine"),
           "heads": HEADS_ONLY, "scan": HEADS_ONLY,
           **{kind: (("--head", "--query", "--show", "--rows", "--cols"),
                     f"`{kind}` JSON: it holds no attention weights")
              for kind in ("ablate", "patch")}}


def refuse_unused(kind: str, given: Collection[str], attended: bool) -> None:
    """Refuse the first of the options given that a file of kind has nothing for; attended: a
    generation's view options (--at, --layers, --combine, --keep-sinks, --view raw|value|
    occlusion) were given."""
    if attended and kind != "generate":
        raise AttnCliError("--at, --layers, --combine, --keep-sinks and --view raw|value|occlusion "
                           "apply to `generate` JSON only")
    names, why = NOT_FOR.get(kind, ((), ""))
    unused = [name for name in names if name in given]
    if unused:
        raise AttnCliError(f"{unused[0]} does not apply to {why}")


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


def _corner(result: Result) -> bool:
    """True for the corner a tiled run keeps without --rows/--cols (not a window it showed)."""
    side = min(len(result.tokens), CORNER)
    return result.window == {"rows": [0, side], "cols": [0, side]}


def shown_view(result: Result, windows: Windows,
               stages: tuple[str, ...] | None) -> tuple[Windows, tuple[str, ...] | None]:
    """--rows, --cols and --show, each else what the saved run showed: its window (a tiled
    run's own corner is no window it showed) and the stages a naive run kept."""
    held = result.window
    if held is not None and not (result.long is not None and _corner(result)):
        windows = (windows[0] or Window("--rows", *held["rows"]),
                   windows[1] or Window("--cols", *held["cols"]))
    if stages is None and result.stages and result.long is None:
        stages = tuple(name for name in result.stages if result.stages[name] is not None)
    return windows, stages


def check_inside(result: Result, rows: tuple[int, int] | None,
                 cols: tuple[int, int] | None) -> None:
    """--rows/--cols on a tiled run's file: within the window of weights it holds."""
    if result.long is None:
        return
    assert result.window is not None, "a tiled run holds its window"
    for option, span, held in (("--rows", rows, result.window["rows"]),
                               ("--cols", cols, result.window["cols"])):
        if span is not None and not held[0] <= span[0] < span[1] <= held[1]:
            raise AttnCliError(f"{option} {span[0]}:{span[1]} is outside the window this file "
                               f"holds ({option} {held[0]}:{held[1]}); run it again with "
                               f"{option} {span[0]}:{span[1]}")


def saved_doc(kind: str, results: list[Any], doc: dict[str, Any]) -> dict[str, Any]:
    """The JSON show writes of a file of kind: what it read, as the command that wrote it writes
    it (a scan's summary: doc, its strings escaped as the reader escapes those it checks)."""
    first = results[0]
    if kind == "scan":  # one saved before kinds were written gains its kind
        return printable(doc if "kind" in doc else {"kind": "scan", **doc})
    if kind == "compare":
        return {"kind": "compare", "variants": [result.to_dict() for result in results]}
    if kind == "weights":
        return {"kind": "weights", "tokens": [t.to_dict() for t in first.tokens],
                "weights": first.weights}
    return first.to_dict()
