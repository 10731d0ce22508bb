"""The Textual app of `attncli browse`: the selection and the workers' results as reactive state,
handed to the screens on each change; the screens' messages (a new selection, a head to open or
compare, something to compute) handled here; slow work (a layer's pass, a long head's pooled
blocks) in workers whose results come back as messages. The screen never waits for them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from textual import work
from textual.app import App, ScreenStackError
from textual.binding import Binding
from textual.driver import Driver
from textual.reactive import reactive

from attncli.browse.causal import PositionsScreen
from attncli.browse.head import CompareScreen, HeadScreen
from attncli.browse.messages import Computed, Failed, MarkHead, OpenHead, Selected, Wanted
from attncli.browse.screens import Overview, Shows
from attncli.browse.source import Source
from attncli.browse.state import Results, Selection, State, find, first_selection
from attncli.browse.widgets import FindScreen, HelpScreen, SaveScreen, screen_text
from attncli.errors import AttnCliError
from attncli.render.draw.palette import depth_of

# (kind: svg, txt or html; the screen as SVG or text; the row's result for the page)
Saver = Callable[[str, str, Any], str]
WORKER = "attncli-browse-worker"  # the threads that compute rows and pooled blocks
T = TypeVar("T")


async def in_daemon_thread(job: Callable[[], T]) -> T:
    """job's value, computed on a daemon thread of its own. Textual's thread workers run on the
    event loop's executor, which leaving the app waits for (a layer's pass can take a minute);
    a daemon thread is left behind instead, and terminal.py then exits at once."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[tuple[Any, Exception | None]] = loop.create_future()

    def settle(outcome: tuple[Any, Exception | None]) -> None:
        if not done.done():
            done.set_result(outcome)

    def run() -> None:
        try:
            outcome: tuple[Any, Exception | None] = (job(), None)
        except Exception as err:  # noqa: BLE001  raised again in the worker, on the loop
            outcome = (None, err)
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the loop has closed: the app is gone, nobody to tell
            pass

    threading.Thread(target=run, name=WORKER, daemon=True).start()
    value, error = await done
    if error is not None:
        raise error
    return value


class BrowseApp(App[int]):
    """attncli browse."""

    CSS_PATH = "browse.tcss"
    BINDINGS = [Binding("q", "quit_browse", "quit"), Binding("question_mark", "keys", "keys"),
                Binding("e", "save", "save"), Binding("slash", "find", "find", show=False),
                Binding("ctrl+c", "interrupt", show=False, priority=True)]
    ENABLE_COMMAND_PALETTE = False

    sel: reactive[Selection] = reactive(Selection(), init=False)
    results: reactive[Results] = reactive(Results(), init=False)

    def __init__(self, source: Source, save: Saver | None = None,
                 driver_class: type[Driver] | None = None) -> None:
        super().__init__(driver_class=driver_class)
        self.source, self.saver = source, save
        self.mark: tuple[int, int] | None = None  # the head `c` marked for comparing
        self.set_reactive(BrowseApp.sel, first_selection(source))
        self.set_reactive(BrowseApp.results, Results(done=source.held()))  # drawn at once
        self.title = "attncli browse"

    @property
    def state(self) -> State:
        """What the screens draw (the colour depth: the terminal's, or None under NO_COLOR)."""
        return State(self.sel, self.results, None if self.no_color else depth_of(self.console))

    def on_mount(self) -> None:
        self.push_screen(Overview(self.source, self.state))

    def watch_sel(self) -> None:
        self.hand_down()

    def watch_results(self) -> None:
        self.hand_down()

    def hand_down(self) -> None:
        """Give every screen on the stack the state it draws."""
        state = self.state
        for screen in self.screen_stack:
            if isinstance(screen, Shows):
                screen.state = state

    def on_selected(self, message: Selected) -> None:
        self.sel = message.change(self.sel)

    def on_open_head(self, _: OpenHead) -> None:
        self.open_head()

    def open_head(self) -> None:
        """The head view of the selected head (a patch's: its layer's cells per position)."""
        opened = HeadScreen if self.source.cells is None else PositionsScreen
        self.push_screen(opened(self.source, self.state))

    def on_mark_head(self, _: MarkHead) -> None:
        chosen = (self.sel.row, self.sel.head)
        if self.mark is None or self.mark == chosen:
            self.mark = chosen
            self.notify(f"{self.source.rows[chosen[0]].name} head {chosen[1]} marked: select "
                        "another head and press c to compare", markup=False)
            return
        self.push_screen(CompareScreen(self.source, self.state, (self.mark, chosen)))
        self.mark = None

    def on_wanted(self, message: Wanted) -> None:
        if self.results.wants(message.key, message.pictures):
            self.results = self.results.started(message.key)
            self.compute(message.key, message.work)

    # Described here: Textual's own description, the job's repr, would print every array held.
    @work(group="compute", description="a row's pass or a head's pooled blocks")
    async def compute(self, key: Hashable, job: Callable[[], Mapping[Any, Any]]) -> None:
        """job on a daemon thread; what it found, or why it failed, posted back as a message."""
        try:
            found = await in_daemon_thread(job)
        except AttnCliError as err:
            self.post_message(Failed(key, str(err)))
        except MemoryError:
            self.post_message(Failed(key, "out of memory: try a shorter text"))
        except LookupError:  # a released pass's pooled blocks: its row is computed again
            self.post_message(Failed(key, None))
        else:
            self.post_message(Computed(key, found))

    def on_computed(self, message: Computed) -> None:
        self.results = self.results.finished(message.key, message.found)

    def on_failed(self, message: Failed) -> None:
        self.results = self.results.failed(message.key, message.why)
        if message.why is not None:
            self.notify(message.why, severity="error", timeout=8, markup=False)

    def action_quit_browse(self) -> None:
        self.exit(return_code=0)

    def action_interrupt(self) -> None:
        self.exit(return_code=130)

    def action_keys(self) -> None:
        self.push_screen(HelpScreen())

    def action_find(self) -> None:
        def found(text: str | None) -> None:
            if not text:
                return
            where = find(self.source.tokens, text, self.sel.query)
            if where is None:
                self.notify(f"no token holds {text!r}", severity="warning", markup=False)
                return
            self.sel = replace(self.sel, query=where)
            if isinstance(self.screen, Overview):
                self.open_head()

        self.push_screen(FindScreen(), found)

    def action_save(self) -> None:
        page = self.source.pages is not None and self.source.pages(self.sel.row) is not None
        self.push_screen(SaveScreen(page), self._save)

    def _save(self, kind: str | None) -> None:
        if kind is None or self.saver is None or not self.is_running:
            return
        try:
            shown = (self.export_screenshot(title="attncli browse") if kind == "svg" else
                     screen_text(self.screen) if kind == "txt" else "")
        except ScreenStackError:  # a save chosen after Ctrl-C or q ended the app: nothing shown
            return
        page = self.source.pages(self.sel.row) if self.source.pages else None
        try:
            where = self.saver(kind, shown, page)
        except AttnCliError as err:
            self.notify(str(err), severity="error", timeout=8, markup=False)
            return
        self.notify(f"saved {where}", timeout=8, markup=False)
