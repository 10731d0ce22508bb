"""`attncli doctor`'s report: the C extensions, torch and the devices, the folders."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from attncli.errors import escaped


def _size(size: int) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"


def _extension(row: dict[str, Any]) -> Text:
    if row["used"]:
        state, style = "built, in use", "green"
    elif row["loads"]:
        state, style = "built, switched off by ATTNCLI_FUSED=0", "yellow"
    elif row["built"]:
        state, style = f"built, but does not load: {escaped(row['error'] or '')}", "red"
    else:
        state, style = "not built (no C compiler when attncli was installed?)", "red"
    return Text.assemble(f"  {row['module']}: ", (state, style))


def _torch(torch: dict[str, Any]) -> list[Text]:
    build = ("CUDA " + torch["cuda"] if torch["cuda"] else
             "ROCm " + torch["hip"] if torch["hip"] else "CPU only")
    devices = ["cpu", *(f"cuda:{i} {escaped(name)}" for i, name in
                        enumerate(torch["cuda_devices"])), *(["mps"] if torch["mps"] else [])]
    return [Text.assemble(("torch ", "bold"), f"{torch['version']} · {build} build · vector "
                          f"code {torch['cpu_capability']} · {torch['threads']} threads"),
            Text(f"  devices: {', '.join(devices)}"
                 + ("" if len(devices) > 1 else " (--device auto picks the CPU)"))]


def _folder(row: dict[str, Any]) -> Text:
    if row["path"] is None:
        where = Text(escaped(row["error"] or "none"), style="dim")
    else:
        where = Text(escaped(row["path"]))
        if row.get("error"):  # a file or a device where a folder belongs, or not to be seen
            where.append(f" ({escaped(row['error'])})")
        elif not row["exists"]:
            where.append(" (not there)", style="dim")
        elif "bytes" in row:
            where.append(f" · {row['files']:,} files, {_size(row['bytes'])}", style="dim")
    return Text.assemble(f"  {row['name']}: ", where)


class _Indented:
    """A line (written with two leading spaces where indented) wrapped under its own indent on a
    narrow terminal, not back at the first column, with no spaces left at a line's end. A heading
    (no indent) that wraps goes on two spaces in: its tail is not read as a heading of its own."""

    def __init__(self, text: Text, indent: int) -> None:
        self.text, self.indent = text, indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        hang = max(self.indent, 2)
        first = self.text.wrap(console, max(options.max_width - self.indent, 1))[0]
        rest = self.text[len(first.plain):]  # the text after the first line, as written
        first.rstrip()
        yield Text.assemble(" " * self.indent, first)
        rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")):]
        if rest.plain:
            for line in rest.wrap(console, max(options.max_width - hang, 1)):
                line.rstrip()
                yield Text.assemble(" " * hang, line)


def _indented(line: RenderableType) -> RenderableType:
    if isinstance(line, Text):
        indent = 2 if line.plain.startswith("  ") else 0
        return _Indented(line[indent:], indent)
    return line


def render_doctor(doc: dict[str, Any]) -> RenderableType:
    """The report of one install, from doctor's JSON document."""
    top, python = doc["attncli"], doc["python"]
    lines: list[RenderableType] = [
        Text.assemble(("attncli ", "bold"), f"{top['version']} at {escaped(top['path'])}"),
        Text(f"  Python {python['version']} ({escaped(python['executable'])}) on "
             f"{python['platform']}"),
        Text(),
        Text(f"C extensions ({len(doc['extensions'])})", style="bold"),
        *(_extension(row) for row in doc["extensions"]),
        Text(f"  {doc['without_extensions']}", style="dim"),
        Text(), *_torch(doc["torch"]), Text(),
        Text("Folders", style="bold"), *(_folder(row) for row in doc["folders"])]
    pulled = doc["pulled"]
    lines.append(Text("  pulled: " + ", ".join(
        f"{name} {'yes' if there else 'no (attncli pull ' + name + ')'}"
        for name, there in pulled.items())))
    settings = doc.get("settings")
    if settings is not None:
        model = settings.get("model")
        default = (f"default model {escaped(model['model'])} (from {escaped(model['from'])})"
                   if model else "no default model")
        state = (escaped(settings["error"]) if settings.get("error") else
                 default if settings["exists"] or model else f"no file yet; {default}")
        lines.append(Text.assemble("  settings: ", escaped(settings["path"] or ""), " · ",
                                   state))
    return Group(*(_indented(line) for line in lines))
