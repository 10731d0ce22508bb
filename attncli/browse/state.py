"""What browse draws, as plain data: the selection (row, head, query, what is shown), what the
workers have computed, and the windows of the head view. The app holds these as reactive state
and hands them to its screens; every change is a function from one selection to the next, so the
keys' effects are tested without a terminal."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from attncli.browse.patterns import RowData
from attncli.browse.source import WEIGHTS, Source

OVERLAYS = ("first", "prev", "previous_token", "induction", "duplicate_token", "self", "entropy")


@dataclass(frozen=True)
class Selection:
    """The selected head and query, and what the views show of them."""

    row: int = 0
    head: int = 0
    query: int = 0
    view: str = WEIGHTS  # weights, norm or rollout
    stage: str = WEIGHTS  # a chapter-3 stage in the head view
    overlay: str = "first"  # the score written under each thumbnail
    exact: bool | None = None  # the head view: exact window (True), pooled (False), auto (None)
    position: int = 0  # a patch's per-position cells: the position selected

    @property
    def what(self) -> str:
        """The data key the head view reads: the stage when one is picked, else the view."""
        return self.stage if self.stage != WEIGHTS else self.view


def first_selection(source: Source) -> Selection:
    """Where browse opens: the source's first row, on a generation's first answer step."""
    return Selection(row=source.start, query=source.answer or 0)


def alive(data: Any) -> bool:
    """Whether computed data can be drawn (a released tiled pass must be computed again)."""
    return bool(getattr(data, "alive", True))


@dataclass(frozen=True, eq=False)
class Results:
    """What the workers have computed (by key: a row's view or stage, a head's pooled blocks),
    what they are computing, and what failed, with why. Each change makes a new record."""

    done: Mapping[Any, Any] = field(default_factory=dict)  # by a hashable key
    busy: frozenset[Hashable] = frozenset()
    errors: Mapping[Any, str] = field(default_factory=dict)

    def wants(self, key: Hashable, pictures: bool = False) -> bool:
        """Whether key is to be computed: not held, not being computed, not failed (pictures:
        a released tiled pass's pictures and scores will do, as in the overview)."""
        held = key in self.done and (pictures or alive(self.done[key]))
        return not held and key not in self.busy and key not in self.errors

    def started(self, key: Hashable) -> Results:
        """key being computed."""
        return replace(self, busy=self.busy | {key})

    def finished(self, key: Hashable, found: Mapping[Any, Any]) -> Results:
        """key's work done: found (key's value, and what was computed alongside it) kept."""
        return replace(self, done={**self.done, **found}, busy=self.busy - {key})

    def failed(self, key: Hashable, message: str | None) -> Results:
        """key's work failed (message None: its data went away meanwhile; asked again later)."""
        errors = self.errors if message is None else {**self.errors, key: message}
        return replace(self, busy=self.busy - {key}, errors=errors)

    def row(self, row: int, what: str) -> RowData | None:
        """The row's data (a view or a stage) when computed and still held."""
        data = self.done.get((row, what))
        return data if data is not None and alive(data) else None


@dataclass(frozen=True, eq=False)
class State:
    """What a screen draws: the selection, the workers' results, and the colour depth."""

    sel: Selection
    results: Results = field(default_factory=Results)
    depth: str | None = None  # truecolor, 256, 16 or None (no colour)


def cycle(options: tuple[str, ...], current: str) -> str:
    """The option after current (the first when current is not one of them)."""
    return options[(options.index(current) + 1) % len(options)] if current in options \
        else options[0]


def clamp(value: int, low: int, high: int) -> int:
    """value within low..high (high wins when the range is empty)."""
    return max(low, min(value, high))


def moved(sel: Selection, source: Source, rows: int = 0, heads: int = 0) -> Selection:
    """The selection moved by rows and heads, staying on the grid."""
    row = clamp(sel.row + rows, 0, len(source.rows) - 1)
    head = clamp(sel.head + heads, 0, heads_shown(replace(sel, row=row), source) - 1)
    return replace(sel, row=row, head=head)


def heads_shown(sel: Selection, source: Source) -> int:
    """Heads of the selected row as its view shows them (rollout has one: the heads' mean)."""
    return 1 if sel.view == "rollout" else source.rows[sel.row].heads


def at_query(sel: Selection, source: Source, query: int) -> Selection:
    """The selection with query as the query token, within the text."""
    return replace(sel, query=clamp(query, 0, len(source.tokens) - 1))


def next_view(sel: Selection, source: Source, stage: str | None = None) -> Selection:
    """`v`: the row's next view, the head within the view's (and stage, when given, picked)."""
    chosen = replace(sel, view=cycle(source.rows[sel.row].views, sel.view),
                     stage=sel.stage if stage is None else stage)
    return moved(chosen, source)


def next_stage(sel: Selection, source: Source) -> Selection:
    """`s`: the row's next stage."""
    return replace(sel, stage=cycle(source.rows[sel.row].stages, sel.stage))


def block_step(query: int, starts: list[int], step: int) -> int:
    """↑/↓ on pooled blocks: the query at the start of the block above or below query's."""
    if step < 0:
        above = [s for s in starts if s < query]
        return above[-1] if above else 0
    below = [s for s in starts if s > query]
    return below[0] if below else query


def window(query: int, size: int, room: int, causal: bool, rows: bool, first: int = 0) -> range:
    """The exact window's rows (centred on the query; from first on, room allowing, when the
    query is there) or columns (ending at it when causal)."""
    room = max(1, min(room, size))
    if rows or not causal:
        low = min(first, size - room) if query >= first else 0
        start = clamp(query - room // 2, low, size - room)
    else:
        start = clamp(query + 1 - room, 0, size - room)
    return range(start, start + room)


def find(tokens: list[str], text: str, after: int) -> int | None:
    """The first token after `after` (wrapping round) whose text holds text, ignoring case."""
    needle = text.casefold().strip() or text.casefold()
    if not needle:
        return None
    count = len(tokens)
    for step in range(1, count + 1):
        k = (after + step) % count
        if needle in tokens[k].casefold():
            return k
    return None
