"""`attncli generate`'s views: the conversation with what one answer token looked at, and the
summary of every answer token's most-attended prompt tokens. Takes the result, never tensors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from attncli.errors import escaped
from attncli.records.given import nats
from attncli.render.draw.colors import cell_style, has_colour, shade_of
from attncli.render.draw.palette import depth_of

if TYPE_CHECKING:
    from attncli.records.generation import GenerateView, GenerationResult
    from attncli.records.given import Receipt


KINDS = {"raw": "raw attention weights",
         "value": "value-weighted attention α·‖W_O v‖ per head (Kobayashi 2020), rows "
                  "renormalised",
         "occlusion": "occlusion: the answer token's log-prob drop (nats) with the prompt {} "
                      "masked in every layer and head"}
MASKED = {"token": "token", "word": "token's word (its tokens together)",
          "turn": "token's turn (its tokens together)"}


def legend(result: GenerationResult, view: GenerateView) -> str:
    """What the numbers shown are: the view, its layers and heads and how they combine, and
    which sinks are out."""
    found = ", ".join(repr(result.prompt[i].text) for i in result.found_sinks)
    template = (f", {len(result.sinks) - 1} template tokens" if len(result.sinks) > 1 else "")
    left = (f"the first token{template}"
            + (f" and {found}, found by a large share of attention and a small value norm"
               if found else ""))
    if view.kind == "occlusion":
        sinks = (f"sinks not shown ({left})" if view.exclude_sinks else "sinks shown")
        by = "token" if result.occluded is None else result.occluded.by
        return (f"{KINDS[view.kind].format(MASKED[by])}; the whole model; {sinks}"
                f"{_chosen(result, view)}")
    a, b = view.layers or result.layers_kept or (0, result.model.layers)
    heads = "every head" if view.head is None else f"head {view.head}"
    sinks = (f"sinks left out ({left}) and the rest renormalised" if view.exclude_sinks
             else "sinks kept")
    return (f"{KINDS[view.kind]}; layers {a}:{b}, {heads}, combined by {view.combine}; {sinks}"
            f"{_chosen(result, view)}")


def _chosen(result: GenerationResult, view: GenerateView) -> str:
    """Where the default view chose the view shown: what it chose by."""
    from attncli.records.asking import AUTO_LOOKS

    if result.auto_looks is None or view.kind != result.view:
        return ""
    if view.kind == "occlusion":
        return (f"; the default view (--view auto): its masked passes took "
                f"{result.auto_looks:.1f} looks, at most {AUTO_LOOKS}")
    if result.auto_looks <= AUTO_LOOKS:
        return ("; the default view (--view auto) for --layers, --head or --combine; --view "
                "occlusion for the whole model's")
    return (f"; the default view (--view auto): occlusion would take {result.auto_looks:.1f} "
            f"looks, over {AUTO_LOOKS}; --view occlusion for it")


def _tokens(count: int) -> str:
    """"1 token", "2 tokens"."""
    return f"{count:,} token{'s' * (count != 1)}"


def heading(result: GenerationResult) -> str:
    """Which model answered, how it was prompted and why it stopped."""
    prompted = (f"chat template ({result.template.origin})" if result.template.used
                else "the prompt raw (no chat template)")
    turns = f", {len(result.turns)} turns" if len(result.turns) > 1 else ""
    if result.numerics != "float32":
        turns += f", {result.numerics}'s numerics"
    if result.given_answer:
        return (f"{result.model.path}: a given answer of {_tokens(len(result.answer))}, "
                f"teacher-forced (one pass, no generation), {prompted}{turns}")
    strategy = "sample" if result.sampling.sample else "greedy"
    seed = f", seed {result.sampling.seed}" if result.sampling.sample else ""
    return (f"{result.model.path}: {_tokens(len(result.answer))}, "
            f"{strategy}{seed}, {prompted}{turns}; stopped: {result.stopped}")


def _choice(result: GenerationResult, step: int) -> str:
    """The token's probability and rank, and the model's own choice where it is not it."""
    record = result.steps[step]
    prob, rank = record.prob, record.rank
    text = f"{prob:.3f}" if prob >= 1e-3 else f"{prob:.1e}"
    if rank is not None and rank != 1 and record.top:
        text += f" #{rank}, model: {record.top[0].text!r}"
    return text


def _ranked_text(result: GenerationResult, step: int, view: GenerateView) -> str:
    return "  ".join(f"{result.prompt[i].text!r} {w:.3f}" for i, w in result.ranked(step, view))


def render_summary(result: GenerationResult, view: GenerateView,
                   width: int | None = None) -> Table:
    """Per answer token: its top-k prompt tokens with their share, and its share to the
    prompt against to earlier answer tokens (those two columns left out where width cannot
    hold every column's longest word: a number is shown whole or not at all)."""
    shares = view.kind != "occlusion"
    what = "drop" if view.kind == "occlusion" else "weight"
    columns = ["#", "token", "p", f"top {view.k} prompt tokens ({what})",
               *(("prompt", "answer") if shares else ())]
    p = len(result.prompt)
    rows = []
    for s, token in enumerate(result.answer):
        row = result.row(s, view)
        split = (f"{row[:p].sum():.2f}", f"{row[p:].sum():.2f}") if shares else ()
        rows.append([str(s), escape(repr(token.text)), escape(_choice(result, s)),
                     escape(_ranked_text(result, s, view)), *split])
    if shares and width is not None and _least_width(columns, rows) > width:
        columns, rows = columns[:-2], [cells[:-2] for cells in rows]
    table = Table(title=None, show_edge=False, pad_edge=False)
    for column in columns:
        table.add_column(column, justify="right" if column in ("#", "prompt", "answer")
                         else "left")
    for cells in rows:
        table.add_row(*cells)
    return table


def _least_width(columns: list[str], rows: list[list[str]]) -> int:
    """The narrowest the table can be with no word cut: each column's longest word, and the
    three characters between two columns."""
    longest = [max(cell_len(word) for text in (column, *(cells[k] for cells in rows))
                   for word in [*text.split(), ""]) for k, column in enumerate(columns)]
    return sum(longest) + 3 * (len(columns) - 1)


def render_conversation(out: Console, result: GenerationResult, view: GenerateView,
                        at: int) -> RenderableType:
    """The prompt and the answer as text, each prompt token shaded by answer token at's
    weight on it (a shade character before it without colour), at marked."""
    row = result.row(at, view)
    top = float(row[:len(result.prompt)].max()) if len(result.prompt) else 0.0
    depth, colour = depth_of(out), has_colour(out)
    text = Text()
    starts = {turn.start: turn.role for turn in result.turns if turn.end > turn.start}
    for token in result.prompt:
        if token.index in starts:
            text.append(f"[{starts[token.index]}] ", style="dim")
        weight = max(float(row[token.index]), 0.0)
        if colour and depth is not None:
            text.append(token.text, style=cell_style(weight, 0.0, top or 1.0, depth))
        else:
            text.append(token.text)
            if weight >= 0.05 * (top or 1.0):
                text.append(f"[{shade_of(weight, 0.0, top or 1.0)}]")
    for s, token in enumerate(result.answer):
        text.append(token.text, style="bold reverse" if s == at else "bold")
    return text


def render_generation(out: Console, result: GenerationResult,
                      view: GenerateView) -> RenderableType:
    """The default view: heading, answer, what --at's token looked at (or each answer token's
    ranked prompt tokens), the summary and the legend."""
    # The path and the answer's text (the vocabulary's bytes) with control characters escaped.
    parts: list[RenderableType] = [
        Text(escaped(heading(result)), style="bold"),
        Text("answer: ", style="bold").append(escaped(result.answer_text, lines=True))]
    if not result.answer:
        return Group(*parts, Text("no answer token was written"))
    if view.at is not None:
        token = result.answer[view.at]
        parts += [Text(f"answer token {view.at} {token.text!r} looked at:"),
                  render_conversation(out, result, view, view.at),
                  Text(_ranked_text(result, view.at, view))]
    parts.append(render_summary(result, view, out.width))
    if view.kind != "occlusion":
        to_prompt, to_answer = result.shares(view)
        parts.append(Text(f"attention to the prompt {to_prompt:.2f}, to earlier answer tokens "
                          f"{to_answer:.2f} (mean over answer tokens)"))
    if result.receipt is not None:
        parts.append(render_receipt(result.receipt))
    parts.append(Text(legend(result, view), style="dim"))
    return Group(*parts)


def render_receipt(receipt: Receipt) -> Text:
    """The runtime's log-probabilities against attncli's: the largest difference, the tokens
    past the bound, and where the two would have chosen differently."""
    rows, largest = receipt.rows, receipt.largest
    how = ("token by token" if receipt.compared == "tokens" else
           f"by text over {len(rows)} spans (the tokenizations differ)")
    text = Text(f"receipt: the runtime's log-probabilities against attncli's, {how}: largest "
                f"difference {nats(largest.difference)} nats at {largest.text!r}")
    flagged = receipt.flagged
    if flagged:
        shown = ", ".join(f"{rows[k].text!r} ({nats(rows[k].difference, 2)})" for k in flagged[:5])
        text.append(f"\nFLAGGED: {len(flagged)} differ by more than {receipt.flag_above} "
                    f"nat: {shown}; the runtime ran another model, or the file was altered",
                    style="bold")
    else:
        text.append(f"; none differs by more than {receipt.flag_above} nat")
    for k in receipt.choices_differ[:5]:
        text.append(f"\nat {rows[k].text!r} the runtime's likeliest token was "
                    f"{rows[k].runtime_choice!r}, attncli's {rows[k].attncli_choice!r}")
    return text
