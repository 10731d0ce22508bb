"""`ablate` and `patch` as tables: what an ablation changed (each token's loss, the next-token
distribution, the answer), every head ranked by effect beside its pattern scores, and the
patching grid, layer × head, coloured on a scale centred on zero (the numbers carry it all
without colour)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.render.draw.colors import cell_style, has_colour, shade_of
from attncli.render.draw.palette import depth_of
from attncli.render.draw.tables import shorten

if TYPE_CHECKING:
    from attncli.records.causal import Ablation, Loss, Patching

RANKED = 30  # heads listed by `ablate --heads all`; --json lists every one
LABEL = 16  # characters of a token label


def _heads(heads: list[tuple[int, int]]) -> str:
    return ", ".join(f"{layer}.{head}" for layer, head in heads)


def _signed(value: float | None, precision: int) -> str:
    return "" if value is None else f"{value:+.{precision}f}"


def ablation_legend(result: Ablation) -> str:
    """What was replaced, and with what."""
    which = "every head, one at a time" if not result.heads else f"heads {_heads(result.heads)}"
    return f"Ablated: {which}; {result.legend} (--how {result.how})."


def _token(label: str) -> str:
    return shorten(repr(label), LABEL)


def _top_table(result: Ablation, precision: int) -> Table:
    at = result.at
    table = Table(title=f"Next token after position {at} {_token(result.tokens[at])}",
                  box=box.SIMPLE, title_justify="left")
    for name in ("before", "p", "after", "p "):
        table.add_column(name, justify="right" if name.startswith("p") else "left")
    before, after = result.top["before"], result.top["after"]
    for k in range(max(len(before), len(after))):
        row = []
        for side in (before, after):
            entry = side[k] if k < len(side) else None
            row += ["", ""] if entry is None else [_token(entry["text"]),
                                                   f"{entry['prob']:.{precision}f}"]
        table.add_row(*row)
    return table


def _losses(out: Console, result: Ablation, precision: int) -> Table:
    table = Table(title="Loss per token (−log p)",
                  box=box.SIMPLE, title_justify="left")
    for name, side in (("#", "right"), ("token", "left"), ("before", "right"),
                       ("after", "right"), ("change", "right")):
        table.add_column(name, justify=side)  # type: ignore[arg-type]
    changes = [_after(r) - r["before"] for r in result.losses]
    top = max((abs(c) for c in changes), default=0.0) or 1.0
    depth = depth_of(out)
    for row, change in zip(result.losses, changes, strict=True):
        cell = Text(_signed(change, precision))
        if depth is not None:
            cell.stylize(cell_style(change, -top, top, depth, diverging=True))
        table.add_row(str(row["index"]), _token(row["token"]), f"{row['before']:.{precision}f}",
                      f"{_after(row):.{precision}f}", cell)
    mean_before = sum(r["before"] for r in result.losses) / len(result.losses)
    mean_after = sum(_after(r) for r in result.losses) / len(result.losses)
    table.add_row("", "mean", f"{mean_before:.{precision}f}", f"{mean_after:.{precision}f}",
                  _signed(mean_after - mean_before, precision))
    return table


def _after(row: Loss) -> float:
    """A token's loss after the ablation: in every row of a table of heads ablated together."""
    after = row.get("after")
    assert after is not None, "the losses after the ablation"
    return after


def _answer(result: Ablation, precision: int) -> Text | None:
    answer = result.answer
    if answer is None:
        return None
    after = "" if answer["after"] is None else (
        f" → {answer['after']:.{precision}f} "
        f"({_signed(answer['after'] - answer['before'], precision)})")
    return Text(f"Answer {answer['text']!r} (teacher-forced from position {answer['start']}): "
                f"log p = {answer['before']:.{precision}f}{after}")


