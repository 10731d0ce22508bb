"""browse's head view (one head's pattern, a query's ranked keys) and its comparison of two
heads side by side on one scale."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from attncli.browse.draw import strip
from attncli.browse.state import OVERLAYS, Selection, clamp, cycle, heads_shown, move
from attncli.browse.views import (
    grid_layout,
    grid_rows,
    head_view,
    pooled_blocks,
    query_panel,
    row_lines,
    shows_exact,
)
from attncli.browse.widgets import GridLines, Picture, browse_app, close

STRIP_H, PANEL_H = 1, 7

KeyList = list[Binding | tuple[str, str] | tuple[str, str, str]]
QUERY_KEYS: KeyList = [
    Binding("left", "query(-1)", "query", show=False),
    Binding("right", "query(1)", "query", show=False),
    Binding("up", "rows(-1)", show=False), Binding("down", "rows(1)", show=False),
    Binding("pageup", "query(-10)", show=False), Binding("pagedown", "query(10)", show=False),
    Binding("home", "query(-1000000000)", show=False),
    Binding("end", "query(1000000000)", show=False),
    Binding("z", "zoom", "exact/pooled"), Binding("escape", "back", "back")]


class Overview(Screen[None]):
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
        app = browse_app(self)
        yield Static(Text(app.source.title, style="bold"), id="title")
        yield GridLines(id="grid")
        yield Picture(lambda w, h: app.status_line(), id="status")
        yield Footer()

    def on_click(self, event: events.Click) -> None:
        app = browse_app(self)
        widget = self.query_one("#grid")
        x, y = event.screen_x - widget.region.x, event.screen_y - widget.region.y
        side, first, fit = grid_layout(app.source, app.sel, *widget.size)
        label = max(len(r.label) for r in app.source.rows) + 1
        per_row = row_lines(side)
        if y < 1 or x < label:
            return
        top = grid_rows(app.source, app.sel, *widget.size).start
        app.sel.row = min(len(app.source.rows) - 1, top + (y - 1) // per_row)
        app.sel.head = min(heads_shown(app.sel, app.source) - 1,
                           first + min(fit - 1, (x - label) // (side + 2)))
        app.redraw()
        if event.chain >= 2:
            self.action_open()

    def action_move(self, rows: int, heads: int) -> None:
        app = browse_app(self)
        move(app.sel, app.source, rows, heads)
        app.redraw()

    def action_open(self) -> None:
        self.app.push_screen(HeadScreen())

    def action_compare(self) -> None:
        app = browse_app(self)
        chosen = (app.sel.row, app.sel.head)
        if app.mark is None or app.mark == chosen:
            app.mark = chosen
            self.notify(f"{app.source.rows[chosen[0]].name} head {chosen[1]} marked: select "
                        "another head and press c to compare", markup=False)
            return
        self.app.push_screen(CompareScreen(app.mark, chosen))
        app.mark = None

    def action_overlay(self) -> None:
        app = browse_app(self)
        app.sel.overlay = cycle(OVERLAYS, app.sel.overlay)
        app.redraw()

    def action_view(self) -> None:
        app = browse_app(self)
        app.sel.view = cycle(app.source.rows[app.sel.row].views, app.sel.view)
        move(app.sel, app.source)
        app.redraw()


class QueryScreen(Screen[None]):
    """What the head view and the comparison share: the query token and the zoom."""

    def action_query(self, step: int) -> None:
        app = browse_app(self)
        app.sel.query = clamp(app.sel.query + step, 0, len(app.source.tokens) - 1)
        app.redraw()

    def action_rows(self, step: int) -> None:
        """↑/↓: the query one row up or down the heatmap (a token, or a pooled block)."""
        app, starts = browse_app(self), getattr(self, "starts", [])
        if app.sel.exact is False or (not self.exact_now() and starts):
            above = [s for s in starts if s < app.sel.query]
            below = [s for s in starts if s > app.sel.query]
            target = (above[-1] if above else 0) if step < 0 else (
                below[0] if below else app.sel.query)
            self.action_query(target - app.sel.query)
        else:
            self.action_query(step)

    def action_zoom(self) -> None:
        app = browse_app(self)
        app.sel.exact = not self.exact_now()
        app.redraw()

    def exact_now(self) -> bool:
        """Whether the heatmap shows an exact window now."""
        return bool(getattr(self, "shown_exact", True))

    def action_back(self) -> None:
        close(self)

    def draw_strip(self, width: int, height: int) -> RenderableType:
        app = browse_app(self)
        line, self.spans = strip(app.source.tokens, app.sel.query, width)
        return line

    def on_click(self, event: events.Click) -> None:
        picture = self.query("#map")
        if picture and picture.first().region.contains(event.screen_x, event.screen_y):
            line = event.screen_y - picture.first().region.y - 2  # below the heading and ruler
            starts = getattr(self, "starts", [])
            if 0 <= line < len(starts):
                browse_app(self).sel.query = starts[line]
                browse_app(self).redraw()
            return
        widget = self.query_one("#strip")
        if widget.region.contains(event.screen_x, event.screen_y):
            x = event.screen_x - widget.region.x
            chosen = [k for k, start in getattr(self, "spans", []) if start <= x]
            if chosen:
                browse_app(self).sel.query = chosen[-1]
                browse_app(self).redraw()


class HeadScreen(QueryScreen):
    """One head: its pattern, the token strip and the query's ranked keys."""

    BINDINGS = [*QUERY_KEYS, Binding("s", "stage", "stage"), Binding("v", "view", "view"),
                Binding("left_square_bracket", "head(-1)", "head", show=False),
                Binding("right_square_bracket", "head(1)", "head", show=False)]

    def compose(self) -> ComposeResult:
        yield Picture(lambda w, h: self.title_line(), id="title")
        yield Picture(self.draw_map, id="map")
        yield Picture(self.draw_strip, id="strip")
        yield Picture(self.draw_panel, id="panel")
        yield Picture(lambda w, h: browse_app(self).status_line(), id="status")
        yield Footer()

    DEFAULT_CSS = f"#title {{ height: 1; }} #map {{ height: 1fr; }} #strip {{ height: " \
                  f"{STRIP_H}; background: $boost; }} #panel {{ height: {PANEL_H}; }} " \
                  "#status { height: 2; }"

    def title_line(self) -> Text:
        app = browse_app(self)
        info = app.source.rows[app.sel.row]
        head = "heads' mean" if app.sel.view == "rollout" else f"head {app.sel.head}"
        kv = f" (kv head {info.kv[app.sel.head]})" if info.kv and app.sel.view != "rollout" \
            else ""
        return Text(f"{info.name} · {head}{kv} · {app.sel.what} · {app.source.title}",
                    style="bold")

    def data(self) -> Any:
        app = browse_app(self)
        return app.need(app.sel.row, app.sel.what)

    def draw_map(self, width: int, height: int) -> RenderableType:
        app, data = browse_app(self), self.data()
        if data is None or not getattr(data, "alive", True):
            return Text("computing…" if app.busy else "not available (see below)", "dim")
        self.shown_exact = shows_exact(app.sel, data, width, height)
        if not self.shown_exact and not data.exact:  # a long head's blocks: in a worker
            head, blocks = min(app.sel.head, data.heads - 1), pooled_blocks(width, height)
            if app.later((id(data), head, blocks), lambda: data.pooled(head, blocks)) is None:
                return Text(f"pooling {data.size:,} × {data.size:,} weights…", "dim")
        picture, _, self.starts = head_view(app.source, app.sel, data, width, height, app.depth)
        return picture

    def draw_panel(self, width: int, height: int) -> RenderableType:
        app, data = browse_app(self), self.data()
        if data is None or not getattr(data, "alive", True):
            return Text("")
        return query_panel(app.source, app.sel, data, width, height, app.depth)

    def action_stage(self) -> None:
        app = browse_app(self)
        app.sel.stage = cycle(app.source.rows[app.sel.row].stages, app.sel.stage)
        app.redraw()

    def action_view(self) -> None:
        app = browse_app(self)
        app.sel.view = cycle(app.source.rows[app.sel.row].views, app.sel.view)
        app.sel.stage = "weights"
        app.sel.head = min(app.sel.head, heads_shown(app.sel, app.source) - 1)
        app.redraw()

    def action_head(self, step: int) -> None:
        app = browse_app(self)
        app.sel.head = clamp(app.sel.head + step, 0, heads_shown(app.sel, app.source) - 1)
        app.redraw()


