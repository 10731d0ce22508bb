"""The command line: the Typer app, its options, and where output goes."""

from attncli.cli.main import main

__all__ = ["main"]