def _ranking(out: Console, result: Ablation, precision: int) -> RenderableType:
    rows = result.ranking or []
    by_answer = result.answer is not None
    effect = "answer drop" if by_answer else "loss rise"
    table = Table(title=f"Every head ablated alone, by effect ({effect}: "
                  + ("log p before − after" if by_answer else
                     f"mean loss of tokens {result.scored}.. after − before") + ")",
                  box=box.SIMPLE, title_justify="left")
    for name in ("rank", "head", effect, f"KL @{result.at}", "prev", "dup", "induction"):
        table.add_column(name, justify="left" if name == "head" else "right")
    top = max((abs(r["effect"]) for r in rows), default=0.0) or 1.0
    depth = depth_of(out)
    for rank, row in enumerate(rows[:RANKED], start=1):
        cell = Text(_signed(row["effect"], precision))
        if depth is not None:
            cell.stylize(cell_style(row["effect"], -top, top, depth, diverging=True))
        table.add_row(str(rank), f"{row['layer']}.{row['head']}", cell,
                      f"{row['kl']:.{precision}f}",
                      *(f"{row[name]:.{precision}f}"
                        for name in ("previous_token", "duplicate_token", "induction")))
    parts: list[RenderableType] = [table]
    if len(rows) > RANKED:
        parts.append(Text(f"({len(rows) - RANKED} more heads: --json lists every one)"))
    return Group(*parts)


def render_ablation(out: Console, result: Ablation, precision: int = 3) -> RenderableType:
    """ablate's tables: the legend, then the ranking (--heads all) or what the edit changed."""
    parts: list[RenderableType] = [Text(f"{result.model['path']}: {len(result.ids)} tokens. "
                                        + ablation_legend(result))]
    if not result.heads:
        parts += [_ranking(out, result, precision), _top_table(result, precision)]
    else:
        parts += [_losses(out, result, precision), _top_table(result, precision)]
        if result.kl is not None:
            parts.append(Text(f"KL(before ‖ after) at position {result.at}: "
                              f"{result.kl:.{precision + 2}f} nats"))
    answer = _answer(result, precision)
    if answer is not None:
        parts.append(answer)
    return Group(*parts)


def render_grid(out: Console, title: str, grid: list[list[float]],
                precision: int) -> RenderableType:
    """A layer × head grid, each cell coloured on a scale centred on zero (shaded without
    colour)."""
    table = Table(title=title, box=box.SIMPLE, title_justify="left")
    table.add_column("layer", justify="right")
    for head in range(len(grid[0]) if grid else 0):
        table.add_column(f"h{head}", justify="right")
    top = max((abs(v) for row in grid for v in row), default=0.0) or 1.0
    depth, colour = depth_of(out), has_colour(out)
    for layer, row in enumerate(grid):
        cells: list[Any] = []
        for value in row:
            text = f"{value:+.{precision}f}"
            if colour and depth is not None:
                cells.append(Text(text, style=cell_style(value, -top, top, depth,
                                                         diverging=True)))
            else:
                cells.append(text + shade_of(value, -top, top, diverging=True))
        table.add_row(str(layer), *cells)
    return table


def render_patching(out: Console, result: Patching, precision: int = 3) -> RenderableType:
    """patch's grid, layer × head, its top heads, and the attribution estimate beside."""
    base = result.baseline
    what = ("logit(" + ") − logit(".join(repr(t["text"]) for t in result.tokens or []) + ")"
            f" at position {result.at}") if result.metric == "logit-diff" else \
        "the answer's log-probability"
    way = ("clean heads patched into the corrupted run (1: the clean metric restored)"
           if result.direction == "denoise" else
           "corrupted heads patched into the clean run (−1: the corrupted metric reached)")
    parts: list[RenderableType] = [
        Text(f"{result.model['path']}: {len(result.clean)} tokens; metric {what}: clean "
             f"{base['clean']:.{precision}f}, corrupted {base['corrupt']:.{precision}f}."),
        Text(f"--{result.direction}: {way}.")]
    if result.grid:
        parts.append(render_grid(out, "Patched metric, normalised, layer × head", result.grid,
                                 precision))
        top = Table(title="Top heads", box=box.SIMPLE, title_justify="left")
        for name in ("head", "effect", "metric"):
            top.add_column(name, justify="left" if name == "head" else "right")
        for cell in result.top(10):
            top.add_row(f"{cell['layer']}.{cell['head']}", f"{cell['effect']:+.{precision}f}",
                        f"{cell['metric']:.{precision}f}")
        parts.append(top)
    if result.attribution is not None:
        parts.append(render_grid(out, "Attribution patching (gradient estimate), normalised",
                                 result.attribution["grid"], precision))
        if "spearman" in result.attribution:
            parts.append(Text("Agreement with the exact grid: Spearman rank correlation "
                              f"{result.attribution['spearman']:.{precision}f}"))
    return Group(*parts)


# show's, by the JSON's kind
RENDERERS: dict[str, Callable[[Console, Any], RenderableType]] = {
    "ablate": render_ablation, "patch": render_patching}
