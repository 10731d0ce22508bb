"""The table of `attncli models`."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text


def size_text(size: int) -> str:
    """Bytes as MB or GB, one decimal."""
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"


def render_models(doc: dict[str, Any]) -> RenderableType:
    """One row per cached checkpoint: name, architecture, layers × heads (kv heads), size."""
    if not doc["models"]:
        return Text(f"No checkpoint attncli can read in {doc['cache']}. Fetch one once with, "
                    "for example, `hf download HuggingFaceTB/SmolLM2-135M`.")
    table = Table(title=escape(f"{len(doc['models'])} models in {doc['cache']}"),
                  title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column, justify in (("name", "left"), ("architecture", "left"),
                            ("layers × heads (kv)", "right"), ("size", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for m in doc["models"]:
        shape = f"{m['layers']} × {m['heads']}"
        if m["kv_heads"] != m["heads"]:
            shape += f" ({m['kv_heads']})"
        table.add_row(Text(m["name"]), m["architecture"], shape, size_text(m["size_bytes"]))
    return Group(table)
