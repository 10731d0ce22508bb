"""What to show: stage lists, --rows/--cols windows and --query, parsed and checked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from attncli.core.result import LongResult, Result
    from attncli.render.views import ViewOptions

CANDIDATES_SHOWN = 8
GRID = 128  # the most blocks a long run's pooled heatmap has on each side


@dataclass(frozen=True)
class Window:
    """A Python-slice-like a:b window, half-open and 0-based; either end may be absent."""

    option: str
    start: int | None = None
    stop: int | None = None

    def resolve(self, size: int) -> tuple[int, int]:
        """The concrete [a, b) range in 0..size; an empty or out-of-range window is an error."""
        start = 0 if self.start is None else self.start
        stop = size if self.stop is None else self.stop
        for end in (start, stop):
            if not -size <= end <= size:
                raise AttnCliError(f"{self.option} {self.text()} is out of range: this run has "
                                   f"{size} tokens (indices 0 to {size - 1}, or -{size} to -1)")
        start, stop = start % size if start < 0 else start, stop % size if stop < 0 else stop
        if start >= stop:
            raise AttnCliError(f"{self.option} {self.text()} selects nothing "
                               f"(it resolves to {start}:{stop} of {size} tokens)")
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


@dataclass(frozen=True)
class DisplaySpec:
    """The display options as given, syntax-checked before any work."""

    precision: int = 4
    view: str = "auto"
    rows: Window | None = None
    cols: Window | None = None
    head: int | None = None
    query: str | None = None
    stages: tuple[str, ...] | None = None
    lang: str = "en"

    def window(self, size: int) -> dict[str, list[int]] | None:
        """The JSON "window" object, or None without --rows/--cols."""
        if self.rows is None and self.cols is None:
            return None
        full = Window("", None, None)
        return {"rows": list((self.rows or full).resolve(size)),
                "cols": list((self.cols or full).resolve(size))}


@dataclass(frozen=True)
class LongView:
    """What a long run rebuilds from the log-sum-exp to be shown, beyond its per-row stats."""

    rows: Window | None = None  # --rows: the window's query rows
    cols: Window | None = None  # --cols: the window's key columns
    query: str | None = None  # --query: one exact row of weights
    head: int | None = None  # --head: the only head pooled into a heatmap
    stages: tuple[str, ...] | None = None  # --show, which the tiled path cannot serve
    maps: bool = False  # pooled heatmaps of the heads shown, for the terminal
    grid: int = GRID

    @classmethod
    def of(cls, spec: DisplaySpec, maps: bool) -> LongView:
        """The windows, query, head and stages of spec; maps for a terminal view."""
        return cls(rows=spec.rows, cols=spec.cols, query=spec.query, head=spec.head,
                   stages=spec.stages, maps=maps)


def display_spec(precision: int = 4, view: str = "auto", rows: str | None = None,
                 cols: str | None = None, head: int | None = None, query: str | None = None,
                 show: str | None = None, lang: str = "en",
                 stage_names: Sequence[str] = ()) -> DisplaySpec:
    """Parse --rows, --cols and --show; their ranges are checked later, against the result."""
    return DisplaySpec(
        precision=precision, view=view,
        rows=None if rows is None else parse_window(rows, "--rows"),
        cols=None if cols is None else parse_window(cols, "--cols"),
        head=head, query=query, lang=lang,
        stages=None if show is None else parse_names(show, stage_names, "--show"))


def check_stages(stages: Sequence[str], available: Sequence[str], variant: str) -> None:
    """Reject a --show stage this run does not have, naming those it has."""
    for name in stages:
        if name not in available:
            hint = " (dropped needs --dropout > 0)" if name == "dropped" else ""
            raise AttnCliError(f"--show {name}: this {variant} run has no {name} stage{hint}; "
                               f"it has {', '.join(available)}")


def check_head(head: int | None, num_heads: int) -> None:
    """Reject a --head outside 0..num_heads-1."""
    if head is not None and not 0 <= head < num_heads:
        raise AttnCliError(f"--head {head} is out of range: this run has {num_heads} head(s), "
                           f"numbered 0 to {num_heads - 1}")


def resolve(spec: DisplaySpec, result: Result | LongResult) -> ViewOptions:
    """Check windows, --query and --show against the result and turn them into ViewOptions.

    --head is checked by check_head, which every command shares.
    """
    from attncli.render.views import ViewOptions

    size = len(result.tokens)
    if spec.stages is not None:
        check_stages(spec.stages, result.available_stages(), result.variant)
    return ViewOptions(
        precision=spec.precision, view=spec.view,
        rows=None if spec.rows is None else spec.rows.resolve(size),
        cols=None if spec.cols is None else spec.cols.resolve(size),
        head=spec.head, stages=spec.stages, lang=spec.lang,
        query=None if spec.query is None else resolve_query(spec.query, result.labels))
