"""The table of `attncli models`, and the folders it cannot read."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text


def size_text(size: int) -> str:
    """Bytes as MB or GB, one decimal."""
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"


def escaped(text: str) -> str:
    """text with every character a terminal would not print (ESC, BEL, C1, newline, a lone
    surrogate) written as its Python escape, \\x1b or \\n."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))


def _shown(text: str) -> Text:
    """A name, path or reason from the disk: control characters escaped, no markup read."""
    return Text(escaped(text))


def render_models(doc: dict[str, Any]) -> RenderableType:
    """One row per cached checkpoint: name, architecture, layers × heads (kv heads), size;
    then each folder attncli cannot read, with the reason."""
    cache = escaped(doc["cache"])
    parts: list[RenderableType] = []
    if not doc["models"]:
        parts.append(Text(f"No checkpoint attncli can read in {cache}. Fetch one once with, "
                          "for example, `hf download HuggingFaceTB/SmolLM2-135M`."))
    else:
        table = Table(title=Text(f"{len(doc['models'])} models in {cache}"),
                      title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False)
        for column, justify in (("name", "left"), ("architecture", "left"),
                                ("layers × heads (kv)", "right"), ("size", "right")):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for m in doc["models"]:
            shape = f"{m['layers']} × {m['heads']}"
            if m["kv_heads"] != m["heads"]:
                shape += f" ({m['kv_heads']})"
            table.add_row(_shown(m["name"]), m["architecture"], shape,
                          size_text(m["size_bytes"]))
        parts.append(table)
    skipped = doc.get("unreadable") or []
    if skipped:
        parts.append(Text(f"\n{len(skipped)} folder(s) attncli cannot read:"))
        for row in skipped:
            parts.append(Text.assemble("  ", _shown(row["name"]), ": ", _shown(row["reason"])))
    return Group(*parts)
