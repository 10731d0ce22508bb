"""The command line: the Typer app, its options, and where output goes."""

from attncli.cli.app import main

__all__ = ["main"]
