"""The Typer app and its root options; each command lives in its own module of cli/commands/."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.version import __version__

app = typer.Typer(
    help="See attention: tokenise text, embed it, run one attention variant and show the "
    "weights and context vectors as coloured tables or JSON.",
    no_args_is_help=True,
    add_completion=True,  # bash, zsh, fish: --install-completion (bench/completion.py: its cost)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
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
