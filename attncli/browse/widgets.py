"""browse's building blocks: a widget drawn by a function of its size, the keys, the save and
find prompts, and Textual's driver drawing on stdout."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from rich.console import RenderableType
from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.app import ComposeResult, ScreenStackError
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Static

from attncli.browse.views import grid_frame, grid_rows

if TYPE_CHECKING:
    from attncli.browse.app import BrowseApp

HELP = """[b]attncli browse[/b]: the keys

[b]Overview[/b]   ←/→ ↑/↓ move · Enter opens the head · c marks it, c again compares
           o the score written under each head · v weights / norm / rollout
[b]Head view[/b]  ←/→ (↑/↓) the query token · PgUp/PgDn by ten · Home/End · click a token
           z exact window / pooled blocks · s the stage (scores, masked, softmax…)
           v the view · [ ] the previous / next head · / finds a token · Esc back
[b]Anywhere[/b]   e saves what is on screen (SVG, text or the HTML page) · ? these keys
           q quits · Ctrl-C stops (exit 130)

Press any key to close."""


def stdout_driver() -> type[Any] | None:
    """Textual's POSIX driver drawing on stdout (its own draws on stderr, the messages' stream)."""
    if sys.platform == "win32":
        return None
    from textual.drivers.linux_driver import LinuxDriver

    class StdoutDriver(LinuxDriver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._file = sys.__stdout__

    return StdoutDriver


def on_top(screen: Screen[Any]) -> bool:
    """Whether screen is the one shown on top. Keys typed fast reach a screen after an earlier
    key has closed it; a closed screen must not close another: the key goes to the app, whose
    bindings are those of the screen now on top."""
    try:
        return screen.app.screen is screen
    except ScreenStackError:  # the app is closing
        return False


class Picture(Static):
    """A widget drawn by a function of its size."""

    def __init__(self, draw: Callable[[int, int], RenderableType], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.draw = draw

    def render(self) -> RenderableType:
        return self.draw(self.size.width, self.size.height)


class HelpScreen(ModalScreen[None]):
    """The keys."""

    DEFAULT_CSS = "HelpScreen { align: center middle; } #help { width: auto; max-width: 90; " \
                  "height: auto; border: round $accent; padding: 0 1; background: $panel; }"

    def compose(self) -> ComposeResult:
        yield Static(Text.from_markup(HELP), id="help")

    def on_key(self, event: events.Key) -> None:
        if on_top(self):
            event.stop()
            self.dismiss(None)


class SaveScreen(ModalScreen[str | None]):
    """Which file `e` writes: the screen as SVG or text, or the row's HTML page."""

    DEFAULT_CSS = HelpScreen.DEFAULT_CSS.replace("HelpScreen", "SaveScreen")

    def __init__(self, page: bool) -> None:
        super().__init__()
        self.page = page

    def compose(self) -> ComposeResult:
        page = "h the HTML page · " if self.page else ""
        yield Static(f"Save what is on screen: s SVG · t text · {page}Esc cancel", id="help")

    def on_key(self, event: events.Key) -> None:
        if on_top(self):
            event.stop()
            kinds = {"s": "svg", "t": "txt", **({"h": "html"} if self.page else {})}
            self.dismiss(kinds.get(event.key))


class FindScreen(ModalScreen[str | None]):
    """`/`: a token's text to find."""

    DEFAULT_CSS = "FindScreen { align: center bottom; } Input { width: 60; }"

    def compose(self) -> ComposeResult:
        yield Input(placeholder="find a token by its text (Enter; Esc cancels)")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        if on_top(self):
            self.dismiss(message.value)

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and on_top(self):
            event.stop()
            self.dismiss(None)


class GridLines(Widget):
    """The overview's grid, drawn a line at a time: each line's strip is kept under its key, so
    a move re-renders the two rows it changes and the terminal gets only those."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.strips: dict[Any, Strip] = {}
        self.frame: tuple[Any, list[Any]] = (None, [])

    def render_line(self, y: int) -> Strip:
        app = browse_app(self)
        width, height = self.size
        token = (app.generation, width, height)
        if self.frame[0] != token:
            for row in grid_rows(app.source, app.sel, width, height):
                app.need(row, app.sel.view)
            self.frame = (token, grid_frame(app.source, app.sel, width, height, app.depth,
                                            app.busy, app.drawn))
        lines = self.frame[1]
        if y >= len(lines):
            return Strip.blank(width, self.rich_style)
        key, text = lines[y]
        key = (key, width)
        if key not in self.strips:
            if len(self.strips) > 4096:
                self.strips.clear()
            segments = Segment.apply_style(text.render(app.console), self.rich_style)
            self.strips[key] = Strip(segments).crop_extend(0, width, self.rich_style)
        return self.strips[key]


def browse_app(node: DOMNode) -> BrowseApp:
    """The node's app, typed."""
    return cast("BrowseApp", node.app)
