"""What browse's screens and workers tell the app: a change of the selection, a head to open or
mark, something to compute, and a worker's result. The app holds the state; screens draw the
state it hands them and say what they want changed or computed."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import partial
from typing import Any

from textual.message import Message

from attncli.browse.source import Source
from attncli.browse.state import Selection


class Selected(Message):
    """A key or a click changes the selection: change maps the app's selection to the new one
    (applied in order to the latest, so keys typed faster than the screens draw all count)."""

    def __init__(self, change: Callable[[Selection], Selection]) -> None:
        super().__init__()
        self.change = change


class OpenHead(Message):
    """Enter or a double click: open the selected head."""


class MarkHead(Message):
    """`c`: mark the selected head, or compare it with the one marked."""


class Wanted(Message):
    """A screen draws something not computed yet: key names it, and work computes it with what
    comes alongside, as key → value (a pass gives every layer at once)."""

    def __init__(self, key: Hashable, work: Callable[[], Mapping[Any, Any]],
                 pictures: bool = False) -> None:
        super().__init__()
        self.key, self.work, self.pictures = key, work, pictures

    @classmethod
    def row(cls, source: Source, row: int, what: str, pictures: bool = False) -> Wanted:
        """A row's view or stage (pictures: its thumbnails and scores will do)."""
        return cls((row, what), partial(source.fetch, row, what), pictures)


class Computed(Message):
    """A worker's result: key's value and what came alongside it."""

    def __init__(self, key: Hashable, found: Mapping[Any, Any]) -> None:
        super().__init__()
        self.key, self.found = key, found


class Failed(Message):
    """A worker's failure, in one line (None: what it worked on went away; asked again later)."""

    def __init__(self, key: Hashable, why: str | None) -> None:
        super().__init__()
        self.key, self.why = key, why
