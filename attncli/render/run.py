"""Renderables for `attncli run` and `attncli tokens`."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from attncli.render.tables import Axis, render_matrix
from attncli.result import Result
from attncli.tokens import TokenPiece

VARIANT_TITLES = {
    "simple": "simple attention",
    "qkv": "QKV self-attention",
    "causal": "causal attention",
    "multihead": "multi-head attention",
}


def describe(result: Result) -> Text:
    """One line naming the variant and the settings that shaped the numbers."""
    c = result.config
    parts = [f"{c['num_tokens']} tokens", f"d_in {c['d_in']} → d_out {c['d_out']}"]
    if result.variant == "multihead":
        parts.append(f"{c['heads']} heads")
    if c.get("dropout"):
        parts.append(f"dropout {c['dropout']}")
    parts.append(f"seed {c['seed']}")
    title = VARIANT_TITLES.get(result.variant, result.variant)
    return Text.assemble((title, "bold"), " · " + " · ".join(parts))


def token_axis(result: Result) -> Axis:
    """The token labels and their indices."""
    return Axis(result.labels, list(range(len(result.tokens))))


def render_weights(console: Console, result: Result, precision: int,
                   head: int | None = None) -> list[RenderableType]:
    """One weights table per head shown (rows: queries, columns: keys)."""
    axis = token_axis(result)
    heads = range(result.num_heads) if head is None else [head]
    out: list[RenderableType] = []
    for h in heads:
        which = f" — head {h} of {result.num_heads}" if result.num_heads > 1 else ""
        title = f"Attention weights{which} (row = query, column = key; rows sum to 1)"
        masked = result.stages.get("masked")
        matrix = result.weights[h]
        if masked is not None:
            # Show masked positions as masked, not as the 0.0 weight they became.
            matrix = [[None if m is None else w for w, m in zip(wr, mr, strict=True)]
                      for wr, mr in zip(matrix, masked[h], strict=True)]
        out.append(render_matrix(console, title, axis, axis, matrix, precision, vmin=0.0))
    return out


def render_context(console: Console, result: Result, precision: int) -> RenderableType:
    """The context vectors: one row per token, one column per output dimension."""
    d_out = len(result.context[0])
    dims = Axis([f"d{j}" for j in range(d_out)], list(range(d_out)), show_index=False)
    return render_matrix(console, "Context vectors (row = token, column = dimension)",
                         token_axis(result), dims, result.context, precision)


def render_run(console: Console, result: Result, precision: int = 4,
               head: int | None = None) -> RenderableType:
    """The whole `run` view: a description line, the weights tables and the context table."""
    parts: list[RenderableType] = [describe(result), Text()]
    for table in render_weights(console, result, precision, head):
        parts += [table, Text()]
    parts.append(render_context(console, result, precision))
    return Group(*parts)


def render_tokens(pieces: list[TokenPiece], encoding: str) -> RenderableType:
    """The tokenisation as a table: index, id, label and bytes."""
    table = Table(title=escape(f"{len(pieces)} tokens ({encoding})"), title_justify="left",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("index", justify="right")
    table.add_column("id", justify="right")
    table.add_column("token", overflow="fold")
    table.add_column("bytes", overflow="fold", style="dim")
    for p in pieces:
        table.add_row(str(p.index), str(p.id), Text(p.label),
                      p.data.hex(" ") if p.data is not None else "")
    return table
