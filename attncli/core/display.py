"""What to show: the one display record, and the stage lists, windows and queries it is made of.

It sits below both the computation (which materialises windows and query rows) and the
renderers (which draw them), so neither imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from attncli.core.result import Result

CANDIDATES_SHOWN = 8  # the tokens a --query that matches several lists


@dataclass(frozen=True)
class Window:
    """A Python-slice-like a:b window, half-open and 0-based; either end may be absent."""

    option: str
    start: int | None = None
    stop: int | None = None

    def resolve(self, size: int, unit: str = "tokens") -> tuple[int, int]:
        """The concrete [a, b) range in 0..size (of unit: tokens, layers); an empty or
        out-of-range window is an error."""
        start = 0 if self.start is None else self.start
        stop = size if self.stop is None else self.stop
        for end in (start, stop):
            if not -size <= end <= size:
                raise AttnCliError(f"{self.option} {self.text()} is out of range: this run has "
                                   f"{size} {unit} (indices 0 to {size - 1}, or -{size} to -1)")
        start, stop = start % size if start < 0 else start, stop % size if stop < 0 else stop
        if start >= stop:
            raise AttnCliError(f"{self.option} {self.text()} selects nothing "
                               f"(it resolves to {start}:{stop} of {size} {unit})")
        return start, stop

    def text(self) -> str:
        """The window as the user wrote it, normalised."""
        start = "" if self.start is None else self.start
        return f"{start}:{'' if self.stop is None else self.stop}"


def parse_window(text: str, option: str) -> Window:
    """Parse 'a:b', 'a:', ':b', ':' or a single index 'i' (meaning i:i+1)."""
    def number(part: str) -> int | None:
        part = part.strip()
        if not part:
            return None
        try:
            if not re.fullmatch(r"[+-]?[0-9]+", part):  # int() reads ０ and 1_0 as numbers
                raise ValueError(part)
            return int(part)
        except ValueError:
            raise AttnCliError(f"{option} {text!r} is not a window: expected a:b with whole "
                               "numbers, either end optional (e.g. 0:10, 5:, :-3)") from None

    if ":" not in text:
        index = number(text)
        if index is None:
            raise AttnCliError(f"{option} is empty: expected a:b (e.g. 0:10)")
        return Window(option, index, None if index == -1 else index + 1)
    if text.count(":") > 1:
        number("x")  # raises the syntax error
    start, stop = text.split(":")
    return Window(option, number(start), number(stop))


def parse_names(text: str, choices: Sequence[str], option: str) -> tuple[str, ...]:
    """A comma-separated list of names from choices, without repeats."""
    names = tuple(part.strip() for part in text.split(","))
    if not text.strip() or not all(names):
        raise AttnCliError(f"{option} needs a comma-separated list from: {', '.join(choices)}")
    for name in names:
        if name not in choices:
            raise AttnCliError(f"{option}: unknown name {name!r} (choose from "
                               f"{', '.join(choices)})")
        if names.count(name) > 1:
            raise AttnCliError(f"{option} lists {name!r} more than once")
    return names


def _listing(labels: Sequence[str], indices: Sequence[int]) -> str:
    shown = ", ".join(f"{i} {labels[i]!r}" for i in indices[:CANDIDATES_SHOWN])
    more = len(indices) - CANDIDATES_SHOWN
    return shown + (f", … ({more} more)" if more > 0 else "")


def resolve_query(spec: str, labels: Sequence[str]) -> int:
    """A query index from an index or a unique token label (also matched without its space)."""
    size = len(labels)
    try:
        index = int(spec.strip())
    except ValueError:
        index = None
    if index is not None:
        if not 0 <= index < size:
            raise AttnCliError(f"--query {index} is out of range: this run has {size} tokens, "
                               f"numbered 0 to {size - 1}")
        return index
    matches = [i for i, label in enumerate(labels) if spec in (label, label.lstrip(" "))]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise AttnCliError(f"--query {spec!r} matches {len(matches)} tokens: "
                           f"{_listing(labels, matches)}; give the index instead")
    raise AttnCliError(f"--query {spec!r} matches no token; the tokens are: "
                       f"{_listing(labels, list(range(size)))}")


def check_stages(stages: Sequence[str], available: Sequence[str], variant: str) -> None:
    """Reject a --show stage this run does not have, naming those it has."""
    for name in stages:
        if name not in available:
            hint = " (dropped needs --dropout > 0)" if name == "dropped" else ""
            raise AttnCliError(f"--show {name}: this {variant} run has no {name} stage{hint}; "
                               f"it has {', '.join(available)}")




class View(str, Enum):
    """How a matrix is drawn."""

    auto = "auto"
    table = "table"
    heatmap = "heatmap"


class Scale(str, Enum):
    """The colour range: one per quantity in the command, one per table, or weights on 0-1."""

    shared = "shared"
    table = "table"
    unit = "unit"


class Lang(str, Enum):
    """The language of titles and explanations."""

    en = "en"
    zh = "zh"


@dataclass(frozen=True)
class Display:
    """The user's view choices, windows and query already resolved against the result."""

    precision: int = 4
    view: View = View.auto  # table, heatmap, or auto: a table when it fits, else a heatmap
    rows: tuple[int, int] | None = None  # token rows shown, [a, b)
    cols: tuple[int, int] | None = None  # key columns of token × token matrices, [c, d)
    stages: tuple[str, ...] | None = None  # stages picked with --show
    lang: str = "en"
    scale: str = "shared"  # colour range: shared per quantity, per table, or unit (0-1 weights)


def parse_stages(show: str | None, stage_names: Sequence[str]) -> tuple[str, ...] | None:
    """--show's stage list, checked against every stage name (None without --show)."""
    return None if show is None else parse_names(show, stage_names, "--show")


def parse_windows(rows: str | None, cols: str | None) -> tuple[Window | None, Window | None]:
    """--rows and --cols, syntax-checked; their ranges are checked against the result."""
    return (None if rows is None else parse_window(rows, "--rows"),
            None if cols is None else parse_window(cols, "--cols"))


def display_of(result: Result, precision: int, view: View, rows: Window | None = None,
               cols: Window | None = None, stages: tuple[str, ...] | None = None,
               lang: str = "en", scale: Scale = Scale.shared) -> Display:
    """The display record for a result: --rows/--cols resolved against its tokens."""
    size = len(result.tokens)
    return Display(precision=precision, view=view,
                   rows=None if rows is None else rows.resolve(size),
                   cols=None if cols is None else cols.resolve(size), stages=stages, lang=lang,
                   scale=scale.value)
