"""How results show themselves: the page inside an iframe for notebooks (HTML), Rich text for
terminals and IPython, and which of the two a Python session is."""

from __future__ import annotations

import html
import io
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from rich.console import Console, ConsoleOptions, RenderableType

    Build = Callable[[Console], RenderableType]


def page_frame(doc: dict[str, Any], extra: dict[str, Any], title: str) -> str:
    """The interactive page (self-contained, no network) as one iframe for a notebook cell: its
    script and styles stay inside, so many results in one notebook never collide."""
    from attncli.render.page import render_page

    page = "".join(render_page(doc, title, extra))
    rows = len(doc.get("tokens", []))
    height = max(360, min(900, 260 + 28 * rows))
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" title="{html.escape(title)}" '
            f'sandbox="allow-scripts" style="width:100%;height:{height}px;border:0;'
            'resize:vertical;overflow:auto"></iframe>')


def text_of(build: Build, colour: bool, width: int | None = None) -> str:
    """What build draws, as text at the terminal's width (100 when none): ANSI when asked."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=width or _width(), force_terminal=colour,
                      force_jupyter=False,  # in a kernel Rich would display, not write, it
                      no_color=not colour or "NO_COLOR" in os.environ, highlight=False,
                      color_system="truecolor" if colour else None)
    console.print(build(console))
    return buffer.getvalue().rstrip("\n")


def _width() -> int:
    try:
        return max(40, min(200, os.get_terminal_size(sys.__stdout__.fileno()).columns))  # type: ignore[union-attr]
    except (OSError, ValueError, AttributeError):
        return 100


def shell_kind() -> str | None:
    """"notebook" (Jupyter, VS Code: a kernel shows HTML), "terminal" (IPython), or None."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    if shell is None:
        return None
    return "terminal" if type(shell).__name__ == "TerminalInteractiveShell" else "notebook"


def on_terminal() -> bool:
    """Whether stdout is a terminal that takes colour (NO_COLOR respected)."""
    try:
        return sys.stdout.isatty() and "NO_COLOR" not in os.environ
    except (AttributeError, ValueError):
        return False


def print_out(build: Build) -> None:
    """Print to stdout as the CLI does: colour only on a terminal, NO_COLOR respected."""
    from rich.console import Console

    console = Console(highlight=False)
    console.print(build(console))


class Shown:
    """What every result offers a notebook, IPython and Rich: a subclass gives renderable(),
    page() and summary()."""

    def renderable(self, console: Console) -> RenderableType:
        """What the CLI would print for this result, drawn for console."""
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return self.page()

    def page(self) -> str:
        """The result's HTML for a notebook."""
        raise NotImplementedError

    def summary(self) -> str:
        """One line naming the result (its repr)."""
        raise NotImplementedError

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        yield self.renderable(console)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary() if cycle else text_of(self.renderable, on_terminal()))

    def __str__(self) -> str:
        return text_of(self.renderable, colour=False)

    def __repr__(self) -> str:
        return self.summary()
