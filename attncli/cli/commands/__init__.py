"""One module per command; importing this package registers them all on the app, in help order."""

from attncli.cli.commands import compare, demo, explain, heads, lessons, run, tokens

__all__ = ["compare", "demo", "explain", "heads", "lessons", "run", "tokens"]
