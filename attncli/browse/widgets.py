"""browse's building blocks: a widget drawn by a function of its size, the keys, the save and
find prompts, and Textual's driver drawing on stdout."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol, cast

from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.app import ComposeResult, ScreenStackError
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Static

from attncli.browse.patterns import RowData
from attncli.browse.source import Source
from attncli.browse.state import Selection
from attncli.browse.views import grid_frame, grid_rows

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


def close(screen: Screen[Any], result: Any = None) -> bool:
    """Dismiss screen with result if it is the one on top, and say whether it was. Keys typed
    fast reach a screen after an earlier key has closed it; a closed screen must not close the
    one below: such a key goes on to the app, whose bindings are those of the screen on top."""
    try:
        on_top = screen.app.screen is screen
    except ScreenStackError:  # the app is closing
        on_top = False
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


class HelpScreen(ModalScreen[None]):
    """The keys."""

    DEFAULT_CSS = "HelpScreen { align: center middle; } #help { width: auto; max-width: 90; " \
                  "height: auto; border: round $accent; padding: 0 1; background: $panel; }"

    def compose(self) -> ComposeResult:
        yield Static(Text.from_markup(HELP), id="help")

    def on_key(self, event: events.Key) -> None:
        if close(self, None):
            event.stop()


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
        kinds = {"s": "svg", "t": "txt", **({"h": "html"} if self.page else {})}
        if close(self, kinds.get(event.key)):
            event.stop()


class FindScreen(ModalScreen[str | None]):
    """`/`: a token's text to find."""

    DEFAULT_CSS = "FindScreen { align: center bottom; } Input { width: 60; }"

    def compose(self) -> ComposeResult:
        yield Input(placeholder="find a token by its text (Enter; Esc cancels)")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        close(self, message.value)

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and close(self, None):
            event.stop()


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


class Browser(Protocol):
    """What the screens and widgets read and call on their app (app.BrowseApp is one): they
    know it by this, so the imports run one way, app → screens → widgets."""

    mark: tuple[int, int] | None  # the head `c` marked for comparing

    @property
    def source(self) -> Source: ...
    @property
    def sel(self) -> Selection: ...
    @property
    def busy(self) -> set[Any]: ...
    @property
    def drawn(self) -> dict[Any, list[Text]]: ...
    @property
    def generation(self) -> int: ...
    @property
    def console(self) -> Console: ...
    @property
    def depth(self) -> str | None: ...
    def redraw(self) -> None: ...
    def need(self, row: int, what: str) -> RowData | None: ...
    def later(self, key: Any, work: Callable[[], Any]) -> Any: ...
    def status_line(self) -> Text: ...


def browse_app(node: DOMNode) -> Browser:
    """The node's app, typed."""
    return cast(Browser, node.app)
