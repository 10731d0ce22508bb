"""Output printed part by part as it is made: a Group's parts in turn, a part made only when it
is reached (Later), a listing in chunks of rows (draw/listing.py), lines in chunks (Lines)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

from attncli.render.draw.listing import CHUNK_ROWS, Listing, flush_lines, width_of


class Later:
    """A renderable made only when it is reached, so that what comes before it goes out first."""

    def __init__(self, make: Callable[[], RenderableType]) -> None:
        self.make = make

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.make()


class Lines:
    """Lines made as they are printed, CHUNK_ROWS at a time, each cut at the console's width as
    a Text with no_wrap and overflow "crop" cuts its lines (a str: a line with no style)."""

    def __init__(self, lines: Callable[[], Iterable[Text | str]]) -> None:
        self.lines = lines

    def print_to(self, console: Console) -> None:
        """Print the lines as they are made."""
        plain, width = console.color_system is None, console.width
        batch: list[Text | str] = []
        for line in self.lines():
            batch.append(_cropped(line, width, plain))
            if len(batch) >= CHUNK_ROWS:
                flush_lines(console, batch, plain)
                batch = []
        flush_lines(console, batch, plain)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines():
            text = Text(line) if isinstance(line, str) else line
            text.truncate(options.max_width, overflow="crop")
            yield from text.render(console)
            yield Segment.line()


    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        # As Rich measures one Text of these lines (inside Columns, say): every line is made.
        plain = [line if isinstance(line, str) else line.plain for line in self.lines()]
        widest = max((cell_len(line) for line in plain), default=0)
        words = [word for line in plain for word in line.split()]
        return Measurement(max((cell_len(word) for word in words), default=widest), widest)


def _cropped(line: Text | str, width: int, plain: bool) -> Text | str:
    if isinstance(line, str) and width_of(line) <= width:
        return line
    text = Text(line) if isinstance(line, str) else line
    text.truncate(width, overflow="crop")
    return text.plain if plain else text


def print_streamed(console: Console, renderable: RenderableType) -> None:
    """Print renderable part by part: a Group's parts in turn, a Listing or Lines in chunks."""
    if isinstance(renderable, Group):
        for part in renderable.renderables:
            print_streamed(console, part)
    elif isinstance(renderable, Later):
        print_streamed(console, renderable.make())
    elif isinstance(renderable, Listing | Lines):
        renderable.print_to(console)
    else:
        console.print(renderable)
