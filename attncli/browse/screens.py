"""browse's screens: each takes the source and the state it draws (the app hands it a new state on
every change) and posts what the keys ask for; the overview of every row × head, and what the
head view and the comparison share (the query token, the zoom)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Static

from attncli.browse.draw import strip
from attncli.browse.messages import MarkHead, OpenHead, Selected
from attncli.browse.source import Source
from attncli.browse.state import (
    OVERLAYS,
    Selection,
    State,
    at_query,
    block_step,
    cycle,
    heads_shown,
    moved,
)
from attncli.browse.views import grid_layout, grid_rows, row_lines, status_lines
from attncli.browse.widgets import GridLines, Picture, StatusLine, close


class Shows(Screen[None]):
    """A screen of the source, drawing the state the app hands it."""

    state: reactive[State] = reactive(State(Selection()), init=False)

    def __init__(self, source: Source, state: State) -> None:
        super().__init__()
        self.source = source
        self.set_reactive(Shows.state, state)

    def on_mount(self) -> None:
        self.watch_state(self.state)

    def watch_state(self, state: State) -> None:
        for picture in self.query(Picture):
            picture.refresh()
        for line in self.query(StatusLine):
            line.busy = bool(state.results.busy)

    def select(self, change: Any) -> None:
        """Ask the app to change the selection by change (Selection → Selection)."""
        self.post_message(Selected(change))

    def status(self, width: int, height: int) -> Text:
        return status_lines(self.source, self.state)


class Overview(Shows):
    """Every row × head as thumbnails, the selection bracketed, its scores below."""

    BINDINGS = [Binding("left", "move(0, -1)", "head", show=False),
                Binding("right", "move(0, 1)", "head", show=False),
                Binding("up", "move(-1, 0)", "row", show=False),
                Binding("down", "move(1, 0)", "row", show=False),
                Binding("pageup", "move(-5, 0)", show=False),
                Binding("pagedown", "move(5, 0)", show=False),
                Binding("enter", "open", "open head"), Binding("c", "compare", "compare"),
                Binding("o", "overlay", "score"), Binding("v", "view", "view")]

    def compose(self) -> ComposeResult:
        yield Static(Text(self.source.title, style="bold"), id="title")
        if self.source.notes:
            yield Static(Text("\n".join(self.source.notes)), id="notes")
        yield GridLines(self.source, self.state, id="grid")
        yield StatusLine(self.status, id="status")
        yield Footer()

    def watch_state(self, state: State) -> None:
        super().watch_state(state)
        for grid in self.query(GridLines):
            grid.state = state

    def on_click(self, event: events.Click) -> None:
        widget, source, sel = self.query_one(GridLines), self.source, self.state.sel
        x, y = event.screen_x - widget.region.x, event.screen_y - widget.region.y
        side, first, fit = grid_layout(source, sel, *widget.size)
        label = max(len(r.label) for r in source.rows) + 1
        if y < 1 or x < label:
            return
        top = grid_rows(source, sel, *widget.size).start
        row = min(len(source.rows) - 1, top + (y - 1) // row_lines(side))
        head = min(heads_shown(replace(sel, row=row), source) - 1,
                   first + min(fit - 1, (x - label) // (side + 2)))
        self.select(lambda now: replace(now, row=row, head=head))
        if event.chain >= 2:
            self.action_open()

    def action_move(self, rows: int, heads: int) -> None:
        self.select(lambda sel: moved(sel, self.source, rows, heads))

    def action_open(self) -> None:
        self.post_message(OpenHead())

    def action_compare(self) -> None:
        self.post_message(MarkHead())

    def action_overlay(self) -> None:
        self.select(lambda sel: replace(sel, overlay=cycle(OVERLAYS, sel.overlay)))

    def action_view(self) -> None:
        self.select(lambda sel: moved(replace(sel, view=cycle(self.source.rows[sel.row].views,
                                                              sel.view)), self.source))


KeyList = list[Binding | tuple[str, str] | tuple[str, str, str]]
QUERY_KEYS: KeyList = [
    Binding("left", "query(-1)", "query", show=False),
    Binding("right", "query(1)", "query", show=False),
    Binding("up", "rows(-1)", show=False), Binding("down", "rows(1)", show=False),
    Binding("pageup", "query(-10)", show=False), Binding("pagedown", "query(10)", show=False),
    Binding("home", "query(-1000000000)", show=False),
    Binding("end", "query(1000000000)", show=False),
    Binding("z", "zoom", "exact/pooled"), Binding("escape", "back", "back")]


class QueryScreen(Shows):
    """What the head view and the comparison share: the query token and the zoom."""

    def __init__(self, source: Source, state: State) -> None:
        super().__init__(source, state)
        self.shown_exact = True  # whether the heatmap drawn last shows an exact window
        self.starts: list[int] = []  # the first query of each heatmap row drawn last
        self.spans: list[tuple[int, int]] = []  # each strip token's first column

    def action_query(self, step: int) -> None:
        self.select(lambda sel: at_query(sel, self.source, sel.query + step))

    def action_rows(self, step: int) -> None:
        """↑/↓: the query one row up or down the heatmap (a token, or a pooled block)."""
        starts = self.starts
        if self.state.sel.exact is False or (not self.shown_exact and starts):
            self.select(lambda sel: replace(sel, query=block_step(sel.query, starts, step)))
        else:
            self.action_query(step)

    def action_zoom(self) -> None:
        exact = not self.shown_exact
        self.select(lambda sel: replace(sel, exact=exact))

    def action_back(self) -> None:
        close(self)

    def draw_strip(self, width: int, height: int) -> RenderableType:
        line, self.spans = strip(self.source.tokens, self.state.sel.query, width)
        return line

    def on_click(self, event: events.Click) -> None:
        picture = self.query("#map")
        if picture and picture.first().region.contains(event.screen_x, event.screen_y):
            line = event.screen_y - picture.first().region.y - 2  # below the heading and ruler
            if 0 <= line < len(self.starts):
                self.select(lambda sel, query=self.starts[line]: replace(sel, query=query))
            return
        widget = self.query_one("#strip")
        if widget.region.contains(event.screen_x, event.screen_y):
            x = event.screen_x - widget.region.x
            chosen = [k for k, start in self.spans if start <= x]
            if chosen:
                self.select(lambda sel: replace(sel, query=chosen[-1]))
