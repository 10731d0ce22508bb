"""The Typer app and its root options; each command lives in its own module of cli/commands/."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from attncli.version import __version__

NARROW = 48  # help narrower than this narrows its option column too


PAD = "\ue000"  # a private-use character: the second cell of a wide one while wrapping


def _padded(text: str) -> str:
    """text with each wide character (CJK: two cells) followed by PAD, so that a wrap that
    counts characters counts cells; write() takes the PADs out."""
    import unicodedata

    return "".join(c + PAD if unicodedata.east_asian_width(c) in "WF" else c for c in text)


# click's formatter, as the click that typer runs on has it (typer 0.28 carries its own)
_Formatter: Any = typer.Context.formatter_class


class HelpFormatter(_Formatter):
    """Click's --help, fitted to the terminal below click's 50-column floor (COLUMNS=40: 38
    wide, each option over its help), a wide character counted as two cells."""

    width: int
    current_indent: int

    def __init__(self, indent_increment: int = 2, width: int | None = None,
                 max_width: int | None = None) -> None:
        if width is None:
            import shutil

            from attncli.cli.streams import clamp_width

            columns = clamp_width(shutil.get_terminal_size().columns)
            width = min(columns, max_width or 80) - 2  # click's, without its floor
        super().__init__(indent_increment, width, max_width)

    def write(self, string: str) -> None:
        """Writes string, the PADs that held wide characters' second cells taken out."""
        super().write(string.replace(PAD, ""))

    def write_text(self, text: str) -> None:
        """A paragraph wrapped to the terminal's cells, not its characters."""
        super().write_text(_padded(text))

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30,
                 col_spacing: int = 2) -> None:
        """Options and their help in two columns; on a narrow terminal, each option on its
        own line(s) and its help indented below it."""
        rows = [(first, _padded(second)) for first, second in rows]
        if self.width >= NARROW:
            super().write_dl(rows, col_max, col_spacing)
            return
        import textwrap

        indent, room = " " * self.current_indent, self.width - self.current_indent
        for first, second in rows:
            lines = textwrap.wrap(first, room, subsequent_indent="  ",
                                  break_on_hyphens=False) or [""]
            self.write("".join(f"{indent}{line}\n" for line in lines))
            if second:
                self.write(textwrap.fill(second, room, initial_indent=indent + "    ",
                                         subsequent_indent=indent + "    ",
                                         break_on_hyphens=False) + "\n")


class HelpContext(typer.Context):
    """A command's context, whose --help is HelpFormatter's."""

    formatter_class = HelpFormatter


class Group(TyperGroup):
    """The app, its --help fitted as its commands' are."""

    context_class = HelpContext


app = typer.Typer(
    help="See attention: tokenise text, embed it, run one attention variant and show the "
    "weights and context vectors as coloured tables or JSON.",
    no_args_is_help=True,
    add_completion=True,  # bash, zsh, fish: --install-completion (bench/completion.py: its cost)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=Group,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"attncli {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """See attention in your terminal: attncli run "Your journey starts with one step"."""
