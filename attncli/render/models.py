"""The table of `attncli models`, and the models it cannot read."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

# The stores' names where the list says where it looked, and in the table's source column.
SOURCES = {"huggingface": "Hugging Face cache", "ollama": "Ollama's store",
           "lmstudio": "LM Studio's folder", "attncli": "attncli's cache"}
NAME_WIDTH = 20  # the name column's least width; narrower, the list is one model per 2 lines
SHORT = {"huggingface": "HF cache", "ollama": "Ollama", "lmstudio": "LM Studio",
         "attncli": "attncli"}
COLUMNS = (("name", "left"), ("source", "left"), ("stored as", "left"), ("arch", "left"),
           ("layers × heads", "right"), ("size", "right"))


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


def _shape(row: dict[str, Any]) -> str:
    """layers × heads (kv heads), or what is known of it."""
    if row.get("layers") is None or row.get("heads") is None:
        return "?"
    shape = f"{row['layers']} × {row['heads']}"
    if row.get("kv_heads") not in (None, row["heads"]):
        shape += f" ({row['kv_heads']} kv)"
    return shape


def _cells(row: dict[str, Any]) -> list[Text | str]:
    size = row.get("size_bytes")
    pulled = row["source"] == "attncli" and row.get("model") not in (None, row["name"]) and \
        "/" not in row["model"]  # a pulled model goes by its short name (smollm2)
    return [_shown(row["model"] if pulled else row["name"]),
            SHORT.get(row["source"], row["source"]),
            _shown(f"{row.get('format') or '?'} {row.get('quantization') or '?'}"),
            _shown(row.get("architecture") or "?"), _shape(row),
            size_text(size) if isinstance(size, int) else "?"]


def _looked_in(stores: dict[str, Any]) -> Text:
    """Where the list comes from: each store's folder."""
    parts = [f"{SOURCES['huggingface']} {escaped(stores['huggingface'])}"]
    if stores.get("ollama"):
        parts.append(f"{SOURCES['ollama']} {escaped(stores['ollama'])}")
    parts.extend(f"{SOURCES['lmstudio']} {escaped(root)}" for root in stores.get("lmstudio", []))
    if stores.get("attncli"):
        parts.append(f"{SOURCES['attncli']} {escaped(stores['attncli'])}")
    return Text("Looked in: " + " · ".join(parts), style="dim")


class _Listing:
    """The readable models as a table where the terminal is wide enough for every column and a
    name of NAME_WIDTH, else one model per two lines: its name, then the other columns."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = [_cells(row) for row in rows]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        count = len(self.rows)
        yield Text(f"{count} model{'s' * (count != 1)} attncli can read (--model takes the "
                   "name; an Ollama one as ollama:NAME)")
        headers: list[Text | str] = [header for header, _ in COLUMNS]
        widths = [max(cell_len(str(cells[k])) for cells in [headers, *self.rows])
                  for k in range(1, len(COLUMNS))]
        # each column after the name: its cells, a space either side, one divider
        if options.max_width >= NAME_WIDTH + sum(widths) + 3 * len(widths):
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
            for column, justify in COLUMNS:  # only a long name folds: it is what --model takes
                table.add_column(column, justify=justify,  # type: ignore[arg-type]
                                 overflow="fold", no_wrap=column != "name",
                                 min_width=NAME_WIDTH if column == "name" else None)
            for cells in self.rows:
                table.add_row(*cells)
            yield table
            return
        for name, *rest in self.rows:
            yield Text.assemble(name, overflow="fold")
            yield Text("  " + " · ".join(str(cell) for cell in rest), overflow="fold")


def render_models(doc: dict[str, Any]) -> RenderableType:
    """One row per model attncli can read: name, source, format and quantization, architecture,
    layers × heads (kv heads), size; then each one it cannot read, with the reason."""
    stores = doc["stores"]
    parts: list[RenderableType] = []
    if not doc["models"]:
        parts.append(Text("No model attncli can read was found. Fetch one once with "
                          "`attncli pull smollm2` (then --model smollm2), or `hf download "
                          "HuggingFaceTB/SmolLM2-135M`, or pass a GGUF file: `--model "
                          "FILE.gguf`."))
    else:
        parts.append(_Listing(doc["models"]))
    skipped = doc.get("unreadable") or []
    if skipped:
        plural = "s" * (len(skipped) != 1)
        parts.append(Text(f"\n{len(skipped)} model{plural} attncli cannot read:"))
        for row in skipped:
            where = SHORT.get(row.get("source", ""), "")
            parts.append(Text.assemble("  ", _shown(row["name"]),
                                       f" ({where})" if where else "", ": ",
                                       _shown(row["reason"])))
    parts.append(_looked_in(stores))
    return Group(*parts)
