"""`run --predict K`'s next-token predictions, and `explain --predict K`'s logit lens beside them:
one table, a row per position, whose candidate cells fold on a narrow terminal."""

from __future__ import annotations

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.core.display import Display
from attncli.core.pieces import Guess, Prediction
from attncli.core.result import Result
from attncli.render.draw.tables import shorten

LABEL_MAX = 16  # a token's label is cut to this many cells
NEXT = "next (rank)"  # the column of the token that does follow


def _label(text: str) -> str:
    """A token's label quoted, so that a leading space shows: ' the'."""
    return f"'{shorten(text, LABEL_MAX)}'"  # text is already visible: control bytes escaped once


def candidates(top: list[Guess], precision: int, stacked: bool = False) -> Text:
    """The candidates of one position, likeliest first: ' the' 0.3124  ' a' 0.1200 …, or one
    a line when stacked."""
    out = Text()
    for rank, candidate in enumerate(top):
        if rank:
            out.append("\n" if stacked else "  ")
        out.append(_label(candidate["text"]), style="bold" if rank == 0 else "")
        out.append(f" {candidate['prob']:.{precision}f}", style="dim" if rank else "")
    return out


def _guesses(entry: Prediction, name: str) -> list[Guess]:
    """An entry's candidates by the column's name: the final layer's (top), or the lens's."""
    return entry["lens"] if name == "lens" else entry["top"]


def _actual(result: Result, entry: Prediction) -> Text:
    """The token that does come next, and its rank among the candidates (— at the last)."""
    index = entry["index"] + 1
    if index >= len(result.tokens):
        return Text("—", style="dim")
    following = result.tokens[index]
    ranks = [r for r, c in enumerate(entry["top"], start=1) if c["id"] == following.id]
    out = Text(_label(following.text))
    if ranks:
        out.append(f" #{ranks[0]}", style="green" if ranks[0] == 1 else "")
    return out


def render_predictions(console: Console, result: Result, options: Display) -> RenderableType:
    """A row per position: its token, the token that follows it, and the top-K next tokens
    (with --rows on the naive path, the window's rows only). Candidates sit side by side where
    they fit, one a line where they do not, and on a terminal too narrow for the table each
    position is a short paragraph."""
    entries = result.predictions or []
    if options.rows is not None:
        a, b = options.rows
        entries = [e for e in entries if a <= e["index"] < b]
    k = len(entries[0]["top"]) if entries else 0
    lens = bool(entries) and "lens" in entries[0]
    layer = result.config.layer
    title = (f"Next-token predictions, top {k} per position: the last layer's output through "
             "the final norm and the unembedding, softmax over the whole vocabulary")
    if lens:
        title += (f"; the logit lens reads layer {layer}'s output the same way (what the model "
                  "would predict if it stopped there)")
    names = [("lens", f"layer {layer} lens"), ("top", "final layer")] if lens else \
        [("top", f"top {k}")]
    side_by_side = _width(result, entries, options.precision, names, False) <= console.width
    if not side_by_side and _width(result, entries, options.precision, names,
                                   True) > console.width:
        return _paragraphs(result, entries, options.precision, names, title)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("token", no_wrap=True)
    table.add_column(NEXT, overflow="fold")
    for _, heading in names:
        table.add_column(heading, overflow="fold")
    for entry in entries:
        table.add_row(Text(str(entry["index"])), Text(_label(entry["token"])),
                      _actual(result, entry),
                      *(candidates(_guesses(entry, name), options.precision, not side_by_side)
                        for name, _ in names))
    return table


def _paragraphs(result: Result, entries: list[Prediction], precision: int,
                names: list[tuple[str, str]], title: str) -> RenderableType:
    """Each position as a few folded lines: its token and the next, then each candidate list."""
    out = Text(title + "\n", overflow="fold")
    for entry in entries:
        out.append(f"\n{entry['index']} {_label(entry['token'])}", style="bold")
        out.append_text(Text(" → next ").append_text(_actual(result, entry)))
        for name, heading in names:
            out.append(f"\n  {heading}: ")
            out.append_text(candidates(_guesses(entry, name), precision))
    return out


def _width(result: Result, entries: list[Prediction], precision: int,
           names: list[tuple[str, str]], stacked: bool) -> int:
    """The cells the table needs, candidates side by side or one a line (stacked)."""
    def widest(cells: list[Text], heading: str = "") -> int:
        lines = [line for c in cells for line in c.plain.splitlines()]
        return max([cell_len(line) for line in lines] + [cell_len(heading)])

    columns = [widest([Text(str(e["index"])) for e in entries], "#"),
               widest([Text(_label(e["token"])) for e in entries], "token"),
               widest([_actual(result, e) for e in entries], NEXT)]
    columns += [widest([candidates(_guesses(e, name), precision, stacked) for e in entries],
                       heading) for name, heading in names]
    return sum(columns) + 3 * len(columns)  # each cell padded by one a side, and a gap


def and_predictions(console: Console, result: Result, options: Display,
                    shown: RenderableType) -> RenderableType:
    """shown, then the predictions table when the run has --predict's."""
    if result.predictions is None:
        return shown
    return Group(shown, Text(), render_predictions(console, result, options))