class CompareScreen(QueryScreen):
    """Two heads side by side on one scale, and where they differ most."""

    BINDINGS = QUERY_KEYS
    DEFAULT_CSS = "#title { height: 1; } #pair { height: 1fr; } #a, #b { width: 1fr; " \
                  "height: 1fr; } " \
                  f"#strip {{ height: {STRIP_H}; background: $boost; }} #status {{ height: 2; }}"

    def __init__(self, a: tuple[int, int], b: tuple[int, int]) -> None:
        super().__init__()
        self.pair = (a, b)

    def compose(self) -> ComposeResult:
        yield Static(Text(f"compare {self.name_of(0)} and {self.name_of(1)} · one colour scale "
                          f"· {browse_app(self).source.title}", "bold"), id="title")
        with Horizontal(id="pair"):
            yield Picture(lambda w, h: self.draw_one(0, w, h), id="a")
            yield Picture(lambda w, h: self.draw_one(1, w, h), id="b")
        yield Picture(self.draw_strip, id="strip")
        yield Picture(lambda w, h: self.difference(), id="status")
        yield Footer()

    def name_of(self, side: int) -> str:
        row, head = self.pair[side]
        return f"{browse_app(self).source.rows[row].name} head {head}"

    def datas(self) -> list[Any]:
        app = browse_app(self)
        return [app.need(row, "weights") for row, _ in self.pair]

    def selection(self, side: int, datas: list[Any]) -> Selection:
        """One side's head, at the shared query; a long head is compared on exact windows."""
        app = browse_app(self)
        row, head = self.pair[side]
        exact = app.sel.exact if all(d.exact for d in datas) else True
        return Selection(row=row, head=head, query=app.sel.query, exact=exact)

    def draw_one(self, side: int, width: int, height: int) -> RenderableType:
        app = browse_app(self)
        datas = self.datas()
        if any(d is None or not getattr(d, "alive", True) for d in datas):
            return Text("computing…", "dim")
        sels = [self.selection(k, datas) for k in (0, 1)]
        mats = [head_view(app.source, sels[k], datas[k], width, height - 1, None)[1]
                for k in (0, 1)]
        seen = np.concatenate([m[np.isfinite(m)].ravel() for m in mats])
        low = float(seen.min()) if seen.size else 0.0
        high = float(seen.max()) if seen.size else 1.0
        scale = (low, high, True) if low < 0 else (0.0, high if high > 0 else 1.0, False)
        self.shown_exact = shows_exact(sels[side], datas[side], width, height - 1)
        picture, _, self.starts = head_view(app.source, sels[side], datas[side], width,
                                            height - 1, app.depth, scale)
        return Group(Text(self.name_of(side), "bold"), picture)

    def difference(self) -> Text:
        app, datas = browse_app(self), self.datas()
        if any(d is None or not getattr(d, "alive", True) for d in datas):
            return app.status_line()
        rows = [d.row(min(h, d.heads - 1), app.sel.query) for d, (_, h) in
                zip(datas, self.pair, strict=True)]
        gap = np.abs(np.nan_to_num(rows[0]) - np.nan_to_num(rows[1]))
        key = int(np.argmax(gap))
        out = Text(f"query {app.sel.query} {app.source.tokens[app.sel.query]!r}: largest "
                   f"difference {gap[key]:.4f}, on key {key} {app.source.tokens[key]!r}\n",
                   "bold")
        out.append(f"one scale for both: {self.name_of(0)} vs {self.name_of(1)}", "dim")
        return out
