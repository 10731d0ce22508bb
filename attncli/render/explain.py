"""`attncli explain`: the variant's computation, stage by stage, each with a plain explanation."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.core.display import Display
from attncli.core.result import Result
from attncli.i18n import text
from attncli.render.draw.prose import prose
from attncli.render.predictions import and_predictions
from attncli.render.query import render_query
from attncli.render.run import describe
from attncli.render.stages import panels, render_panel, stage_title, text_key

# The walk-through's steps in computation order; Q, K and V are one step.
STEPS = (("inputs", ("inputs",)), ("qkv", ("queries", "keys", "values")),
         ("qk_norm", ("queries_norm", "keys_norm")), ("rope", ("queries_rope", "keys_rope")),
         ("scores", ("scores",)), ("scaled", ("scaled",)), ("capped", ("capped",)),
         ("masked", ("masked",)),
         ("softmax", ("softmax",)), ("dropped", ("dropped",)), ("weights", ("weights",)),
         ("heads_context", ("heads_context",)), ("context", ("context",)))

GROUPED = ("qkv", "qk_norm", "rope")  # steps that show several stages, each titled


def explained_stages(result: Result) -> list[str]:
    """The stages explain shows by default: all the variant has, except the repeated weights."""
    return [name for name in result.available_stages() if name != "weights"]


def _values(result: Result) -> dict[str, object]:
    c = result.config
    p = c.dropout or 0.0
    return {"norm": result.model.norm if result.model is not None else "", "seed": c.seed,
            "d_in": c.d_in, "d_out": c.d_out, "heads": c.heads,
            "head_dim": c.d_out // c.heads, "p": p, "scale": f"{1 / (1 - p):.4f}"}


def row_sum_check(console: Console, result: Result, options: Display) -> Text:
    """The check that each softmax row sums to 1."""
    sums = [sum(w for w in row if w is not None) for h in range(result.num_heads)
            for row in result.stages["softmax"][h]]
    low, high = min(sums), max(sums)
    dev = max(abs(s - 1.0) for s in sums)
    if dev <= 1e-5 + 1e-5 * 1.0:  # the house bound, |sum - 1| <= atol + rtol·1
        return prose(console, text(options.lang, "check.rows_ok", dev=f"{dev:.1e}"), "green")
    return prose(console, text(options.lang, "check.rows_bad", low=f"{low:.6f}",
                               high=f"{high:.6f}"), "bold red")


def dropout_check(console: Console, result: Result, options: Display) -> Text:
    """How many weights dropout zeroed, and one kept weight before and after its rescaling."""
    p, causal = result.config.dropout or 0.0, result.traits.causal
    zeroed, total, example = 0, 0, None
    for h in range(result.num_heads):
        for i, (drow, srow) in enumerate(zip(result.stages["dropped"][h],
                                             result.stages["softmax"][h], strict=True)):
            for j, (d, s) in enumerate(zip(drow, srow, strict=True)):
                if causal and j > i:
                    continue
                total += 1
                zeroed += d == 0.0
                if d != 0.0 and example is None:
                    example = (i, j, s, d)
    if example is None:
        return prose(console, text(options.lang, "check.dropout_none", zeroed=zeroed,
                                   total=total))
    i, j, before, after = example
    f = f".{options.precision}f"
    return prose(console, text(options.lang, "check.dropout", zeroed=zeroed, total=total, i=i,
                               j=j, before=format(before, f), after=format(after, f),
                               scale=format(1 / (1 - p), f)), "green")


def render_step(console: Console, result: Result, step: str, names: list[str], number: str,
                options: Display) -> list[RenderableType]:
    """One step: heading, explanation, checks, then its matrices."""
    lang, values = options.lang, _values(result)
    title = text(lang, f"title.{step}") if step in GROUPED else stage_title(result, step, lang)
    parts: list[RenderableType] = [Text(f"{number} · {title}", style="bold underline")]
    note = text(lang, text_key(step, result.variant, "explain"), **values)
    if step == "qkv" and result.num_heads > 1:
        note += " " + text(lang, "explain.qkv.heads", **values)
    if step == "inputs" and result.config.source == "inputs":
        note = text(lang, "explain.inputs.vectors", **values)
    model = result.model
    if step == "scores" and model is not None and model.family is not None and model.family.nope:
        note += " " + text(lang, "explain.nope", layer=model.layer)
    if step == "rope" and (kept := _unturned(result)):
        hd = model.head_dim if model is not None else 0
        note += " " + text(lang, "explain.rope.partial", turned=hd - kept, head_dim=hd)
    parts.append(prose(console, note, "italic"))
    if step == "softmax":
        parts.append(row_sum_check(console, result, options))
    if step == "dropped":
        parts.append(dropout_check(console, result, options))
    for name in names:
        for panel in panels(result, name, options):
            caption = f"{stage_title(result, name, lang)} — {panel.caption}" if step in GROUPED \
                else panel.caption
            parts += [Text(), render_panel(console, caption, result, panel, options)]
    return parts


def _unturned(result: Result) -> int:
    """How many trailing dimensions of each head RoPE left as they were (partial rotary, as in
    GPT-NeoX and Phi-3), read off the stages: at every position after the first, where the
    angle is not 0, those dimensions of the turned queries equal the unturned ones."""
    turned = result.stages.get("queries_rope")
    before = result.stages.get("queries_norm") or result.stages.get("queries")
    if not turned or not before or len(turned) != len(before) or len(turned[0]) < 2 \
            or any(len(t) != len(b) for t, b in zip(turned, before, strict=True)):
        return 0  # not the same cut of the two stages (a --head, --rows or --show subset)
    rows = [(t_row, b_row) for t_head, b_head in zip(turned, before, strict=True)
            for t_row, b_row in list(zip(t_head, b_head, strict=True))[1:]]
    width = len(rows[0][0])
    if any(len(t) != width or len(b) != width for t, b in rows):
        return 0
    kept = 0
    while kept < width and all(t[width - 1 - kept] == b[width - 1 - kept] for t, b in rows):
        kept += 1
    return kept if kept < width else 0


def steps_for(picked: list[str] | tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """The walk-through steps that show the picked stages, in computation order."""
    steps = [(step, [name for name in names if name in picked]) for step, names in STEPS]
    return [(step, names) for step, names in steps if names]


def render_explain(console: Console, result: Result, options: Display) -> RenderableType:
    """The whole walk-through, then one query's view when asked."""
    picked = list(options.stages) if options.stages else explained_stages(result)
    steps = steps_for(picked)
    variant = text(options.lang, f"variant.{result.variant}")
    parts: list[RenderableType] = [describe(result), prose(
        console, text(options.lang, "explain.header", variant=variant))]
    for k, (step, names) in enumerate(steps, start=1):
        number = text(options.lang, "step", k=k, n=len(steps))
        parts += [Text(), *render_step(console, result, step, names, number, options)]
    if result.query is not None:
        parts += [Text(), render_query(console, result, options)]
    return and_predictions(console, result, options, Group(*parts))
