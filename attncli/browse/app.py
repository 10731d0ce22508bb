"""The Textual app of `attncli browse`: the overview, a head's view, a comparison of two heads,
the keys, saving and finding. Slow work (a layer's pass, a long head's pooled blocks) runs in a
worker thread with a spinner; the screen never waits for it."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text
from textual.app import App, ScreenStackError
from textual.binding import Binding

from attncli.browse.patterns import RowData
from attncli.browse.screens import Overview
from attncli.browse.source import Source
from attncli.browse.state import Selection, find
from attncli.browse.views import status
from attncli.browse.widgets import (
    Browser,
    FindScreen,
    HelpScreen,
    Picture,
    SaveScreen,
    stdout_driver,
)
from attncli.errors import AttnCliError
from attncli.render.draw.palette import depth_of

# (kind: svg, txt or html; the screen as a recording console; the row's result for the page)
Saver = Callable[[str, Console, Any], str]
SPIN = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
WORKER = "attncli-browse-worker"  # the threads that compute rows and pooled blocks


class BrowseApp(App[int]):
    """attncli browse."""

    CSS = "#title { height: 1; background: $boost; } #status { height: 2; } " \
          "#grid { height: 1fr; }"
    BINDINGS = [Binding("q", "quit_browse", "quit"), Binding("question_mark", "keys", "keys"),
                Binding("e", "save", "save"), Binding("slash", "find", "find", show=False),
                Binding("ctrl+c", "interrupt", show=False, priority=True)]
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, source: Source, save: Saver | None = None,
                 terminal: bool = False) -> None:
        super().__init__(driver_class=stdout_driver() if terminal else None)
        self.source, self.saver = source, save
        self.sel = Selection(row=source.start)
        self.mark: tuple[int, int] | None = None
        self.busy: set[Any] = set()  # what workers are computing
        self.errors: dict[Any, str] = {}  # what failed, and why
        self.values: dict[Any, Any] = {}  # what workers computed beyond the rows
        self.drawn: dict[Any, list[Text]] = {}  # the overview's thumbnails, drawn once
        self.spin = 0
        self.generation = 0  # counts redraws: what the grid's lines are drawn for
        self.title = "attncli browse"

    @property
    def depth(self) -> str | None:
        """The colour depth drawn at: the terminal's, or None under NO_COLOR."""
        return None if self.no_color else depth_of(self.console)

    def on_mount(self) -> None:
        self.push_screen(Overview())
        self.set_interval(0.1, self._tick)

    def _tick(self) -> None:
        if self.busy:
            self.spin += 1
            self.redraw()

    def redraw(self) -> None:
        """Draw the screen on top again."""
        self.generation += 1
        for widget in self.screen.query(Picture):
            widget.refresh()
        for lines in self.screen.query("#grid"):
            lines.refresh()

    def need(self, row: int, what: str) -> RowData | None:
        """The row's data when computed; else start computing it (once) and return None."""
        data = self.source.ready(row, what)
        key = (row, what)
        if (data is not None and getattr(data, "alive", True)) or key in self.busy \
                or key in self.errors:
            return data
        self.busy.add(key)
        self._start(key, lambda: self.source.get(row, what))
        return data

    def later(self, key: Any, work: Callable[[], Any]) -> Any:
        """work's value once a worker has computed it; None (and started) until then."""
        if key in self.values:
            return self.values[key]
        if key not in self.busy and key not in self.errors:
            self.busy.add(key)
            self._start(key, work)
        return None

    def _start(self, key: Any, work: Callable[[], Any]) -> None:
        """work on a daemon thread of its own (not Textual's workers, which run on the event
        loop's executor: leaving the app would wait for a layer's pass to finish)."""
        threading.Thread(target=self._compute, args=(key, work), name=WORKER,
                         daemon=True).start()

    def _compute(self, key: Any, work: Callable[[], Any]) -> None:
        failed = None
        try:
            self.values[key] = work()
        except AttnCliError as err:
            failed = str(err)
        except MemoryError:
            failed = "out of memory: try a shorter text"
        try:
            if failed is not None:
                self.call_from_thread(self._failed, key, failed)
            self.call_from_thread(self._done, key)
        except RuntimeError:  # the app has closed meanwhile: nobody to tell
            pass

    def _done(self, key: Any) -> None:
        self.busy.discard(key)
        self.redraw()

    def _failed(self, key: Any, message: str) -> None:
        self.errors[key] = message
        self.notify(message, severity="error", timeout=8, markup=False)

    def status_line(self) -> Text:
        """The selection in words, with a spinner while something is computed."""
        line = status(self.source, self.sel, self.source.ready(self.sel.row, self.sel.view))
        error = self.errors.get((self.sel.row, self.sel.what))
        if not self.busy and error is None:
            return line
        first = Text(f"{SPIN[self.spin % len(SPIN)]} computing…", "bold yellow") \
            if self.busy else Text(error or "", "red")
        first.no_wrap, line.no_wrap = True, True  # the news first, then the selection's line
        first.overflow = line.overflow = "ellipsis"
        return Text("\n").join([first, line])

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
            self.sel.query = where
            if isinstance(self.screen, Overview):
                self.screen.action_open()
            self.redraw()

        self.push_screen(FindScreen(), found)

    def action_save(self) -> None:
        page = self.source.pages is not None and self.source.pages(self.sel.row) is not None
        self.push_screen(SaveScreen(page), self._save)

    def _save(self, kind: str | None) -> None:
        if kind is None or self.saver is None:
            return
        try:
            screen = self.screen
        except ScreenStackError:  # a save chosen after Ctrl-C or q ended the app: nothing shown
            return
        width, height = self.size
        console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                          color_system="truecolor", record=True, legacy_windows=False)
        console.print(screen._compositor.render_update(full=True))
        page = self.source.pages(self.sel.row) if self.source.pages else None
        try:
            where = self.saver(kind, console, page)
        except AttnCliError as err:
            self.notify(str(err), severity="error", timeout=8, markup=False)
            return
        self.notify(f"saved {where}", timeout=8, markup=False)


if TYPE_CHECKING:
    _IS_A_BROWSER: type[Browser] = BrowseApp  # mypy checks that the app is what screens expect
