"""browse's building blocks: a widget drawn by a function of its size, the status line's spinner,
the overview's grid, the keys, the save and find prompts, and a screen as plain text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.cells import cell_len
from rich.console import RenderableType
from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.geometry import Region
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Static

from attncli.browse.messages import Wanted
from attncli.browse.source import Source
from attncli.browse.state import Selection, State
from attncli.browse.views import grid_frame, grid_rows

HELP = """[b]attncli browse[/b]: the keys

[b]Overview[/b]   ←/→ ↑/↓ move · Enter opens the head · c marks it, c again compares
           o the score written under each head · v weights / norm / rollout
[b]Head view[/b]  ←/→ (↑/↓) the query token · PgUp/PgDn by ten · Home/End · click a token
           z exact window / pooled blocks · s the stage (scores, masked, softmax…)
           v the view · [ ] the previous / next head · / finds a token · Esc back
[b]Patch cells[/b] (a --per-position file: Enter on a head) ←/→ the position · ↑/↓ the head
           [ ] the previous / next layer · Home/End · Esc back
[b]Anywhere[/b]   e saves what is on screen (SVG, text or the HTML page) · ? these keys
           q quits · Ctrl-C stops (exit 130)

Press any key to close."""


def close(screen: Screen[Any], result: Any = None) -> bool:
    """Dismiss screen with result if it is the one on top, and say whether it was. Keys typed
    fast reach a screen after an earlier key has closed it; a closed screen must not close the
    one below: such a key goes on to the app, whose bindings are those of the screen on top."""
    on_top = screen.is_active
    if on_top:
        screen.dismiss(result)
    return on_top


class Picture(Static):
    """A widget drawn by a function of its size."""

    def __init__(self, draw: Callable[[int, int], RenderableType], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.draw = draw

    def render(self) -> RenderableType:
        return self.draw(self.size.width, self.size.height)


class StatusLine(Picture):
    """The status line: redrawn ten times a second while something is computed (its spinner)."""

    busy = reactive(False, repaint=False)

    def watch_busy(self, busy: bool) -> None:
        self.auto_refresh = 0.1 if busy else None


class GridLines(Widget):
    """The overview's grid, drawn a line at a time: each line's strip is kept under its key, so
    a move re-renders the two rows it changes and the terminal gets only those."""

    state: reactive[State] = reactive(State(Selection()), init=False)

    def __init__(self, source: Source, state: State, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.set_reactive(GridLines.state, state)
        self.strips: dict[Any, Strip] = {}
        self.frame: tuple[State | None, tuple[int, int], list[Any]] = (None, (0, 0), [])
        self.drawn: dict[Any, list[Text]] = {}  # each thumbnail's lines, drawn once

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        state = self.state
        if self.frame[0] is not state or self.frame[1] != (width, height):  # drawn for another
            self.frame = (state, (width, height),
                          grid_frame(self.source, state, width, height, self.drawn))
        lines = self.frame[2]
        if y >= len(lines):
            return Strip.blank(width, self.rich_style)
        key, text = lines[y]
        key = (key, width)
        if key not in self.strips:
            if len(self.strips) > 4096:
                self.strips.clear()
            segments = Segment.apply_style(text.render(self.app.console), self.rich_style)
            self.strips[key] = Strip(segments).crop_extend(0, width, self.rich_style)
        return self.strips[key]

    def watch_state(self) -> None:
        self.want()

    def on_resize(self) -> None:
        self.want()

    def want(self) -> None:
        """Ask for the rows in view that have nothing to draw yet."""
        state, (width, height) = self.state, self.size
        view = state.sel.view
        for row in grid_rows(self.source, state.sel, width, height):
            if state.results.wants((row, view), pictures=True):
                self.post_message(Wanted.row(self.source, row, view, pictures=True))


class HelpScreen(ModalScreen[None]):
    """The keys."""

    def compose(self) -> ComposeResult:
        yield Static(Text.from_markup(HELP), id="help")

    def on_key(self, event: events.Key) -> None:
        if close(self, None):
            event.stop()


class SaveScreen(ModalScreen[str | None]):
    """Which file `e` writes: the screen as SVG or text, or the row's HTML page."""

    def __init__(self, page: bool) -> None:
        super().__init__()
        self.page = page

    def compose(self) -> ComposeResult:
        page = "h the HTML page · " if self.page else ""
        yield Static(f"Save what is on screen: s SVG · t text · {page}Esc cancel", id="help")

    def on_key(self, event: events.Key) -> None:
        kinds = {"s": "svg", "t": "txt", **({"h": "html"} if self.page else {})}
        if close(self, kinds.get(event.key)):
            event.stop()


class FindScreen(ModalScreen[str | None]):
    """`/`: a token's text to find."""

    def compose(self) -> ComposeResult:
        yield Input(placeholder="find a token by its text (Enter; Esc cancels)")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        close(self, message.value)

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and close(self, None):
            event.stop()


def screen_text(screen: Screen[Any]) -> str:
    """The screen as plain text: each widget's lines where it sits, parents before children
    (Textual's public region and render_lines; App.export_screenshot gives the SVG)."""
    width, height = screen.size
    cells = [[" "] * width for _ in range(height)]
    for widget in screen.query("*"):
        region = widget.region
        if not region:
            continue
        for y, strip in enumerate(widget.render_lines(Region(0, 0, *region.size))):
            row, x = region.y + y, region.x
            for char in "".join(segment.text for segment in strip) if 0 <= row < height else "":
                if 0 <= x < width:
                    cells[row][x] = char
                    if cell_len(char) == 2 and x + 1 < width:
                        cells[row][x + 1] = ""  # the right half of a wide character
                x += cell_len(char)
    return "\n".join("".join(line).rstrip() for line in cells) + "\n"
