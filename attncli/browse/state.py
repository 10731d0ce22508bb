"""Where the user is in browse: the selected row, head and query, what is shown, and the
windows of the head view. Plain data, so the keys' effects are tested without a terminal."""

from __future__ import annotations

from dataclasses import dataclass

from attncli.browse.source import WEIGHTS, Source

OVERLAYS = ("first", "prev", "previous_token", "induction", "duplicate_token", "self", "entropy")


@dataclass
class Selection:
    """The selected head and query, and what the views show of them."""

    row: int = 0
    head: int = 0
    query: int = 0
    view: str = WEIGHTS  # weights, norm or rollout
    stage: str = WEIGHTS  # a chapter-3 stage in the head view
    overlay: str = "first"  # the score written under each thumbnail
    exact: bool | None = None  # the head view: exact window (True), pooled (False), auto (None)

    @property
    def what(self) -> str:
        """The data key the head view reads: the stage when one is picked, else the view."""
        return self.stage if self.stage != WEIGHTS else self.view


def cycle(options: tuple[str, ...], current: str) -> str:
    """The option after current (the first when current is not one of them)."""
    return options[(options.index(current) + 1) % len(options)] if current in options \
        else options[0]


def clamp(value: int, low: int, high: int) -> int:
    """value within low..high (high wins when the range is empty)."""
    return max(low, min(value, high))


def move(sel: Selection, source: Source, rows: int = 0, heads: int = 0) -> None:
    """Move the selection by rows and heads, staying on the grid."""
    sel.row = clamp(sel.row + rows, 0, len(source.rows) - 1)
    sel.head = clamp(sel.head + heads, 0, heads_shown(sel, source) - 1)


def heads_shown(sel: Selection, source: Source) -> int:
    """Heads of the selected row as its view shows them (rollout has one: the heads' mean)."""
    return 1 if sel.view == "rollout" else source.rows[sel.row].heads


def window(query: int, size: int, room: int, causal: bool, rows: bool) -> range:
    """The exact window's rows (centred on the query) or columns (ending at it when causal)."""
    room = max(1, min(room, size))
    if rows or not causal:
        start = clamp(query - room // 2, 0, size - room)
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
