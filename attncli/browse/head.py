"""browse's head view (one head's pattern, a query's ranked keys) and its comparison of two
heads side by side on one scale."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Static

from attncli.browse.messages import Wanted
from attncli.browse.patterns import RowData
from attncli.browse.screens import QUERY_KEYS, QueryScreen
from attncli.browse.source import WEIGHTS, Source
from attncli.browse.state import Selection, State, clamp, heads_shown, next_stage, next_view
from attncli.browse.views import head_view, pooled_blocks, query_panel, shows_exact
from attncli.browse.widgets import Picture, StatusLine


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
        yield StatusLine(self.status, id="status")
        yield Footer()

    def title_line(self) -> Text:
        sel, info = self.state.sel, self.source.rows[self.state.sel.row]
        head = "heads' mean" if sel.view == "rollout" else f"head {sel.head}"
        kv = f" (kv head {info.kv[sel.head]})" if info.kv and sel.view != "rollout" else ""
        return Text(f"{info.name} · {head}{kv} · {sel.what} · {self.source.title}", style="bold")

    def data(self) -> RowData | None:
        """The selected row's data, asked for when it is not computed (or was released)."""
        sel, results = self.state.sel, self.state.results
        data = results.row(sel.row, sel.what)
        if data is None and results.wants((sel.row, sel.what)):
            self.post_message(Wanted.row(self.source, sel.row, sel.what))
        return data

    def draw_map(self, width: int, height: int) -> RenderableType:
        state, data = self.state, self.data()
        if data is None:
            failed = (state.sel.row, state.sel.what) in state.results.errors
            return Text("not available (see below)" if failed else "computing…", "dim")
        self.shown_exact = shows_exact(state.sel, data, width, height)
        if not self.shown_exact and not data.exact:  # a long head's blocks: in a worker
            head, blocks = min(state.sel.head, data.heads - 1), pooled_blocks(width, height)
            key = (id(data), head, blocks)
            if key not in state.results.done:
                if state.results.wants(key):
                    self.post_message(Wanted(key, lambda: {key: data.pooled(head, blocks)}))
                return Text(f"pooling {data.size:,} × {data.size:,} weights…", "dim")
        picture, _, self.starts = head_view(self.source, state.sel, data, width, height,
                                            state.depth)
        return picture

    def draw_panel(self, width: int, height: int) -> RenderableType:
        data = self.data()
        if data is None:
            return Text("")
        return query_panel(self.source, self.state.sel, data, width, height, self.state.depth)

    def action_stage(self) -> None:
        self.select(lambda sel: next_stage(sel, self.source))

    def action_view(self) -> None:
        self.select(lambda sel: next_view(sel, self.source, stage=WEIGHTS))

    def action_head(self, step: int) -> None:
        self.select(lambda sel: replace(sel, head=clamp(
            sel.head + step, 0, heads_shown(sel, self.source) - 1)))


class CompareScreen(QueryScreen):
    """Two heads side by side on one scale, and where they differ most."""

    BINDINGS = QUERY_KEYS

    def __init__(self, source: Source, state: State,
                 pair: tuple[tuple[int, int], tuple[int, int]]) -> None:
        super().__init__(source, state)
        self.pair = pair

    def compose(self) -> ComposeResult:
        yield Static(Text(f"compare {self.name_of(0)} and {self.name_of(1)} · one colour scale "
                          f"· {self.source.title}", "bold"), id="title")
        with Horizontal(id="pair"):
            yield Picture(lambda w, h: self.draw_one(0, w, h), id="a")
            yield Picture(lambda w, h: self.draw_one(1, w, h), id="b")
        yield Picture(self.draw_strip, id="strip")
        yield StatusLine(lambda w, h: self.difference(w, h), id="status")
        yield Footer()

    def name_of(self, side: int) -> str:
        row, head = self.pair[side]
        return f"{self.source.rows[row].name} head {head}"

    def datas(self) -> list[RowData] | None:
        """Both rows' weights; None (and asked for) until both are computed."""
        results, found = self.state.results, []
        for row, _ in self.pair:
            data = results.row(row, WEIGHTS)
            if data is None and results.wants((row, WEIGHTS)):
                self.post_message(Wanted.row(self.source, row, WEIGHTS))
            found.append(data)
        return [d for d in found if d is not None] if None not in found else None

    def selection(self, side: int, datas: list[RowData]) -> Selection:
        """One side's head, at the shared query; a long head is compared on exact windows."""
        row, head = self.pair[side]
        sel = self.state.sel
        exact = sel.exact if all(d.exact for d in datas) else True
        return Selection(row=row, head=head, query=sel.query, exact=exact)

    def draw_one(self, side: int, width: int, height: int) -> RenderableType:
        datas = self.datas()
        if datas is None:
            return Text("computing…", "dim")
        sels = [self.selection(k, datas) for k in (0, 1)]
        mats = [head_view(self.source, sels[k], datas[k], width, height - 1, None)[1]
                for k in (0, 1)]
        seen = np.concatenate([m[np.isfinite(m)].ravel() for m in mats])
        low = float(seen.min()) if seen.size else 0.0
        high = float(seen.max()) if seen.size else 1.0
        scale = (low, high, True) if low < 0 else (0.0, high if high > 0 else 1.0, False)
        self.shown_exact = shows_exact(sels[side], datas[side], width, height - 1)
        picture, _, self.starts = head_view(self.source, sels[side], datas[side], width,
                                            height - 1, self.state.depth, scale)
        return Group(Text(self.name_of(side), "bold"), picture)

    def difference(self, width: int, height: int) -> Text:
        datas, query, tokens = self.datas(), self.state.sel.query, self.source.tokens
        if datas is None:
            return self.status(width, height)
        rows = [d.row(min(h, d.heads - 1), query) for d, (_, h) in
                zip(datas, self.pair, strict=True)]
        gap = np.abs(np.nan_to_num(rows[0]) - np.nan_to_num(rows[1]))
        key = int(np.argmax(gap))
        out = Text(f"query {query} {tokens[query]!r}: largest difference {gap[key]:.4f}, on key "
                   f"{key} {tokens[key]!r}\n", "bold")
        out.append(f"one scale for both: {self.name_of(0)} vs {self.name_of(1)}", "dim")
        return out
